"""The memory storage: dicts and heaps, in this process (``InMemFrontier`` is the core over one).

A write unit holds the storage's lock and records how to undo each change in the calling
flow's journal (``crawlstore.journal``): a transaction that raises leaves no trace.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .. import journal
from ..frontier.policy import DEFAULTS, Defaults
from ..frontier.spi import (
    Capabilities,
    CrawlRecord,
    Entry,
    Failure,
    LeaseRecord,
    QueueRecord,
    Slot,
    UnitReader,
    UrlRecord,
    enqueue_each,
    tend_at,
)
from ._records import failure_key, revisit_slot

__all__ = ["MemoryStorage"]

_T = TypeVar("_T")


class _Crawl:
    """One crawl's data in memory."""

    def __init__(self, record: CrawlRecord) -> None:
        self.record = record
        self.totals: Counter[str] = Counter()
        self.seq = 0
        self.queues: dict[str, QueueRecord] = {}
        self.index: list[tuple[float, int, str]] = []  # (event, seq, key); stale ones skipped
        self.indexed: dict[str, tuple[float, int]] = {}
        #: ``index`` again, a heap for each in-flight count of the queues (``due_queues``'s
        #: ``below``), and the queues with seeds in flight by when they need tending
        #: (``tend_at``); an entry is live while the queue it names still matches it.
        self.loads: dict[int, list[tuple[float, int, str]]] = {}
        self.wakes: list[tuple[float, str]] = []
        self.pending: dict[str, list[tuple[Entry, bytes]]] = {}
        self.unqueued: dict[str, set[Entry]] = {}
        self.schedules: dict[str, list[tuple[Slot, bytes]]] = {}
        self.unscheduled: dict[str, set[Slot]] = {}
        self.leases: dict[bytes, LeaseRecord] = {}
        self.expiries: dict[str, list[tuple[float, bytes]]] = {}
        self.urls: dict[bytes, UrlRecord] = {}
        self.queue_urls: dict[str, set[bytes]] = {}
        self.states: dict[str, dict[str, bytes]] = {}
        #: The recent failures, by ``failure_key``, oldest first; revisits by their slot.
        self.failures: dict[bytes, Failure] = {}
        self.failure_order: list[bytes] = []
        self.revisit_slots: Counter[int] = Counter()


_E = TypeVar("_E", bound=tuple[Any, ...])


def _due(heap: list[_E], now: float, limit: int, live: Callable[[_E], bool]) -> list[_E]:
    """Up to ``limit`` live entries of ``heap`` at ``now`` or before, earliest first, left in
    it; the stale ones met on the way are dropped."""
    taken: list[_E] = []
    seen: set[_E] = set()
    while heap and len(taken) < limit and heap[0][0] <= now:
        entry = heapq.heappop(heap)
        if entry not in seen and live(entry):
            seen.add(entry)
            taken.append(entry)
    for entry in taken:
        heapq.heappush(heap, entry)
    return taken


def _restore(heap: list[Any], live: list[Any], gone: set[Any] | None, dead: list[Any]) -> None:
    """Undo a lazy pop: the live entries back in the heap, and the dead ones, dead again."""
    _push_all(heap, live + dead)
    if gone is not None:
        gone.update(entry[0] for entry in dead)


def _placed(data: _Crawl, q: QueueRecord) -> QueueRecord:
    """A copy of the stored queue ``q``; its ``ref``: its place in the index, (event, sequence),
    or None."""
    new = q.copy()
    new.ref = data.indexed.get(q.key)
    return new


def _reindex(data: _Crawl, key: str) -> None:
    """Push the entries of the queue ``key`` as it is now (a copy of a live one is harmless)."""
    q, at = data.queues.get(key), data.indexed.get(key)
    if q is None or at is None:
        return
    heapq.heappush(data.index, (*at, key))
    heapq.heappush(data.loads.setdefault(q.in_flight, []), (*at, key))
    wake = tend_at(q)
    if wake is not None:
        heapq.heappush(data.wakes, (wake, key))


class MemoryStorage:
    """Every crawl's data in this process, behind one lock. Thread-safe; a transaction holds
    the lock for its length, and an exception inside it undoes all it changed."""

    capabilities = Capabilities(persistent=False, atomic_views=True, durability="memory",
                                shared=False)  # fmt: skip

    def __init__(self, *, token_prefix: bytes = b"") -> None:
        #: Starts every lease token (a partition's number, in a partitioned storage).
        self._token_prefix = token_prefix
        self._lock = threading.RLock()
        self._owner: journal.Owner | None = None
        self._journal: journal.Journal | None = None
        self._crawls: dict[str, _Crawl] = {}
        self._defaults = DEFAULTS

    # -- units ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """One atomic unit: joins the calling flow's open one; other threads wait; another
        task of this thread gets ``TransactionBusy``."""
        if journal.check_owner(self._owner, self):
            yield  # joined: the outer unit commits or rolls back
            return
        with self._lock:
            self._owner = journal.owner()
            opened = journal.begin()
            #: Where this unit's undos go: its own journal, or the one it joined (read once:
            #: only this flow writes while the lock is held).
            self._journal = journal.current()
            try:
                yield
            except BaseException:
                journal.end(opened, commit=False)
                raise
            else:
                journal.end(opened, commit=True)
            finally:
                self._owner = None
                self._journal = None

    transaction = write

    def run(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as one write unit."""
        with self.write():
            return operation()

    def reader(self) -> UnitReader:
        """Reads across calls (an export's): each ``run`` is one consistent read; writes may
        come between two of them."""
        return UnitReader(self)

    def view(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as one consistent read."""
        with self._lock:
            return operation()

    def scratch(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as a write unit, then undo everything it changed (in the caller's
        transaction, if one is open: back to where it stood)."""
        with self.write():
            txn = self._journal
            assert txn is not None
            mark = txn.mark()
            try:
                return operation()
            finally:
                txn.undo_to(mark)

    def _undo(self, undo: Any) -> None:
        txn = self._journal
        if txn is not None:
            txn.undo(undo)

    def __repr__(self) -> str:
        return "MemoryStorage()"

    # -- crawls ---------------------------------------------------------------------------------

    def defaults(self) -> Defaults:
        return self._defaults

    def save_defaults(self, defaults: Defaults) -> None:
        old, self._defaults = self._defaults, defaults
        self._undo(lambda: setattr(self, "_defaults", old))

    def crawl(self, name: str) -> CrawlRecord | None:
        data = self._crawls.get(name)
        if data is None:
            return None
        record = data.record
        return CrawlRecord(record.name, record.policy, record.created, data,
                           settled=record.settled)  # fmt: skip

    def save_crawl(self, crawl: CrawlRecord) -> None:
        data = self._crawls.get(crawl.name)
        if data is None:
            data = self._crawls[crawl.name] = _Crawl(
                CrawlRecord(crawl.name, crawl.policy, crawl.created, settled=crawl.settled)
            )
            self._undo(lambda: self._crawls.pop(crawl.name, None))
        else:
            old = data.record
            data.record = CrawlRecord(old.name, crawl.policy, crawl.created, settled=crawl.settled)
            self._undo(lambda: setattr(data, "record", old))
        crawl.ref = data

    def crawls(self) -> list[str]:
        return sorted(self._crawls)

    def delete_crawl(self, crawl: CrawlRecord) -> int:
        data: _Crawl = crawl.ref
        removed = len(data.urls)
        del self._crawls[crawl.name]
        self._undo(lambda: self._crawls.__setitem__(crawl.name, data))
        return removed

    def totals(self, crawl: CrawlRecord) -> dict[str, int]:
        return dict(crawl.ref.totals)

    def add_totals(self, crawl: CrawlRecord, deltas: dict[str, int]) -> None:
        totals = crawl.ref.totals
        for name, n in deltas.items():
            totals[name] += n
        self._undo(lambda: totals.subtract(deltas))

    def next_seq(self, crawl: CrawlRecord, n: int = 1) -> int:
        data: _Crawl = crawl.ref
        data.seq += n
        return data.seq - n + 1  # never undone: sequences only need to grow

    def last_seq(self, crawl: CrawlRecord) -> int:
        data: _Crawl = crawl.ref
        return data.seq

    def advance_seq(self, crawl: CrawlRecord, at_least: int) -> None:
        data: _Crawl = crawl.ref
        data.seq = max(data.seq, at_least)

    def state_get(self, crawl: CrawlRecord, namespace: str, key: str) -> bytes | None:
        data: _Crawl = crawl.ref
        return data.states.get(namespace, {}).get(key)

    def state_put(self, crawl: CrawlRecord, namespace: str, key: str, value: bytes) -> None:
        data: _Crawl = crawl.ref
        state = data.states.setdefault(namespace, {})
        self._restore_later(state, key)
        state[key] = value

    def state_delete(self, crawl: CrawlRecord, namespace: str, key: str) -> bool:
        data: _Crawl = crawl.ref
        state = data.states.get(namespace, {})
        if key not in state:
            return False
        self._restore_later(state, key)
        del state[key]
        return True

    def _restore_later(self, state: dict[str, bytes], key: str) -> None:
        old = state.get(key)
        self._undo(lambda: state.pop(key, None) if old is None else state.__setitem__(key, old))

    def state_keys(self, crawl: CrawlRecord, namespace: str) -> list[str]:
        data: _Crawl = crawl.ref
        return list(data.states.get(namespace, {}))

    def states(self, crawl: CrawlRecord) -> Iterator[tuple[str, str, bytes]]:
        data: _Crawl = crawl.ref
        for namespace, state in sorted(data.states.items()):
            for key in sorted(state):
                yield namespace, key, state[key]

    # -- queues ---------------------------------------------------------------------------------

    def queue(self, crawl: CrawlRecord, key: str) -> QueueRecord | None:
        q = crawl.ref.queues.get(key)
        return _placed(crawl.ref, q) if q is not None else None

    def save_queue(
        self, crawl: CrawlRecord, queue: QueueRecord, event: float | None, rotate: bool = False
    ) -> None:
        data: _Crawl = crawl.ref
        key = queue.key
        old, placed = data.queues.get(key), data.indexed.get(key)
        if event is None:
            data.indexed.pop(key, None)
        elif placed is None or placed[0] != event or rotate:
            data.seq += 1
            data.indexed[key] = (event, data.seq)
            heapq.heappush(data.index, (event, data.seq, key))
        queue.event = event
        stored = data.queues[key] = queue.copy()
        at = data.indexed.get(key)
        if at is not None:
            if at != placed or old is None or old.in_flight != stored.in_flight:
                heapq.heappush(data.loads.setdefault(stored.in_flight, []), (*at, key))
            wake = tend_at(stored)
            if wake is not None and (old is None or tend_at(old) != wake):
                heapq.heappush(data.wakes, (wake, key))

        def undo() -> None:
            if old is None:
                data.queues.pop(key, None)
            else:
                data.queues[key] = old
            if placed is None:
                data.indexed.pop(key, None)
            else:
                data.indexed[key] = placed
                _reindex(data, key)

        self._undo(undo)

    def queues(self, crawl: CrawlRecord, after: str | None, limit: int) -> list[QueueRecord]:
        keys = sorted(k for k in crawl.ref.queues if after is None or k > after)[:limit]
        return [_placed(crawl.ref, crawl.ref.queues[k]) for k in keys]

    def queue_count(self, crawl: CrawlRecord) -> int:
        return len(crawl.ref.queues)

    def _index_head(self, data: _Crawl) -> tuple[float, int, str] | None:
        index = data.index
        while index:
            event, seq, key = index[0]
            if data.indexed.get(key) == (event, seq):
                return index[0]
            heapq.heappop(index)  # stale
        return None

    def due_queues(
        self, crawl: CrawlRecord, now: float, limit: int, below: int | None = None
    ) -> list[QueueRecord]:
        data: _Crawl = crawl.ref
        if below is None:
            taken = _due(data.index, now, limit, lambda e: data.indexed.get(e[2]) == e[:2])
        else:  # the heaps of the loads under the cap, and the queues at it to tend
            queues, indexed = data.queues, data.indexed
            taken = []
            for load, heap in list(data.loads.items()):

                def live(e: tuple[float, int, str], n: int = load) -> bool:
                    return indexed.get(e[2]) == e[:2] and queues[e[2]].in_flight == n

                if load < below:
                    taken += _due(heap, now, limit, live)
                if not heap:
                    del data.loads[load]
            woken = _due(data.wakes, now, len(data.wakes),
                         lambda e: e[1] in indexed and tend_at(queues[e[1]]) == e[0])  # fmt: skip
            taken = heapq.nsmallest(limit, {*taken, *((*indexed[k], k) for _, k in woken)})
        return [_placed(data, data.queues[key]) for _, _, key in taken]

    def next_event(self, crawl: CrawlRecord) -> float | None:
        head = self._index_head(crawl.ref)
        return head[0] if head is not None else None

    def delete_queue(self, crawl: CrawlRecord, queue: QueueRecord) -> int:
        data: _Crawl = crawl.ref
        key = queue.key
        saved = {name: getattr(data, name).get(key) for name in
                 ("queues", "pending", "unqueued", "schedules", "unscheduled", "expiries",
                  "queue_urls")}  # fmt: skip
        fps = saved["queue_urls"] or set()
        urls = {fp: data.urls[fp] for fp in fps if fp in data.urls}
        leases = {t: lease for t, lease in data.leases.items() if lease.queue == key}
        indexed = data.indexed.pop(key, None)
        for name in saved:
            getattr(data, name).pop(key, None)
        for fp in urls:
            del data.urls[fp]
        for token in leases:
            del data.leases[token]

        def undo() -> None:
            for name, value in saved.items():
                if value is not None:
                    getattr(data, name)[key] = value
            data.urls.update(urls)
            data.leases.update(leases)
            if indexed is not None:
                data.indexed[key] = indexed
                _reindex(data, key)

        self._undo(undo)
        return len(urls)

    # -- a queue's entries, leases and schedule -------------------------------------------------

    def enqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry,
                fp: bytes) -> None:  # fmt: skip
        heap = crawl.ref.pending.setdefault(queue.key, [])
        heapq.heappush(heap, (order, fp))
        self._undo(lambda: crawl.ref.unqueued.setdefault(queue.key, set()).add(order))

    def enqueue_many(self, crawl: CrawlRecord, queue: QueueRecord, urls: list[UrlRecord]) -> None:
        enqueue_each(self, crawl, queue, urls)

    def dequeue(self, crawl: CrawlRecord, queue: QueueRecord, n: int) -> list[bytes]:
        data: _Crawl = crawl.ref
        heap = data.pending.get(queue.key, [])
        out = self._pop_live(heap, data.unqueued.get(queue.key), lambda out: len(out) < n)
        return [fp for _, fp in out]

    def unqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry) -> None:
        gone = crawl.ref.unqueued.setdefault(queue.key, set())
        gone.add(order)
        self._undo(lambda: gone.discard(order))

    def lease(self, crawl: CrawlRecord, queue: QueueRecord, lease: LeaseRecord) -> None:
        data: _Crawl = crawl.ref
        data.seq += 1
        # never another storage's
        lease.token = self._token_prefix + data.seq.to_bytes(8, "big") + os.urandom(4)
        data.leases[lease.token] = lease
        heapq.heappush(data.expiries.setdefault(queue.key, []), (lease.expires, lease.token))
        self._undo(lambda: data.leases.pop(lease.token, None))

    def get_lease(self, crawl: CrawlRecord, token: bytes) -> LeaseRecord | None:
        lease = crawl.ref.leases.get(token)
        if lease is None:
            return None
        return LeaseRecord(lease.token, lease.fp, lease.queue, lease.expires, lease.owner)

    def extend_lease(self, crawl: CrawlRecord, lease: LeaseRecord, expires: float) -> None:
        stored = crawl.ref.leases[lease.token]
        old = stored.expires
        stored.expires = lease.expires = expires
        heapq.heappush(crawl.ref.expiries.setdefault(lease.queue, []), (expires, lease.token))
        self._undo(lambda: setattr(stored, "expires", old))

    def end_lease(self, crawl: CrawlRecord, lease: LeaseRecord) -> None:
        stored = crawl.ref.leases.pop(lease.token)
        self._undo(lambda: crawl.ref.leases.__setitem__(lease.token, stored))

    def expired(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[LeaseRecord]:
        data: _Crawl = crawl.ref
        heap = data.expiries.get(queue.key, [])
        popped, out = [], []
        ended: set[bytes] = set()  # (a lease extended twice to one time has two entries alike)
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            popped.append(entry)
            lease = data.leases.get(entry[1])
            if lease is not None and lease.expires == entry[0] and entry[1] not in ended:
                ended.add(entry[1])
                out.append(LeaseRecord(lease.token, lease.fp, lease.queue, lease.expires,
                                       lease.owner))  # fmt: skip
        if popped:
            self._undo(lambda: _push_all(heap, popped))
        return out

    def next_expiry(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        data: _Crawl = crawl.ref
        heap = data.expiries.get(queue.key, [])
        dropped = []
        try:
            while heap:
                expires, token = heap[0]
                lease = data.leases.get(token)
                if lease is not None and lease.expires == expires:
                    return expires
                dropped.append(heapq.heappop(heap))  # ended or extended: not needed now
            return None
        finally:
            if dropped:  # the unit may roll back, and bring back the lease it ended
                self._undo(lambda: _push_all(heap, dropped))

    def leases(self, crawl: CrawlRecord) -> Iterator[LeaseRecord]:
        for token in list(crawl.ref.leases):
            lease = self.get_lease(crawl, token)
            if lease is not None:
                yield lease

    def schedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot, fp: bytes) -> None:
        heap = crawl.ref.schedules.setdefault(queue.key, [])
        heapq.heappush(heap, (when, fp))
        self._undo(lambda: crawl.ref.unscheduled.setdefault(queue.key, set()).add(when))

    def unschedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot) -> None:
        gone = crawl.ref.unscheduled.setdefault(queue.key, set())
        gone.add(when)
        self._undo(lambda: gone.discard(when))

    def due(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[bytes]:
        data: _Crawl = crawl.ref
        heap = data.schedules.get(queue.key, [])
        gone = data.unscheduled.get(queue.key)
        return [fp for _, fp in self._pop_live(heap, gone, lambda out: heap[0][0].at <= now)]

    def _pop_live(
        self, heap: list[Any], gone: set[Any] | None, more: Callable[[list[Any]], bool]
    ) -> list[Any]:
        """Pop a heap's live entries (those not in ``gone``, dropped lazily) while ``more``.
        A rollback puts back both: the dropped ones still dead (in ``gone``), so that a
        rolled-back unqueue or unschedule, undone after, brings its entry back to life."""
        out: list[Any] = []
        dropped: list[Any] = []
        while heap and more(out):
            entry = heapq.heappop(heap)
            if gone and entry[0] in gone:
                gone.discard(entry[0])
                dropped.append(entry)
                continue
            out.append(entry)
        if out or dropped:
            self._undo(lambda: _restore(heap, out, gone, dropped))
        return out

    def next_due(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        data: _Crawl = crawl.ref
        heap = data.schedules.get(queue.key, [])
        gone = data.unscheduled.get(queue.key)
        dropped = []
        while heap and gone and heap[0][0] in gone:
            dropped.append(heapq.heappop(heap))
            gone.discard(dropped[-1][0])
        if dropped:
            self._undo(lambda: _restore(heap, [], gone, dropped))
        return heap[0][0].at if heap else None

    # -- URLs -----------------------------------------------------------------------------------

    def prefetch(self, crawl: CrawlRecord, fps: Sequence[bytes], queues: Sequence[str],
                 tokens: Sequence[bytes] = ()) -> None:  # fmt: skip
        pass  # reads are memory reads

    def find_urls(self, crawl: CrawlRecord, fps: Sequence[bytes],
                  queues: Sequence[str]) -> list[UrlRecord | None]:  # fmt: skip
        urls = crawl.ref.urls
        return [url.copy() if (url := urls.get(fp)) is not None else None for fp in fps]

    def url(self, crawl: CrawlRecord, fp: bytes) -> UrlRecord | None:
        url = crawl.ref.urls.get(fp)
        return url.copy() if url is not None else None

    def save_url(self, crawl: CrawlRecord, queue: QueueRecord, url: UrlRecord) -> None:
        data: _Crawl = crawl.ref
        old = data.urls.get(url.fp)
        # Kept packed: every read decodes its own seed, so that nothing handed out (a nested
        # list in a seed's meta, say) is shared with what is stored, as on a store.
        stored = url.copy()
        stored.seed_packed(url.packed_seed())
        data.urls[url.fp] = stored
        members = data.queue_urls.setdefault(url.queue, set())
        if old is not None and old.queue != url.queue:
            data.queue_urls.get(old.queue, set()).discard(url.fp)
        added = url.fp not in members
        members.add(url.fp)

        def undo() -> None:
            if old is None:
                data.urls.pop(url.fp, None)
            else:
                data.urls[url.fp] = old
                data.queue_urls.setdefault(old.queue, set()).add(url.fp)
            if added and (old is None or old.queue != url.queue):
                members.discard(url.fp)

        self._undo(undo)

    def delete_url(self, crawl: CrawlRecord, url: UrlRecord) -> None:
        data: _Crawl = crawl.ref
        old = data.urls.pop(url.fp, None)
        data.queue_urls.get(url.queue, set()).discard(url.fp)

        def undo() -> None:
            if old is not None:
                data.urls[url.fp] = old
                data.queue_urls.setdefault(old.queue, set()).add(url.fp)

        self._undo(undo)

    def urls(self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None,
             limit: int) -> list[UrlRecord]:  # fmt: skip
        data: _Crawl = crawl.ref
        fps = data.queue_urls.get(queue.key, set()) if queue is not None else data.urls.keys()
        chosen = heapq.nsmallest(limit, (fp for fp in fps if after is None or fp > after))
        return [data.urls[fp].copy() for fp in chosen]

    def iter_urls(self, crawl: CrawlRecord, queue: QueueRecord | None) -> Iterator[UrlRecord]:
        data: _Crawl = crawl.ref
        fps = data.queue_urls.get(queue.key, set()) if queue is not None else data.urls.keys()
        for fp in sorted(fps):
            url = data.urls.get(fp)
            if url is not None:
                yield url.copy()

    # -- bounded indexes ------------------------------------------------------------------------

    def note_failure(self, crawl: CrawlRecord, queue: QueueRecord, failure: Failure,
                     keep: int) -> None:  # fmt: skip
        data: _Crawl = crawl.ref
        ring, order, key = data.failures, data.failure_order, failure_key(failure)
        old = ring.get(key)
        if old is None:
            bisect.insort(order, key)
        ring[key] = failure
        gone = [(k, ring.pop(k)) for k in order[: max(0, len(order) - keep)]]
        del order[: len(gone)]

        def undo() -> None:
            for k, was in gone:
                bisect.insort(order, k)
                ring[k] = was
            if old is None:
                order.remove(key)
                del ring[key]
            else:
                ring[key] = old

        self._undo(undo)

    def failures(self, crawl: CrawlRecord, limit: int) -> list[Failure]:
        data: _Crawl = crawl.ref
        return [data.failures[key] for key in reversed(data.failure_order[-limit:])]

    def count_revisit(self, crawl: CrawlRecord, queue: QueueRecord, fp: bytes, at: float,
                      n: int) -> None:  # fmt: skip
        slots: Counter[int] = crawl.ref.revisit_slots
        slot = revisit_slot(at)
        slots[slot] += n
        if not slots[slot]:
            del slots[slot]
        self._undo(lambda: slots.update({slot: -n}))

    def revisits_due(self, crawl: CrawlRecord, until: float) -> int:
        last = revisit_slot(until)
        return sum(n for slot, n in crawl.ref.revisit_slots.items() if slot <= last)


def _push_all(heap: list[Any], entries: list[Any]) -> None:
    for entry in entries:
        heapq.heappush(heap, entry)
