"""``InMemFrontier``: the in-memory storage, ordered FIFO, LIFO or by priority."""

from __future__ import annotations

import contextlib
import heapq
import threading
from collections import Counter
from collections.abc import Iterable, Iterator

from ..clock import Clock, system_clock
from ..errors import NotInFlight
from ..seed import Seed
from ..url import Fingerprint
from .base import Frontier, StateMap
from .protocol import (
    ACCEPTED,
    Admission,
    Backoff,
    Cancelled,
    Done,
    Empty,
    Failed,
    Pop,
    Ready,
    Reason,
    Report,
    Reschedule,
    Retry,
    Skipped,
    Stats,
    Wait,
)
from .snapshot import ORDERS, Snapshot

__all__ = ["InMemFrontier"]

# Queue entries sort by (rank, class, seq): rank is -priority for the priority order and 0
# otherwise; class 0 holds seeds that came back (due schedules, cancellations) so they go first,
# class 1 pushed seeds; seq is the push sequence (negated for LIFO).
_Entry = tuple[int, int, int, Seed]
_COUNTED = {Done: "done", Failed: "failed", Skipped: "skipped", Retry: "failed"}


class InMemFrontier(Frontier):
    """Seeds in memory. ``fifo()`` (the default) crawls breadth first, ``lifo()`` depth first,
    ``priority()`` highest priority first and ties in push order.

    Scheduled seeds (retries, paused tags, revisits) come back when due, ahead of queued seeds of
    the same priority. Thread-safe: one lock, re-entrant, which ``transaction()`` holds.
    """

    def __init__(self, order: str = "fifo", *, clock: Clock = system_clock) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}: {order!r}")
        self._order = order
        self._clock = clock
        self._lock = threading.RLock()
        self._seq = 0
        self._queue: list[_Entry] = []
        self._in_flight: dict[Fingerprint, list[Seed]] = {}
        self._in_flight_count = 0
        self._scheduled: dict[Fingerprint, tuple[float, int, Seed]] = {}
        self._due: list[tuple[float, int, Fingerprint]] = []
        self._counters: Counter[str] = Counter()
        self._refused: Counter[str] = Counter()
        self._states: dict[str, StateMap] = {}

    @classmethod
    def fifo(cls, *, clock: Clock = system_clock) -> InMemFrontier:
        return cls("fifo", clock=clock)

    @classmethod
    def lifo(cls, *, clock: Clock = system_clock) -> InMemFrontier:
        return cls("lifo", clock=clock)

    @classmethod
    def priority(cls, *, clock: Clock = system_clock) -> InMemFrontier:
        return cls("priority", clock=clock)

    @classmethod
    def restore(cls, snapshot: Snapshot, *, clock: Clock = system_clock) -> InMemFrontier:
        """A frontier holding a snapshot's seeds as they are: no facade can refuse them."""
        frontier = cls(snapshot.order, clock=clock)
        entries = [*snapshot.in_flight, *snapshot.queued]
        if snapshot.order == "lifo":
            entries.reverse()
        for seed in entries:
            frontier._enqueue(seed, 1)
        for at, seed in snapshot.scheduled:
            frontier.schedule(seed, at)
        return frontier

    def __repr__(self) -> str:
        return f"InMemFrontier({self._order!r})"

    @property
    def order(self) -> str:
        return self._order

    @property
    def clock(self) -> Clock:
        return self._clock

    def _enqueue(self, seed: Seed, cls: int) -> None:
        self._seq += 1
        rank = -seed.priority if self._order == "priority" else 0
        seq = -self._seq if self._order == "lifo" and cls == 1 else self._seq
        heapq.heappush(self._queue, (rank, cls, seq, seed))

    def push(self, seed: Seed) -> Admission:
        with self._lock:
            self._enqueue(seed, 1)
            self._counters["admitted"] += 1
            return ACCEPTED

    def refuse(self, seed: Seed, reason: Reason) -> Admission:
        with self._lock:
            self._refused[reason.value] += 1
        return Admission(reason)

    def schedule(self, seed: Seed, at: float) -> None:
        with self._lock:
            self._seq += 1
            self._scheduled[seed.fingerprint] = (at, self._seq, seed)
            heapq.heappush(self._due, (at, self._seq, seed.fingerprint))

    def _next_due(self) -> tuple[float, int, Fingerprint] | None:
        """The earliest live schedule entry; stale heap entries are dropped on the way."""
        while self._due:
            _, seq, fp = self._due[0]
            live = self._scheduled.get(fp)
            if live is not None and live[1] == seq:
                return self._due[0]
            heapq.heappop(self._due)
        return None

    def pop(self) -> Pop:
        with self._lock:
            now = self._clock()
            while (due := self._next_due()) is not None and due[0] <= now:
                heapq.heappop(self._due)
                self._enqueue(self._scheduled.pop(due[2])[2], 0)
            if self._queue:
                seed = heapq.heappop(self._queue)[3]
                self._in_flight.setdefault(seed.fingerprint, []).append(seed)
                self._in_flight_count += 1
                self._counters["popped"] += 1
                return Ready(seed)
            return Wait(due[0]) if due is not None else Empty

    def extend_lease(self, seed: Seed, seconds: float | None = None) -> None:
        """In memory, leases never expire: only checks that ``seed`` is in flight."""
        with self._lock:
            if not self._in_flight.get(seed.fingerprint):
                raise NotInFlight(f"seed is not in flight: {seed!r}")

    def _end_lease(self, seed: Seed) -> None:
        fp = seed.fingerprint
        leased = self._in_flight.get(fp)
        if not leased:
            raise NotInFlight(f"seed is not in flight: {seed!r}")
        leased.pop(0)
        if not leased:
            del self._in_flight[fp]
        self._in_flight_count -= 1

    def report(self, report: Report) -> None:
        with self._lock:
            if isinstance(report, Backoff):
                return  # pauses need tag_backoff()
            self._end_lease(report.seed)
            if isinstance(report, Cancelled):
                self._enqueue(report.seed, 0)
                self._counters["cancelled"] += 1
            elif isinstance(report, Reschedule):
                self.schedule(report.seed, report.at)
                if report.retried:
                    self._counters["retried"] += 1
            else:
                # Without retry() a Retry is refused: the seed fails.
                self._counters[_COUNTED[type(report)]] += 1

    def report_many(self, reports: Iterable[Report]) -> None:
        """All or nothing: every seed reported must be in flight before any report applies."""
        reports = list(reports)
        seeds = [r.seed for r in reports if not isinstance(r, Backoff)]
        with self._lock:
            for fp, count in Counter(seed.fingerprint for seed in seeds).items():
                if len(self._in_flight.get(fp, ())) < count:
                    seed = next(seed for seed in seeds if seed.fingerprint == fp)
                    raise NotInFlight(f"seed is not in flight: {seed!r}")
            for report in reports:
                self.report(report)

    def state(self, namespace: str) -> StateMap:
        with self._lock:
            return self._states.setdefault(namespace, {})

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            yield

    def stats(self) -> Stats:
        with self._lock:
            c = self._counters
            return Stats(
                admitted=c["admitted"],
                refused=dict(self._refused),
                popped=c["popped"],
                done=c["done"],
                failed=c["failed"],
                retried=c["retried"],
                skipped=c["skipped"],
                cancelled=c["cancelled"],
                queued=len(self._queue),
                in_flight=self._in_flight_count,
                scheduled=len(self._scheduled),
            )

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(
                self._order,
                queued=tuple(entry[3] for entry in sorted(self._queue)),
                in_flight=tuple(s for leased in self._in_flight.values() for s in leased),
                scheduled=tuple(
                    (at, seed) for at, _, seed in sorted(self._scheduled.values(), key=_by_due)
                ),
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue) + self._in_flight_count + len(self._scheduled)


def _by_due(entry: tuple[float, int, Seed]) -> tuple[float, int]:
    return entry[0], entry[1]
