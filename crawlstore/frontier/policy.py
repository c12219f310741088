"""A crawl's policy, as values: its order and queue mode, politeness and lease time, at three
levels (the storage's defaults, the crawl, one queue), and the rule that says when a queue is
ready. The core applies it; storages only keep it.

Levels: a queue's own value wins, then the crawl's, then the storage-wide default. A value of
``None`` at a level means "inherit". ``max_in_flight`` has one more default: ``"auto"``, one
seed in flight a queue for per-host queues, no cap otherwise.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from ..errors import InvalidArgument
from ..seed import Seed

__all__ = [
    "DEFAULTS",
    "ORDERS",
    "CrawlPolicy",
    "Defaults",
    "QueueKey",
    "key_function",
    "register_queue_key",
]

ORDERS = ("priority", "fifo", "lifo")
QueueKey = Callable[[Seed], str]


def _host_key(seed: Seed) -> str:
    """One queue per host (and port, when it is not the default): the authority of the seed's
    URL, a WHATWG href (``scheme://[userinfo@]host[:port]/...``, an ``@`` in the userinfo
    percent-encoded), without its userinfo. The same as ``can_ada.parse(url).host``, without
    parsing the URL again."""
    return seed.url.split("/", 3)[2].rpartition("@")[2]


def _meta_key(seed: Seed) -> str:
    """The queue a seed names in ``meta["queue"]`` (a str), else its host's."""
    key = seed.meta.get("queue")
    return key if isinstance(key, str) else _host_key(seed)


_QUEUE_KEYS: dict[str, QueueKey] = {"single": lambda seed: "", "host": _host_key,
                                    "meta": _meta_key}  # fmt: skip


def register_queue_key(name: str, function: QueueKey) -> None:
    """Make ``function`` (seed -> queue key) a queue mode named ``name``: a crawl stores the
    name, so every process that opens the crawl registers the same function first."""
    if not isinstance(name, str) or not name or name in ("single", "host", "meta"):
        raise InvalidArgument(f"a queue mode name is a new non-empty str: {name!r}")
    if not callable(function):
        raise TypeError(f"a queue key function takes a seed and returns a str: {function!r}")
    _QUEUE_KEYS[name] = function


def key_function(name: str) -> QueueKey:
    """The queue key function of the mode ``name``."""
    try:
        return _QUEUE_KEYS[name]
    except KeyError:
        raise InvalidArgument(
            f"no queue mode {name!r} is registered here: call "
            f"crawlstore.register_queue_key({name!r}, function) before opening the crawl"
        ) from None


Cap = int | None | Literal["auto"]


@dataclass(frozen=True, slots=True)
class Defaults:
    """The storage-wide level, which crawls inherit (the URL Frontier's empty-key SetDelay).
    ``active``: False hands out nothing from any crawl (the URL Frontier's SetActive)."""

    delay: float = 0.0
    max_in_flight: Cap = "auto"
    lease_time: float = 600.0
    active: bool = True

    def __post_init__(self) -> None:
        for name in ("delay", "lease_time"):  # the last level: nothing to inherit from
            if getattr(self, name) is None:
                raise InvalidArgument(f"the store-wide {name} is a number of seconds, not None")
        check_delay("delay", self.delay)
        if check_delay("lease_time", self.lease_time) == 0:
            raise InvalidArgument("lease_time must be more than 0 seconds")
        if self.max_in_flight is None:
            raise InvalidArgument('the store-wide max_in_flight is "auto", an int, or -1 (no cap)')
        check_cap(self.max_in_flight, allow_auto=True)
        if not isinstance(self.active, bool):
            raise InvalidArgument(f"active is True or False: {self.active!r:.100}")

    def to_record(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Defaults:
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


@dataclass(frozen=True, slots=True)
class CrawlPolicy:
    """A crawl's policy. ``order`` and ``queues`` are fixed when the crawl is created; the
    others may change, and ``None`` inherits the storage-wide default."""

    order: str = "priority"
    queues: str = "single"
    delay: float | None = None
    max_in_flight: Cap | None = None  # None: inherit; "auto" or an int or, as -1, no cap
    lease_time: float | None = None

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise InvalidArgument(f"order must be one of {ORDERS}: {self.order!r}")
        if not isinstance(self.queues, str):
            raise InvalidArgument(f"queues names a queue mode (a str): {self.queues!r}")
        check_delay("delay", self.delay)
        check_delay("lease_time", self.lease_time)
        check_cap(self.max_in_flight, allow_auto=True)

    def to_record(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CrawlPolicy:
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})

    def merged(self, **changes: Any) -> CrawlPolicy:
        return replace(self, **changes)


def check_delay(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(f"{name} must be a finite number of seconds: {value!r:.100}")
    if value < 0:
        raise InvalidArgument(f"{name} must be at least 0: {value!r}")
    return float(value)


#: ``max_in_flight`` as stored: no cap.
NO_CAP = -1


def check_cap(cap: object, *, allow_auto: bool = False) -> Cap:
    if cap is None or cap == NO_CAP or (allow_auto and cap == "auto"):
        return cap
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise InvalidArgument(f"max_in_flight must be None or an int of at least 1: {cap!r}")
    return cap


@dataclass(frozen=True, slots=True)
class Effective:
    """The values in force for one queue, all levels resolved."""

    delay: float
    cap: int | None  # None: no cap
    limit: int | None  # seeds finished after which the queue hands out nothing more
    blocked_until: float
    lease_time: float


@functools.lru_cache(maxsize=4096)
def resolve(
    defaults: Defaults,
    crawl: CrawlPolicy,
    queue_delay: float | None,
    queue_cap: int | None,
    limit: int | None,
    blocked_until: float,
) -> Effective:
    delay = next(v for v in (queue_delay, crawl.delay, defaults.delay) if v is not None)
    cap: Cap = next(v for v in (queue_cap, crawl.max_in_flight, defaults.max_in_flight)
                    if v is not None)  # fmt: skip
    if cap == "auto":
        cap = 1 if crawl.queues == "host" else None
    elif cap == NO_CAP:
        cap = None
    lease = crawl.lease_time if crawl.lease_time is not None else defaults.lease_time
    return Effective(float(delay), cap, limit, blocked_until, float(lease))


def ready_at(
    queued: int, in_flight: int, finished: int, last: float, policy: Effective
) -> float | None:
    """When a queue may hand out its next seed: not before its block ends nor ``delay`` after
    its last pop; never while it is empty, at its in-flight cap, or past its limit."""
    if queued <= 0 or (policy.cap is not None and in_flight >= policy.cap):
        return None
    if policy.limit is not None and finished + in_flight >= policy.limit:
        return None  # its limit: those finished and those that may finish now
    return max(policy.blocked_until, last + policy.delay)


def next_event(
    queued: int,
    in_flight: int,
    finished: int,
    last: float,
    policy: Effective,
    due_at: float | None,
    expiry_at: float | None,
) -> float | None:
    """When the crawl's index holds a queue: the time it may next hand out a seed, counting
    the seed its earliest schedule brings when it falls due and the one its earliest lease
    brings back when it expires. Time passing alone never moves a queue in the index, so the
    order pop serves queues in does not depend on when anyone popped before. A queue that can
    hand out nothing without a report or a push (at its limit) is held at its next schedule
    or expiry, for their upkeep; None when it has neither."""
    start = max(policy.blocked_until, last + policy.delay)
    times = []
    if ready_at(queued, in_flight, finished, last, policy) is not None:
        times.append(start)
    if due_at is not None and ready_at(queued + 1, in_flight, finished, last, policy) is not None:
        times.append(max(start, due_at))
    if expiry_at is not None and ready_at(queued + 1, in_flight - 1, finished, last,
                                          policy) is not None:  # fmt: skip
        times.append(max(start, expiry_at))
    if not times:
        times = [at for at in (due_at, expiry_at) if at is not None]
    return min(times) if times else None


#: The storage-wide level a new storage starts with.
DEFAULTS = Defaults()
