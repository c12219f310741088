"""The memory storage in partitions: one memory storage a partition, each with its own lock.

A queue (its entries, leases, schedule and the records of its URLs) lives in the partition its
key hashes to. A unit on one partition (``run_in``) holds that partition's lock only, so units
on two partitions run side by side; a unit over every partition (``run``) holds them all. What
a unit on one partition reaches outside it raises ``PartitionError``: this storage is how the
core's partitioned path is tested without a server (``frontier.spi.Partitioned``).

What spans partitions is kept here, beside the partitions: a crawl's totals (one counter set a
partition, summed when read) and the URL → queue claims (``claim_queues``), each behind a lock
held for one dict operation, never while another lock is taken.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import itertools
import math
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from .. import journal
from ..errors import PartitionError, StoreError
from ..frontier.policy import Defaults
from ..frontier.spi import (
    Capabilities,
    CrawlRecord,
    Durability,
    Entry,
    Failure,
    LeaseRecord,
    Post,
    QueueRecord,
    Slot,
    UnitReader,
    UrlRecord,
    run_in_turn,
)
from ..url import FINGERPRINT_VERSION
from ._memory import MemoryStorage
from ._partitioned_views import MemoryViews, ViewsOf
from ._records import failure_key

__all__ = ["PartitionedMemoryStorage"]

_T = TypeVar("_T")
#: The scope of a unit over every partition; of a dry run over every partition (``scratch``:
#: its writes are all undone, so they may reach any partition).
_ALL, _DRY = -1, -2


class _Crawl:
    """What this storage keeps of a crawl beside its partitions."""

    def __init__(self, parts: list[CrawlRecord]) -> None:
        self.parts = parts  # each partition's record of the crawl (its ``ref``: that one's)
        self.totals = [Counter[str]() for _ in parts]
        self.claims: dict[bytes, str] = {}  # fingerprint -> queue key
        #: Each partition's next event as its last unit left it: the hints of
        #: ``due_partitions``, read without waiting for a partition's lock.
        self.events: list[float | None] = [-math.inf for _ in parts]
        self.stamps = [0 for _ in parts]  # the stamp each hint was read with
        #: Each partition's inbox (``spi.Inboxes``): fingerprint -> post (behind ``_side``).
        self.inboxes: list[dict[bytes, Post]] = [{} for _ in parts]
        self.refused = [0 for _ in parts]  # each inbox's refusals (behind ``_side``)
        self.views = ViewsOf()


class _NoFile:
    """The ``StoreFile`` of a store in memory: every member raises ``StoreError``."""

    @property
    def path(self) -> Path:
        raise StoreError("a store in memory has no file")

    def size(self) -> int:
        raise StoreError("a store in memory has no file")

    def records_size(self) -> int:
        return self.size()

    def backup(self, target: Path, *, compact: bool) -> None:
        raise StoreError("a store in memory has no file: copy its crawls with export()")


class PartitionedMemoryStorage:
    """Every crawl's data in this process, in ``partitions`` memory storages."""

    def __init__(self, partitions: int = 4, *, inboxes: bool = True) -> None:
        if not 1 < partitions <= 256:
            raise ValueError(f"partitions must be 2 to 256: {partitions!r}")
        self.capabilities = Capabilities(persistent=False, atomic_views=True,
                                          durability="memory", shared=False,
                                          partitions=partitions, inboxes=inboxes)  # fmt: skip
        self._parts = [MemoryStorage(token_prefix=bytes([p])) for p in range(partitions)]
        self._scope: ContextVar[int | None] = ContextVar(f"scope{id(self)}", default=None)
        self._crawls: dict[str, _Crawl] = {}
        self._side = threading.Lock()  # totals and claims: held for one operation
        self._turn = itertools.count()
        self._stamps = itertools.count(1)
        self._created = time.time()

    def __repr__(self) -> str:
        return f"PartitionedMemoryStorage({len(self._parts)})"

    # -- what a store asks of it (``Store(storage, clock)``) -------------------------------------

    location = "memory"
    readonly = False
    durability = Durability.NOSYNC
    fingerprint = FINGERPRINT_VERSION
    file = _NoFile()

    @property
    def meta(self) -> dict[str, Any]:
        return {"format": 1, "fingerprint": self.fingerprint, "created": self._created}

    def set_fingerprint(self, version: int) -> None:
        self.fingerprint = version

    indexed = True

    def set_indexed(self) -> None:
        pass

    def close(self) -> None:
        pass

    def server_clock(self) -> Callable[[], float] | None:
        return None

    @property
    def view_data(self) -> MemoryViews:
        return MemoryViews(self, self._undo)

    def views_of(self, name: str) -> ViewsOf | None:
        data = self._crawls.get(name)
        return data.views if data is not None else None

    # -- units ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _enter(self, scope: int) -> Iterator[None]:
        held = self._scope.get()
        if held is not None and held not in (_ALL, _DRY, scope):
            raise PartitionError(f"a unit on partition {held} cannot open a unit on "
                                 f"{'every partition' if scope == _ALL else scope}")  # fmt: skip
        parts = self._parts if scope == _ALL else [self._parts[scope]]
        try:
            with contextlib.ExitStack() as stack:
                for part in parts:  # always in partition order: no two units wait on each other
                    stack.enter_context(part.write())
                # a unit on one partition inside one over all is on it; inside a dry run, dry
                token = self._scope.set(_DRY if held == _DRY else scope)
                try:
                    yield
                finally:
                    self._scope.reset(token)
        finally:  # committed or rolled back: the hints say what the partitions now hold
            # (after a unit nested in another one too: a pop in the outer one reads them; the
            # outer one's end reads them again, rolled back or not)
            self._hint(range(len(self._parts)) if scope == _ALL else [scope])

    def _hint(self, partitions: Sequence[int]) -> None:
        """Read each partition's next event per crawl under its lock, with a stamp drawn
        there: of two threads hinting one partition, the later reading wins, whichever
        stores first."""
        for p in partitions:
            part = self._parts[p]

            def read(p: int = p, part: MemoryStorage = part) -> tuple[int, list[Any]]:
                crawls = list(self._crawls.values())
                stamp = next(self._stamps)  # (a post stamped before: its inbox is seen here)
                return stamp, [(d, -math.inf if d.inboxes[p] or d.refused[p]
                                 else part.next_event(d.parts[p]))
                               for d in crawls]  # fmt: skip

            stamp, found = part.view(read)
            with self._side:
                for data, at in found:
                    if stamp > data.stamps[p]:
                        data.stamps[p], data.events[p] = stamp, at

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self._enter(_ALL)

    def run(self, operation: Callable[[], _T]) -> _T:
        with self._enter(_ALL):
            return operation()

    def run_in(self, partition: int, operation: Callable[[], _T]) -> _T:
        with self._enter(partition):
            return operation()

    def run_each(self, units: Sequence[tuple[int, Callable[[], _T]]]) -> list[_T]:
        return run_in_turn(self, units)  # (in memory, one after the other)

    def view(self, operation: Callable[[], _T]) -> _T:
        return self.run(operation)  # (memory reads: holding the locks costs what reading does)

    def reader(self) -> UnitReader:
        return UnitReader(self)

    def scratch(self, operation: Callable[[], _T]) -> _T:
        with self._enter(_ALL):
            txn = journal.current()
            assert txn is not None
            mark = txn.mark()
            dry = self._scope.set(_DRY)
            try:
                return operation()
            finally:
                self._scope.reset(dry)
                txn.undo_to(mark)

    def _undo(self, undo: Callable[[], object]) -> None:
        txn = journal.current()
        if txn is not None:
            txn.undo(undo)

    # -- partitions -----------------------------------------------------------------------------

    def partition_of(self, crawl: CrawlRecord, key: str) -> int:
        return zlib.crc32(key.encode("utf-8", "surrogatepass")) % len(self._parts)

    def partitions(self, crawl: CrawlRecord) -> list[int]:
        return list(range(len(self._parts)))

    def lease_partition(self, crawl: CrawlRecord, token: bytes) -> int | None:
        return token[0] if len(token) == 13 and token[0] < len(self._parts) else None

    def claim_queues(self, crawl: CrawlRecord, fps: Sequence[bytes],
                     keys: Sequence[str]) -> list[str]:  # fmt: skip
        claims = self._data(crawl).claims
        with self._side:
            return [claims.setdefault(fp, key) for fp, key in zip(fps, keys, strict=True)]

    def claimed(self, crawl: CrawlRecord, fps: Sequence[bytes]) -> list[str | None]:
        claims = self._data(crawl).claims
        with self._side:
            return [claims.get(fp) for fp in fps]

    def look(self, crawl: CrawlRecord, fps: Sequence[bytes],
             keys: Sequence[str]) -> list[tuple[UrlRecord | None, bool]]:  # fmt: skip
        data = self._data(crawl)
        out = []
        for fp, key in zip(fps, keys, strict=True):
            p = self.partition_of(crawl, key)
            with self._side:
                posted = fp in data.inboxes[p]
            out.append((self._parts[p].url(data.parts[p], fp), posted))
        return out

    def post(self, crawl: CrawlRecord, posts: Sequence[Post], refused: Sequence[str] = ()) -> None:
        data = self._data(crawl)
        for key in refused:
            p = self.partition_of(crawl, key)
            self._add_refused(data, p, 1)
            self._undo(functools.partial(self._add_refused, data, p, -1))
            self._due_now(data, p)
        for post in posts:
            p = self.partition_of(crawl, post.key)
            self._put(data.inboxes[p], post.seed.fingerprint, post)
            self._due_now(data, p)

    def _due_now(self, data: _Crawl, p: int) -> None:
        """Hint the partition due now (a post there), stamped as ``_hint`` stamps."""
        with self._side:
            data.stamps[p], data.events[p] = next(self._stamps), -math.inf

    def _put(self, mapping: dict[bytes, Any], key: bytes, value: Any) -> None:
        """``mapping[key] = value`` behind ``_side``, undone with the open unit."""
        with self._side:
            old = mapping.get(key)
            mapping[key] = value
        if old == value:
            return

        def undo() -> None:
            with self._side:
                if old is None:
                    mapping.pop(key, None)
                else:
                    mapping[key] = old

        self._undo(undo)

    def posted(self, crawl: CrawlRecord) -> tuple[list[Post], int]:
        p = self._unit_partition("an inbox")
        data = self._data(crawl)
        with self._side:
            return list(data.inboxes[p].values()), data.refused[p]

    def _add_refused(self, data: _Crawl, p: int, n: int) -> None:
        with self._side:
            data.refused[p] += n

    def unpost(self, crawl: CrawlRecord, fps: Sequence[bytes], refused: int) -> None:
        p = self._unit_partition("an inbox")
        data = self._data(crawl)
        if refused:
            self._add_refused(data, p, -refused)
            self._undo(lambda: self._add_refused(data, p, refused))
        inbox = data.inboxes[p]
        for fp in fps:
            with self._side:
                old = inbox.pop(fp, None)
            if old is not None:

                def undo(fp: bytes = fp, old: Post = old) -> None:
                    with self._side:
                        inbox.setdefault(fp, old)

                self._undo(undo)

    def posted_partitions(self, crawl: CrawlRecord) -> list[int]:
        data = self._data(crawl)
        with self._side:
            return [p for p, inbox in enumerate(data.inboxes) if inbox or data.refused[p]]

    def in_transaction(self) -> bool:
        return self._scope.get() is not None

    def _unit_partition(self, what: str) -> int:
        scope = self._scope.get()
        if scope is None or scope < 0:
            raise PartitionError(f"{what} is a partition's: read and write it in a unit on one")
        return scope

    def prefetch_partitions(self, crawl: CrawlRecord, partitions: Sequence[int]) -> None:
        pass  # reads are memory reads

    def due_partitions(self, crawl: CrawlRecord, now: float) -> list[int]:
        n = len(self._parts)
        start = next(self._turn) % n
        with self._side:
            events = list(self._data(crawl).events)
        return [p for p in itertools.chain(range(start, n), range(start))
                if (at := events[p]) is not None and at <= now]  # fmt: skip

    def _data(self, crawl: CrawlRecord) -> _Crawl:
        data: _Crawl = crawl.ref
        return data

    def _in(self, p: int, what: str, write: bool = False) -> int:
        """``p``, checked against the calling unit's scope: a unit on another partition
        reaches nothing of it; a unit over every partition writes nothing of it."""
        scope = self._scope.get()
        if scope is not None and scope not in (_ALL, _DRY, p):
            raise PartitionError(f"a unit on partition {scope} reached {what}, of partition {p}")
        if write and scope == _ALL:
            raise PartitionError(f"a unit over every partition wrote {what}, of partition {p}: "
                                 "only a unit on that partition writes it")  # fmt: skip
        return p

    def _whole(self, what: str) -> None:
        scope = self._scope.get()
        if scope is not None and scope not in (_ALL, _DRY):
            raise PartitionError(f"{what} needs a unit over every partition; this one is on "
                                 f"partition {scope}")  # fmt: skip

    def _scoped(self) -> list[int]:
        """The partitions the calling unit sees."""
        scope = self._scope.get()
        return list(range(len(self._parts))) if scope in (None, _ALL, _DRY) else [scope]

    def _queue_part(
        self, crawl: CrawlRecord, key: str, write: bool = False
    ) -> tuple[MemoryStorage, CrawlRecord]:
        p = self._in(self.partition_of(crawl, key), f"queue {key!r}", write)
        return self._parts[p], self._data(crawl).parts[p]

    def _url_part(self, crawl: CrawlRecord, fp: bytes) -> tuple[MemoryStorage, CrawlRecord] | None:
        key = self._data(crawl).claims.get(fp)
        return self._queue_part(crawl, key) if key is not None else None

    # -- crawls ---------------------------------------------------------------------------------

    def defaults(self) -> Defaults:
        return self._parts[0].defaults()

    def save_defaults(self, defaults: Defaults) -> None:
        self._whole("the store's defaults")
        for part in self._parts:
            part.save_defaults(defaults)

    def crawl(self, name: str) -> CrawlRecord | None:
        data = self._crawls.get(name)
        if data is None:
            return None
        first = data.parts[0]
        return CrawlRecord(name, first.policy, first.created, data, settled=first.settled)

    def save_crawl(self, crawl: CrawlRecord) -> None:
        self._whole(f"crawl {crawl.name!r}'s record")
        data = self._crawls.get(crawl.name)
        if data is None:
            parts = [CrawlRecord(crawl.name, crawl.policy, crawl.created, settled=crawl.settled)
                     for _ in self._parts]  # fmt: skip
            data = self._crawls[crawl.name] = _Crawl(parts)
            self._undo(lambda: self._crawls.pop(crawl.name, None))
        for part, record in zip(self._parts, data.parts, strict=True):
            record.policy, record.settled, record.created = (
                crawl.policy,
                crawl.settled,
                crawl.created,
            )
            part.save_crawl(record)
        crawl.ref = data

    def crawls(self) -> list[str]:
        return sorted(self._crawls)

    def delete_crawl(self, crawl: CrawlRecord) -> int:
        self._whole(f"deleting crawl {crawl.name!r}")
        data = self._crawls.pop(crawl.name)
        self._undo(lambda: self._crawls.__setitem__(crawl.name, data))
        return sum(part.delete_crawl(record)
                   for part, record in zip(self._parts, data.parts, strict=True))  # fmt: skip

    def totals(self, crawl: CrawlRecord) -> dict[str, int]:
        out: Counter[str] = Counter()
        with self._side:
            for counts in self._data(crawl).totals:
                out.update(counts)
        return dict(out)

    def add_totals(self, crawl: CrawlRecord, deltas: dict[str, int]) -> None:
        scope = self._scope.get()
        counts = self._data(crawl).totals[0 if scope in (None, _ALL, _DRY) else scope]
        with self._side:
            counts.update(deltas)

        def undo() -> None:
            with self._side:
                counts.subtract(deltas)

        self._undo(undo)

    def next_seq(self, crawl: CrawlRecord, n: int = 1) -> int:
        parts = self._data(crawl).parts
        scope = self._scope.get()
        if scope not in (None, _ALL, _DRY):
            return self._parts[scope].next_seq(parts[scope], n)
        first = self.last_seq(crawl) + 1  # larger than every partition's: unique in the crawl
        self.advance_seq(crawl, first + n - 1)
        return first

    def last_seq(self, crawl: CrawlRecord) -> int:
        parts = self._data(crawl).parts
        return max(part.last_seq(record) for part, record in zip(self._parts, parts, strict=True))

    def advance_seq(self, crawl: CrawlRecord, at_least: int) -> None:
        parts = self._data(crawl).parts
        for p in self._scoped():  # (a unit on one partition: its own sequence)
            self._parts[p].advance_seq(parts[p], at_least)

    # the facades' state: with the crawl's record, in partition 0, written by units over all

    def state_get(self, crawl: CrawlRecord, namespace: str, key: str) -> bytes | None:
        return self._parts[0].state_get(self._data(crawl).parts[0], namespace, key)

    def state_put(self, crawl: CrawlRecord, namespace: str, key: str, value: bytes) -> None:
        self._whole(f"the state {namespace!r} of crawl {crawl.name!r}")
        self._parts[0].state_put(self._data(crawl).parts[0], namespace, key, value)

    def state_delete(self, crawl: CrawlRecord, namespace: str, key: str) -> bool:
        self._whole(f"the state {namespace!r} of crawl {crawl.name!r}")
        return self._parts[0].state_delete(self._data(crawl).parts[0], namespace, key)

    def state_keys(self, crawl: CrawlRecord, namespace: str) -> list[str]:
        return self._parts[0].state_keys(self._data(crawl).parts[0], namespace)

    def states(self, crawl: CrawlRecord) -> Iterator[tuple[str, str, bytes]]:
        return self._parts[0].states(self._data(crawl).parts[0])

    # -- queues ---------------------------------------------------------------------------------

    def queue(self, crawl: CrawlRecord, key: str) -> QueueRecord | None:
        part, record = self._queue_part(crawl, key)
        return part.queue(record, key)

    def save_queue(
        self, crawl: CrawlRecord, queue: QueueRecord, event: float | None, rotate: bool = False
    ) -> None:
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.save_queue(record, queue, event, rotate)

    def queues(self, crawl: CrawlRecord, after: str | None, limit: int) -> list[QueueRecord]:
        parts = self._data(crawl).parts
        found = [self._parts[p].queues(parts[p], after, limit) for p in self._scoped()]
        return list(itertools.islice(heapq.merge(*found, key=lambda q: q.key), limit))

    def queue_count(self, crawl: CrawlRecord) -> int:
        parts = self._data(crawl).parts
        return sum(self._parts[p].queue_count(parts[p]) for p in self._scoped())

    def due_queues(
        self, crawl: CrawlRecord, now: float, limit: int, below: int | None = None
    ) -> list[QueueRecord]:
        parts = self._data(crawl).parts
        found = [self._parts[p].due_queues(parts[p], now, limit, below) for p in self._scoped()]
        return heapq.nsmallest(limit, itertools.chain(*found), key=lambda q: q.ref)

    def next_event(self, crawl: CrawlRecord) -> float | None:
        parts = self._data(crawl).parts
        events = [self._parts[p].next_event(parts[p]) for p in self._scoped()]
        return min((at for at in events if at is not None), default=None)

    def delete_queue(self, crawl: CrawlRecord, queue: QueueRecord) -> int:
        part, record = self._queue_part(crawl, queue.key, write=True)
        fps = [url.fp for url in part.iter_urls(record, queue)]
        self._unclaim(crawl, fps, queue.key)
        return part.delete_queue(record, queue)

    def _unclaim(self, crawl: CrawlRecord, fps: list[bytes], key: str) -> None:
        """Drop the claims of these URLs on the queue ``key`` (not those on another: a URL
        moved to another queue is claimed by it before its old record goes)."""
        claims = self._data(crawl).claims
        with self._side:
            gone = {fp: claims.pop(fp) for fp in fps if claims.get(fp) == key}

        def undo() -> None:
            with self._side:
                claims.update(gone)

        self._undo(undo)

    # -- a queue's entries, leases and schedule -------------------------------------------------

    def enqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry, fp: bytes) -> None:
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.enqueue(record, queue, order, fp)

    def enqueue_many(self, crawl: CrawlRecord, queue: QueueRecord, urls: list[UrlRecord]) -> None:
        for url in urls:
            self._claim(crawl, url.fp, queue.key)
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.enqueue_many(record, queue, urls)

    def dequeue(self, crawl: CrawlRecord, queue: QueueRecord, n: int) -> list[bytes]:
        part, record = self._queue_part(crawl, queue.key, write=True)
        return part.dequeue(record, queue, n)

    def unqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry) -> None:
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.unqueue(record, queue, order)

    def lease(self, crawl: CrawlRecord, queue: QueueRecord, lease: LeaseRecord) -> None:
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.lease(record, queue, lease)

    def _lease_part(
        self, crawl: CrawlRecord, token: bytes, write: bool = False
    ) -> tuple[MemoryStorage, CrawlRecord]:
        p = self.lease_partition(crawl, token)
        if p is None:
            p = self._scoped()[0]  # names no partition: not found in any
        self._in(p, f"lease {token.hex()}", write)
        return self._parts[p], self._data(crawl).parts[p]

    def get_lease(self, crawl: CrawlRecord, token: bytes) -> LeaseRecord | None:
        if self.lease_partition(crawl, token) is None:
            return None
        part, record = self._lease_part(crawl, token)
        return part.get_lease(record, token)

    def extend_lease(self, crawl: CrawlRecord, lease: LeaseRecord, expires: float) -> None:
        part, record = self._lease_part(crawl, lease.token, write=True)
        part.extend_lease(record, lease, expires)

    def end_lease(self, crawl: CrawlRecord, lease: LeaseRecord) -> None:
        part, record = self._lease_part(crawl, lease.token, write=True)
        part.end_lease(record, lease)

    def expired(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[LeaseRecord]:
        part, record = self._queue_part(crawl, queue.key, write=True)
        return part.expired(record, queue, now)

    def next_expiry(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        part, record = self._queue_part(crawl, queue.key)
        return part.next_expiry(record, queue)

    def leases(self, crawl: CrawlRecord) -> Iterator[LeaseRecord]:
        parts = self._data(crawl).parts
        for p in self._scoped():
            yield from self._parts[p].leases(parts[p])

    def schedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot, fp: bytes) -> None:
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.schedule(record, queue, when, fp)

    def unschedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot) -> None:
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.unschedule(record, queue, when)

    def due(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[bytes]:
        part, record = self._queue_part(crawl, queue.key, write=True)
        return part.due(record, queue, now)

    def next_due(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        part, record = self._queue_part(crawl, queue.key)
        return part.next_due(record, queue)

    # -- URLs -----------------------------------------------------------------------------------

    def prefetch(self, crawl: CrawlRecord, fps: Sequence[bytes], queues: Sequence[str],
                 tokens: Sequence[bytes] = ()) -> None:  # fmt: skip
        pass  # reads are memory reads

    def find_urls(self, crawl: CrawlRecord, fps: Sequence[bytes],
                  queues: Sequence[str]) -> list[UrlRecord | None]:  # fmt: skip
        return [self.url(crawl, fp) for fp in fps]

    def url(self, crawl: CrawlRecord, fp: bytes) -> UrlRecord | None:
        scope = self._scope.get()
        if scope is not None and scope >= 0:  # a unit on one partition: its record there
            return self._parts[scope].url(self._data(crawl).parts[scope], fp)
        found = self._url_part(crawl, fp)
        return found[0].url(found[1], fp) if found is not None else None

    def _claim(self, crawl: CrawlRecord, fp: bytes, key: str) -> None:
        self._put(self._data(crawl).claims, fp, key)

    def save_url(self, crawl: CrawlRecord, queue: QueueRecord, url: UrlRecord) -> None:
        # (a URL moved to a queue of another partition: its old record is deleted by a unit
        # on that one, after this one claims it)
        part, record = self._queue_part(crawl, queue.key, write=True)
        self._claim(crawl, url.fp, queue.key)
        part.save_url(record, queue, url)

    def delete_url(self, crawl: CrawlRecord, url: UrlRecord) -> None:
        part, record = self._queue_part(crawl, url.queue, write=True)
        part.delete_url(record, url)
        self._unclaim(crawl, [url.fp], url.queue)

    def urls(self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None,
             limit: int) -> list[UrlRecord]:  # fmt: skip
        if queue is not None:
            part, record = self._queue_part(crawl, queue.key)
            return part.urls(record, queue, after, limit)
        parts = self._data(crawl).parts
        found = [self._parts[p].urls(parts[p], None, after, limit) for p in self._scoped()]
        return list(itertools.islice(heapq.merge(*found, key=lambda u: u.fp), limit))

    def iter_urls(self, crawl: CrawlRecord, queue: QueueRecord | None) -> Iterator[UrlRecord]:
        if queue is not None:
            part, record = self._queue_part(crawl, queue.key)
            return part.iter_urls(record, queue)
        parts = self._data(crawl).parts
        return heapq.merge(*(self._parts[p].iter_urls(parts[p], None) for p in self._scoped()),
                           key=lambda u: u.fp)  # fmt: skip

    # -- bounded indexes: each partition's, merged --------------------------------------------

    def note_failure(self, crawl: CrawlRecord, queue: QueueRecord, failure: Failure,
                     keep: int) -> None:  # fmt: skip
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.note_failure(record, queue, failure, keep)

    def failures(self, crawl: CrawlRecord, limit: int) -> list[Failure]:
        parts = self._data(crawl).parts
        found = [self._parts[p].failures(parts[p], limit) for p in self._scoped()]
        return heapq.nlargest(limit, itertools.chain(*found), key=failure_key)

    def count_revisit(self, crawl: CrawlRecord, queue: QueueRecord, fp: bytes, at: float,
                      n: int) -> None:  # fmt: skip
        part, record = self._queue_part(crawl, queue.key, write=True)
        part.count_revisit(record, queue, fp, at, n)

    def revisits_due(self, crawl: CrawlRecord, until: float) -> int:
        parts = self._data(crawl).parts
        return sum(self._parts[p].revisits_due(parts[p], until) for p in self._scoped())
