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
    Empty,
    Pop,
    Ready,
    Reason,
    Report,
    Reschedule,
    Stats,
    Wait,
    final_counters,
)
from .snapshot import ORDERS, Snapshot

__all__ = ["InMemFrontier"]

# Queue entries sort by (rank, class, seq): rank is -priority for the priority order and 0
# otherwise; class 0 holds seeds that came back (due schedules, cancellations) so they go first,
# class 1 pushed seeds; seq is the push sequence (negated for LIFO).
_Entry = tuple[int, int, int, Seed]


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
        # fingerprint -> (due, seq, seed, is a revisit); heaps of (due, seq, fingerprint) over
        # every schedule and over revisits only, whose stale entries are skipped when reached
        self._scheduled: dict[Fingerprint, tuple[float, int, Seed, bool]] = {}
        self._due: list[tuple[float, int, Fingerprint]] = []
        self._revisit_due: list[tuple[float, int, Fingerprint]] = []
        self._revisits = 0
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
        for at, seed in snapshot.revisits:
            frontier.schedule(seed, at, revisit=True)
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

    def schedule(self, seed: Seed, at: float, *, revisit: bool = False) -> None:
        with self._lock:
            self._seq += 1
            fp = seed.fingerprint
            old = self._scheduled.get(fp)
            self._revisits += revisit - (old[3] if old is not None else False)
            self._scheduled[fp] = (at, self._seq, seed, revisit)
            heapq.heappush(self._due, (at, self._seq, fp))
            if revisit:
                heapq.heappush(self._revisit_due, (at, self._seq, fp))

    def _first(
        self, heap: list[tuple[float, int, Fingerprint]]
    ) -> tuple[float, int, Fingerprint] | None:
        """The earliest live entry of a schedule heap; stale entries are dropped on the way."""
        while heap:
            _, seq, fp = heap[0]
            live = self._scheduled.get(fp)
            if live is not None and live[1] == seq:
                return heap[0]
            heapq.heappop(heap)
        return None

    def next_revisit(self) -> float | None:
        with self._lock:
            first = self._first(self._revisit_due)
            return first[0] if first is not None else None

    def pop(self) -> Pop:
        with self._lock:
            now = self._clock()
            while (due := self._first(self._due)) is not None and due[0] <= now:
                heapq.heappop(self._due)
                _, _, seed, revisit = self._scheduled.pop(due[2])
                self._revisits -= revisit
                self._enqueue(seed, 0)
            if self._queue:
                seed = heapq.heappop(self._queue)[3]
                self._in_flight.setdefault(seed.fingerprint, []).append(seed)
                self._in_flight_count += 1
                self._counters["popped"] += 1
                return Ready(seed)
            if due is not None and len(self._scheduled) > self._revisits:
                return Wait(due[0])  # retries or parked seeds: work to wait for
            return Empty  # nothing, or only revisits: revisit() waits for those

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
                self._counters.update(final_counters(report))

    def check_in_flight(self, seeds: Iterable[Seed]) -> None:
        seeds = list(seeds)
        with self._lock:
            for fp, count in Counter(seed.fingerprint for seed in seeds).items():
                if len(self._in_flight.get(fp, ())) < count:
                    seed = next(seed for seed in seeds if seed.fingerprint == fp)
                    raise NotInFlight(f"seed is not in flight: {seed!r}")

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
                unchanged=c["unchanged"],
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
                    (at, seed) for at, _, seed, r in sorted(self._scheduled.values()) if not r
                ),
                revisits=tuple(
                    (at, seed) for at, _, seed, r in sorted(self._scheduled.values()) if r
                ),
            )

    def __len__(self) -> int:
        with self._lock:
            return len(self._queue) + self._in_flight_count + len(self._scheduled)
