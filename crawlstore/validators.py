"""Validators: a page's ETag and Last-Modified, keyed by request fingerprint."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Protocol, runtime_checkable

from . import journal
from .errors import InvalidValidator
from .url import Fingerprint

__all__ = [
    "MAX_ETAG",
    "MAX_LAST_MODIFIED",
    "Headers",
    "InMemValidators",
    "Validator",
    "Validators",
    "validator_problem",
]


#: The longest ETag and Last-Modified kept (an HTTP date is 29 characters).
MAX_ETAG = 512
MAX_LAST_MODIFIED = 64

_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f]|[^\x00-\xff]")


def validator_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be sent back as the ``name`` validator ("etag" or
    "last_modified") in a request header; None when it can."""
    limit = MAX_ETAG if name == "etag" else MAX_LAST_MODIFIED
    if len(value) > limit:
        return f"is {len(value)} characters long, more than {limit}"
    if _FORBIDDEN.search(value):
        return "holds a control character (CR, LF, NUL ...) or one outside Latin-1"
    if name == "last_modified":
        try:
            parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return "is not an HTTP date"
    return None


@dataclass(frozen=True, slots=True)
class Validator:
    """What a server said identifies a page's version; at least one field is set.

    Each field is sent back in a request header, so a value with a control character (CR, LF),
    one longer than ``MAX_ETAG`` / ``MAX_LAST_MODIFIED``, or a Last-Modified that is not an HTTP
    date raises ``InvalidValidator``; ``from_headers`` drops such values instead."""

    etag: str | None = None
    last_modified: str | None = None

    def __post_init__(self) -> None:
        for name in ("etag", "last_modified"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, str):
                raise TypeError(f"Validator.{name} must be a str or None: {value!r:.100}")
            problem = validator_problem(name, value)
            if problem is not None:
                raise InvalidValidator(f"Validator.{name} {problem}: {value!r:.100}")

    def __bool__(self) -> bool:
        return self.etag is not None or self.last_modified is not None

    @classmethod
    def from_headers(cls, headers: Headers) -> Validator:
        """``ETag`` and ``Last-Modified`` of a response (names case-insensitive); empty when
        the response has neither. A value that cannot be sent back is dropped (see
        ``parse_headers`` to learn which)."""
        return cls.parse_headers(headers)[0]

    @classmethod
    def parse_headers(cls, headers: Headers) -> tuple[Validator, list[str]]:
        """The validators of a response and, for each value dropped, why."""
        lowered = _lowered(headers)
        return cls.lenient(lowered.get("etag"), lowered.get("last-modified"))

    @classmethod
    def lenient(cls, etag: object, last_modified: object) -> tuple[Validator, list[str]]:
        """The validators made of the values that can be sent back, and why others cannot."""
        kept: list[str | None] = []
        dropped = []
        for name, value in (("etag", etag), ("last_modified", last_modified)):
            if value is not None and not isinstance(value, str):
                problem: str | None = f"is a {type(value).__name__}, not a str"
            else:
                problem = validator_problem(name, value) if value is not None else None
            if problem is not None:
                dropped.append(f"{name} {problem}")
                value = None
            kept.append(value)  # type: ignore[arg-type]
        return cls(kept[0], kept[1]), dropped

    def merged(self, newer: Validator) -> Validator:
        """These validators with the fields ``newer`` has replaced (a 304 may update them)."""
        return Validator(newer.etag or self.etag, newer.last_modified or self.last_modified)


#: Response headers: a mapping (httpx.Headers, a dict) or name/value pairs.
Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def _lowered(headers: Headers) -> dict[str, str]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {name.lower(): value for name, value in items}


@runtime_checkable
class Validators(Protocol):
    """Where validators are kept: in memory for one run, or in a store across runs."""

    def get(self, fp: Fingerprint) -> Validator | None: ...

    def put(self, fp: Fingerprint, validator: Validator) -> None: ...

    def delete(self, fp: Fingerprint) -> None: ...

    def __len__(self) -> int: ...


class InMemValidators:
    """Validators in a dict, for one run. Changes inside a transaction are kept aside until it
    commits (other threads never see them before), and dropped when it rolls back."""

    def __init__(self) -> None:
        self._map: dict[Fingerprint, Validator] = {}
        self._lock = threading.Lock()
        #: a transaction's changes: fingerprint -> validator, or None for a deletion
        self._aside: journal.Aside[dict[Fingerprint, Validator | None]] = journal.Aside(
            dict, self._commit
        )

    def _commit(self, changes: dict[Fingerprint, Validator | None]) -> None:
        with self._lock:
            for fp, validator in changes.items():
                self._apply(fp, validator)

    def _apply(self, fp: Fingerprint, validator: Validator | None) -> None:
        if validator is None:
            self._map.pop(fp, None)
        else:
            self._map[fp] = validator

    def get(self, fp: Fingerprint) -> Validator | None:
        """The validators stored for ``fp``, or None."""
        changes = self._aside.of(journal.current())
        if changes is not None and fp in changes:
            return changes[fp]
        return self._map.get(fp)

    def put(self, fp: Fingerprint, validator: Validator) -> None:
        """Store ``validator``; an empty one deletes what was stored."""
        if not isinstance(validator, Validator):
            raise TypeError(f"expected a Validator, not {type(validator).__name__}")
        self._set(fp, validator or None)

    def delete(self, fp: Fingerprint) -> None:
        """Forget the validators of ``fp``."""
        self._set(fp, None)

    def _set(self, fp: Fingerprint, validator: Validator | None) -> None:
        txn = journal.current()
        with self._lock:
            if txn is None:
                self._apply(fp, validator)
            else:
                self._aside.for_write(txn)[fp] = validator

    def __len__(self) -> int:
        changes = self._aside.of(journal.current())
        if not changes:
            return len(self._map)
        with self._lock:
            return len(self._map.keys() - changes.keys()) + sum(
                v is not None for v in changes.values()
            )
