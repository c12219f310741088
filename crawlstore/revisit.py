"""Revisit intervals that belong to the tag type: ``RevisitTags`` members carry ``revisit("1h")``.

A malformed, zero or negative interval is rejected when the class is defined (at import, not when
a crawl first meets the tag), with an error naming the member and the string.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import InvalidInterval

__all__ = ["Adapt", "Revisit", "RevisitTags", "TagIntervals", "once", "parse_interval", "revisit"]

_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")


def parse_interval(text: str) -> float:
    """Seconds in an interval such as ``"90s"``, ``"1h30m"`` or ``"1d"`` (units d, h, m, s,
    each at most once, largest first). Raises ``InvalidInterval`` naming the string."""
    if not isinstance(text, str):
        raise InvalidInterval(f"an interval is a string such as '1h30m', not {text!r}")
    parts = _PART.findall(text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip().replace(" ", ""):
        raise InvalidInterval(f"interval {text!r} is not like '90s', '1h30m' or '1d'")
    units = [u for _, u in parts]
    if len(set(units)) != len(units) or units != sorted(units, key="dhms".index):
        raise InvalidInterval(f"interval {text!r} repeats a unit or puts them out of order")
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise InvalidInterval(f"interval {text!r} must be longer than zero")
    return seconds


@runtime_checkable
class Revisit(Protocol):
    """What ``frontier.revisit(...)`` needs: the interval of a tag, or None to crawl it once.

    A ``RevisitTags`` enum class is one; an interval known only at runtime (from a
    configuration file) takes a hand-written object with this method.
    """

    def interval(self, tag: str | None) -> float | None: ...


class TagIntervals:
    """A ``Revisit`` of intervals known at runtime, by tag name: seconds, or strings such as
    ``"1h30m"`` (``TagIntervals({"news": "10m", "feed": 90})``); a tag it does not name, or
    no tag, is crawled once."""

    def __init__(self, intervals: Mapping[str, str | float]) -> None:
        self._seconds = {tag: _seconds(tag, value) for tag, value in intervals.items()}

    def interval(self, tag: str | None) -> float | None:
        return self._seconds.get(tag) if tag is not None else None


def _seconds(tag: str, value: str | float) -> float:
    if isinstance(value, str):
        return parse_interval(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidInterval(f"the interval of {tag!r} is seconds > 0 or a string such as "
                              f"'1h30m', not {value!r}")  # fmt: skip
    return float(value)


class revisit:
    """The value of a ``RevisitTags`` member that is crawled again ``text`` later.

    Each instance is distinct, so members with equal intervals never become aliases.
    """

    __slots__ = ("seconds", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.seconds: float | None = None

    def __repr__(self) -> str:
        return f"revisit({self.text!r})"


class once:
    """The value of a ``RevisitTags`` member that is crawled once (each instance distinct)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "once()"


class RevisitTags(enum.Enum):
    """Base class of tag enums whose members declare their revisit interval:

    ```python
    class Page(RevisitTags):
        LISTING = revisit("1h")
        PRODUCT = revisit("1d")
        ABOUT = once()             # no interval: crawled once
    ```
    """

    def __init__(self, *_: object) -> None:
        value = self._value_
        if isinstance(value, revisit):
            try:
                value.seconds = parse_interval(value.text)
            except InvalidInterval as exc:
                raise InvalidInterval(f"{type(self).__name__}.{self._name_}: {exc}") from None

    @classmethod
    def interval(cls, tag: str | None) -> float | None:
        """Seconds until a page tagged ``tag`` is crawled again; None: crawled once."""
        member = cls.__members__.get(tag) if tag is not None else None
        value = member.value if member is not None else None
        return value.seconds if isinstance(value, revisit) else None


@dataclass(frozen=True)
class Adapt:
    """Adaptive revisits on top of fixed intervals (as Nutch and StormCrawler have): a page found
    unchanged waits ``grow`` times longer next time, a changed one ``shrink`` times as long,
    its interval kept between ``min_factor`` and ``max_factor`` times the tag's interval.

    A change is known from a 304 (``Done(unchanged=True)``) or, where a server sends no
    validators, from the ``content_hash`` the caller passes in ``Done``.
    """

    min_factor: float = 0.25
    max_factor: float = 8.0
    grow: float = 1.5
    shrink: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.min_factor <= 1 <= self.max_factor:
            raise ValueError("need 0 < min_factor <= 1 <= max_factor")
        if self.grow < 1 or not 0 < self.shrink <= 1:
            raise ValueError("need grow >= 1 and 0 < shrink <= 1")

    def next_factor(self, factor: float, changed: bool | None) -> float:
        """The factor after a visit that found the page changed (True), unchanged (False), or
        could not tell (None)."""
        if changed is None:
            return factor
        factor *= self.shrink if changed else self.grow
        return min(self.max_factor, max(self.min_factor, factor))
