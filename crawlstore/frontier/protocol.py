"""The values of the frontier protocol: admissions, pop results, reports and statistics."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from ..errors import InvalidArgument
from ..seed import Lease, Seed, Tag
from ..url import Fingerprint

__all__ = [
    "OUTCOMES",
    "PEEK_REASONS",
    "STATES",
    "Admission",
    "Backoff",
    "Cancelled",
    "Done",
    "Empty",
    "Failed",
    "LastOutcome",
    "Lease",
    "Pop",
    "QueueInfo",
    "Ready",
    "Reason",
    "RecentFailure",
    "Report",
    "Reschedule",
    "Retry",
    "Skipped",
    "Stats",
    "URLStatus",
    "Upcoming",
    "Wait",
]


class Reason(str, enum.Enum):
    """Why a push was refused."""

    #: The URL has a live entry (queued, in flight, scheduled), or a dedup facade saw it.
    DUPLICATE = "duplicate"
    #: Deeper than ``max_depth``.
    TOO_DEEP = "too_deep"
    #: A ``filter`` predicate said no.
    FILTERED = "filtered"
    #: Outside the hosts of ``allow_hosts``.
    OUT_OF_SCOPE = "out_of_scope"
    #: Under a URL prefix that ``avoid_traps`` blocked.
    TRAP = "trap"


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer to a push: accepted (``reason is None``, truthy) or refused with a reason."""

    reason: Reason | None = None

    @property
    def accepted(self) -> bool:
        return self.reason is None

    def __bool__(self) -> bool:
        return self.reason is None


ACCEPTED = Admission()


@dataclass(frozen=True, slots=True)
class Ready:
    """A seed handed out: it is in flight until reported, or until its ``lease`` expires (then
    it goes back to its queue). ``seed.lease`` is the same lease: report the seed itself."""

    seed: Seed
    lease: Lease | None = None


@dataclass(frozen=True, slots=True)
class Wait:
    """Nothing is ready now; something becomes ready at ``until`` (epoch seconds)."""

    until: float


@dataclass(frozen=True, slots=True)
class _Empty:
    """Nothing queued or scheduled."""

    def __repr__(self) -> str:
        return "Empty"

    def __bool__(self) -> bool:
        return False


Empty = _Empty()
Pop = Ready | Wait | _Empty


@dataclass(frozen=True, slots=True)
class Done:
    """Crawled: the seed leaves the frontier. ``unchanged``: True when the server answered 304
    (counted in ``Stats.unchanged``), False when a conditional request got the page in full,
    None when nobody can tell. ``content_hash``: a digest of the body, for adaptive revisits of
    pages whose server sends no validators."""

    seed: Seed
    unchanged: bool | None = None
    content_hash: str | None = None
    #: The response's status code, kept as the URL's last outcome.
    status: int | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """Failed for good: not tried again. ``reason`` (and ``status``) are kept as the URL's last
    outcome: which URLs failed, and why."""

    seed: Seed
    reason: str | None = None
    status: int | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """Deliberately not crawled (robots.txt, an aborted tag, a trap)."""

    seed: Seed
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Cancelled:
    """Not finished because the crawl stopped: the seed goes back to the queue for the next run."""

    seed: Seed


@dataclass(frozen=True, slots=True)
class Retry:
    """Try again; ``after`` (seconds) overrides the retry policy's delay. Needs ``retry()``."""

    seed: Seed
    after: float | None = None

    def __post_init__(self) -> None:
        if self.after is not None:
            check_time("Retry.after", self.after, minimum=0)


@dataclass(frozen=True, slots=True)
class Backoff:
    """Crawl no seed of ``tag`` before ``until``; ``tag=None`` pauses untagged seeds.

    Needs ``tag_backoff()``; without it the report is ignored.
    """

    tag: Tag | None
    until: float

    def __post_init__(self) -> None:
        check_time("Backoff.until", self.until)


@dataclass(frozen=True, slots=True)
class Reschedule:
    """End the seed's lease and schedule it (as given) at ``at``: what facades turn reports
    into (not a report for users). ``retried`` counts it as a retry; ``kind`` is what the URL's
    status says it waits for ("retry" or "pause")."""

    seed: Seed
    at: float
    retried: bool = False
    kind: str = "retry"

    def __post_init__(self) -> None:
        check_time("Reschedule.at", self.at)


Report = Done | Failed | Skipped | Cancelled | Retry | Backoff | Reschedule
#: A report of a seed's own (a ``Backoff`` names a tag).
SeedReport = Done | Failed | Skipped | Cancelled | Retry | Reschedule

_FINAL = {Done: "done", Failed: "failed", Skipped: "skipped", Retry: "failed"}


def final_counters(report: Report) -> tuple[str, ...]:
    """The counters a report that ends a seed adds one to (a ``Retry`` that reaches a storage
    was refused: the seed failed); empty for reports that do not end one."""
    name = _FINAL.get(type(report))
    if name is None:
        return ()
    if isinstance(report, Done) and report.unchanged:
        return (name, "unchanged")
    return (name,)


_REPORTS = (Done, Failed, Skipped, Cancelled, Retry, Backoff, Reschedule)


#: An argument left out: the setting it names stays as it is.
UNSET: Any = object()


def check_seed(seed: object) -> None:
    """``TypeError`` unless ``seed`` is a ``Seed``: what every storage checks at the call."""
    if not isinstance(seed, Seed):
        raise TypeError(
            f"expected a Seed (e.g. Seed.get(url)), not {type(seed).__name__}: {seed!r:.200}"
        )


def check_seeds(seeds: Iterable[object]) -> list[Seed]:
    """The seeds as a list, each checked by ``check_seed``."""
    batch = list(seeds)
    if not all(map(isinstance, batch, repeat(Seed))):  # one call, however many seeds
        for seed in batch:
            check_seed(seed)
    return batch  # type: ignore[return-value]


def check_time(name: str, value: object, *, minimum: float | None = None) -> float:
    """``value`` as a float: a finite number (epoch seconds, or seconds when ``minimum`` is 0),
    else ``InvalidArgument`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(f"{name} must be a finite number of seconds: {value!r:.100}")
    if minimum is not None and value < minimum:
        raise InvalidArgument(f"{name} must be at least {minimum}: {value!r}")
    return float(value)


def check_namespace(namespace: object) -> str:
    """A facade state namespace: a str of 1 to 100 UTF-8 bytes without NUL."""
    if not isinstance(namespace, str) or not 0 < len(namespace.encode("utf-8")) <= 100:
        raise InvalidArgument(f"a state namespace is a str of 1 to 100 bytes: {namespace!r:.100}")
    if "\x00" in namespace:
        raise InvalidArgument(f"a state namespace holds no NUL: {namespace!r:.100}")
    return namespace


def check_reasons(reasons: Sequence[object]) -> None:
    """``check_reason`` of each."""
    if not all(map(isinstance, reasons, repeat(Reason))):
        for reason in reasons:
            check_reason(reason)


def check_reason(reason: object) -> Reason:
    """``TypeError`` unless ``reason`` is a ``Reason``."""
    if not isinstance(reason, Reason):
        raise TypeError(f"expected a Reason, not {type(reason).__name__}: {reason!r:.100}")
    return reason


def check_limit(limit: object) -> int:
    """A batch size: an int of at least 0, else ``InvalidArgument``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidArgument(f"limit must be an int of at least 0: {limit!r:.100}")
    return limit


def check_report(report: object) -> None:
    """``TypeError`` unless ``report`` is a report carrying a ``Seed``."""
    if not isinstance(report, _REPORTS):
        raise TypeError(
            "expected a report (Done, Failed, Skipped, Cancelled, Retry or Backoff), not "
            f"{type(report).__name__}: {report!r:.200}"
        )
    if not isinstance(report, Backoff):
        check_seed(report.seed)


@dataclass(frozen=True, slots=True)
class Stats:
    """Counters since the frontier was created (on a store: since the crawl began) and gauges."""

    admitted: int = 0
    refused: Mapping[str, int] = field(default_factory=dict)
    popped: int = 0
    done: int = 0
    failed: int = 0
    retried: int = 0
    skipped: int = 0
    cancelled: int = 0
    unchanged: int = 0
    queued: int = 0
    in_flight: int = 0
    scheduled: int = 0

    @property
    def pushed(self) -> int:
        """Every seed offered: admitted plus refused."""
        return self.admitted + sum(self.refused.values())


@dataclass(frozen=True, slots=True)
class LastOutcome:
    """How a URL's last visit ended: when, as what (done, failed, skipped), with which status
    code or reason."""

    at: float
    state: str
    status: int | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class RecentFailure:
    """A visit that failed for good, among the crawl's recent failures: when, the URL and its
    queue, the status code and reason reported."""

    at: float
    url: str
    queue: str
    status: int | None = None
    reason: str | None = None


#: The states of a URL a crawl holds (``URLStatus.state``; a URL it does not hold is
#: "unknown"), as ``urls(state=...)`` takes them.
STATES = ("queued", "in_flight", "scheduled", "done", "failed", "skipped")
#: How a URL's last visit can end (``LastOutcome.state``), as ``urls(outcome=...)`` takes them.
OUTCOMES = ("done", "failed", "skipped")


@dataclass(frozen=True, slots=True)
class URLStatus:
    """Where a URL of a crawl stands. ``state``: "queued", "in_flight" (until ``at``),
    "scheduled" (at ``at``, for a ``kind``: "retry", "pause" or "revisit"), "done", "failed",
    "skipped", or "unknown"."""

    url: str
    fingerprint: Fingerprint
    state: str
    queue: str | None = None
    at: float | None = None
    kind: str | None = None
    created: float | None = None
    outcome: LastOutcome | None = None
    seed: Seed | None = None

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.seed.meta if self.seed is not None else {}


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue: what it holds, its counters, its own settings (None: the crawl's), and when it
    was created and last handed out a seed."""

    key: str
    queued: int
    in_flight: int
    scheduled: int
    last_pop: float
    blocked_until: float
    delay: float | None
    max_in_flight: int | None
    limit: int | None = None
    created: float = 0.0
    counts: Mapping[str, int] = field(default_factory=dict)


#: Why a seed of ``peek`` comes when it does: handed out now, in this order ("ready"); later,
#: when its queue's delay since its previous pop ends ("delay"), its queue's block ends
#: ("blocked"), the seed before it in its queue is done ("held"), its schedule falls due
#: ("retry", "pause", "revisit"), or once its lease, whose holder is gone, is reclaimed
#: ("lease"); or, with no time, once a seed in flight now is reported: its queue is at its
#: in-flight cap ("held") or its limit ("limit").
PEEK_REASONS = ("ready", "delay", "blocked", "retry", "pause", "revisit", "lease", "held",
                "limit")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Upcoming:
    """A seed ``peek`` says pop will hand out: the seed (without a lease), its queue, when
    (``at``: now for the ready ones; None when only a report of a seed in flight frees its
    queue) and why then (one of ``PEEK_REASONS``)."""

    seed: Seed
    queue: str
    at: float | None
    why: str

    @property
    def ready(self) -> bool:
        """Whether pop hands it out now (the ready ones come first, in pop order)."""
        return self.why == "ready"
