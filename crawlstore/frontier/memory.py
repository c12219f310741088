"""``InMemFrontier``: the in-memory storage, ordered FIFO, LIFO or by priority."""

from __future__ import annotations

import contextlib
import heapq
import threading
from collections import Counter
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import msgpack

from .. import journal
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
    check_namespace,
    check_reason,
    check_report,
    check_seed,
    check_time,
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
    the same priority. Thread-safe: one lock, which ``transaction()`` holds. A transaction is
    all or nothing: an exception inside undoes every change it made (``crawlstore.journal``).
    """

    def __init__(self, order: str = "fifo", *, clock: Clock = system_clock) -> None:
        if order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}: {order!r}")
        self._order = order
        self._clock = clock
        self._lock = threading.RLock()
        self._owner: journal.Owner | None = None  # the flow inside ``transaction()``
        self._seq = 0
        self._queue: list[_Entry] = []
        self._dropped: set[int] = set()  # sequences of queue entries a rollback took back
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
        self._states: dict[str, _MemState] = {}

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

    # -- changes, each undone when the transaction it belongs to rolls back ---------------------

    def _write(self) -> threading.RLock:
        """The lock, for a change: refused (``TransactionBusy``) while another asyncio task of
        this thread is inside a transaction here."""
        journal.check_owner(self._owner, self)
        return self._lock

    @staticmethod
    def _undo(undo: Callable[[], object]) -> None:
        txn = journal.current()
        if txn is not None:
            txn.undo(undo)

    def _count(self, counter: Counter[str], name: str) -> None:
        counter[name] += 1
        self._undo(lambda: _uncount(counter, name))

    def _enqueue(self, seed: Seed, cls: int) -> None:
        self._seq += 1
        rank = -seed.priority if self._order == "priority" else 0
        seq = -self._seq if self._order == "lifo" and cls == 1 else self._seq
        heapq.heappush(self._queue, (rank, cls, seq, seed))
        self._undo(lambda: self._dropped.add(seq))  # taken out when it reaches the top

    def _lease(self, seed: Seed) -> None:
        leased = self._in_flight.setdefault(seed.fingerprint, [])
        leased.append(seed)
        self._in_flight_count += 1
        index = len(leased) - 1
        self._undo(lambda: self._unlease(seed.fingerprint, index))

    def _unlease(self, fp: Fingerprint, index: int) -> Seed:
        leased = self._in_flight[fp]
        seed = leased.pop(index)
        if not leased:
            del self._in_flight[fp]
        self._in_flight_count -= 1
        return seed

    def _end_lease(self, seed: Seed) -> None:
        fp = seed.fingerprint
        if not self._in_flight.get(fp):
            raise NotInFlight(f"seed is not in flight: {seed!r}")
        ended = self._unlease(fp, 0)
        self._undo(lambda: self._relise(ended))

    def _relise(self, seed: Seed) -> None:
        self._in_flight.setdefault(seed.fingerprint, []).insert(0, seed)
        self._in_flight_count += 1

    def _set_schedule(self, fp: Fingerprint, entry: tuple[float, int, Seed, bool] | None) -> None:
        """Replace (or with None remove) the schedule of ``fp``; its heap entries go in here."""
        old = self._scheduled.pop(fp, None)
        self._revisits -= old[3] if old is not None else False
        if entry is not None:
            self._scheduled[fp] = entry
            self._revisits += entry[3]
            at, seq, _, revisit = entry
            heapq.heappush(self._due, (at, seq, fp))  # a stale entry is skipped when reached
            if revisit:
                heapq.heappush(self._revisit_due, (at, seq, fp))
        self._undo(lambda: self._set_schedule(fp, old))

    # -- the protocol ---------------------------------------------------------------------------

    def push(self, seed: Seed) -> Admission:
        check_seed(seed)
        with self._write():
            self._enqueue(seed, 1)
            self._count(self._counters, "admitted")
            return ACCEPTED

    def refuse(self, seed: Seed, reason: Reason) -> Admission:
        check_reason(reason)
        with self._write():
            self._count(self._refused, reason.value)
        return Admission(reason)

    def schedule(self, seed: Seed, at: float, *, revisit: bool = False) -> None:
        check_seed(seed)
        check_time("at", at)
        with self._write():
            self._seq += 1
            self._set_schedule(seed.fingerprint, (at, self._seq, seed, revisit))

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
        with self._write():
            now = self._clock()
            while (due := self._first(self._due)) is not None and due[0] <= now:
                seed = self._scheduled[due[2]][2]
                self._set_schedule(due[2], None)
                self._enqueue(seed, 0)
            queue, dropped = self._queue, self._dropped
            while dropped and queue and queue[0][2] in dropped:
                dropped.discard(heapq.heappop(queue)[2])
            if queue:
                entry = heapq.heappop(queue)
                self._undo(lambda: heapq.heappush(self._queue, entry))
                self._lease(entry[3])
                self._count(self._counters, "popped")
                return Ready(entry[3])
            if due is not None and len(self._scheduled) > self._revisits:
                return Wait(due[0])  # retries or parked seeds: work to wait for
            return Empty  # nothing, or only revisits: revisit() waits for those

    def extend_lease(self, seed: Seed, seconds: float | None = None) -> None:
        """In memory, leases never expire: only checks that ``seed`` is in flight."""
        check_seed(seed)
        if seconds is not None:
            check_time("seconds", seconds, minimum=0)
        with self._lock:
            if not self._in_flight.get(seed.fingerprint):
                raise NotInFlight(f"seed is not in flight: {seed!r}")

    def report(self, report: Report) -> None:
        check_report(report)
        with self._write():
            if isinstance(report, Backoff):
                return  # pauses need tag_backoff()
            self._end_lease(report.seed)
            if isinstance(report, Cancelled):
                self._enqueue(report.seed, 0)
                self._count(self._counters, "cancelled")
            elif isinstance(report, Reschedule):
                self.schedule(report.seed, report.at)
                if report.retried:
                    self._count(self._counters, "retried")
            else:
                # Without retry() a Retry is refused: the seed fails.
                for name in final_counters(report):
                    self._count(self._counters, name)

    def state(self, namespace: str) -> StateMap:
        check_namespace(namespace)
        with self._lock:
            state = self._states.get(namespace)
            if state is None:
                state = self._states[namespace] = _MemState(self)
            return state

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing: an exception inside undoes every change made here (and to the other
        in-memory structures it touched); nested use joins. Other threads wait for it."""
        if journal.check_owner(self._owner, self):
            yield  # nested: the outer transaction commits or rolls back
            return
        with self._lock:
            self._owner = journal.owner()
            opened = journal.begin()
            try:
                yield
            except BaseException:
                journal.end(opened, commit=False)
                raise
            else:
                journal.end(opened, commit=True)
            finally:
                self._owner = None

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
                queued=len(self._queue) - len(self._dropped),
                in_flight=self._in_flight_count,
                scheduled=len(self._scheduled),
            )

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(
                self._order,
                queued=tuple(e[3] for e in sorted(self._queue) if e[2] not in self._dropped),
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
            queued = len(self._queue) - len(self._dropped)
            return queued + self._in_flight_count + len(self._scheduled)


def _uncount(counter: Counter[str], name: str) -> None:
    counter[name] -= 1
    if not counter[name]:
        del counter[name]


class _MemState(MutableMapping[str, Any]):
    """A facade's state in memory: values kept as msgpack, as the store keeps them (each read
    is a copy, and what cannot be stored is refused at the write); changes join the frontier's
    transactions."""

    def __init__(self, frontier: InMemFrontier) -> None:
        self._frontier = frontier
        self._map: dict[str, bytes] = {}

    def __getitem__(self, key: str) -> Any:
        return msgpack.unpackb(self._map[key], raw=False, strict_map_key=False)

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f"a state key is a str, not {type(key).__name__}: {key!r:.100}")
        try:
            packed = msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError(f"state values are msgpack-able: {value!r:.100} ({exc})") from None
        with self._frontier._write():
            self._restore_later(key)
            self._map[key] = packed

    def __delitem__(self, key: str) -> None:
        with self._frontier._write():
            if key not in self._map:
                raise KeyError(key)
            self._restore_later(key)
            del self._map[key]

    def _restore_later(self, key: str) -> None:
        old = self._map.get(key)
        self._frontier._undo(
            lambda: self._map.pop(key, None) if old is None else self._map.__setitem__(key, old)
        )

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._map))

    def __len__(self) -> int:
        return len(self._map)
