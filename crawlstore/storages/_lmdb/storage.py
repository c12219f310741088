"""``LmdbStorage``: the frontier's storage interface over a store's LMDB environment.

Every key starts with the crawl's 4-byte id; a queue's own keys continue with its 4-byte id, so
that a queue's entries, leases, expiries, schedule and URL records are each one key range.

| table | key | value |
|---|---|---|
| ``crawls`` | crawl name | id, policy, creation time |
| ``queues`` | crawl / crawl, queue | the crawl's totals / the queue's record |
| ``qnames`` | crawl, queue key (a digest when long) | queue id |
| ``ready`` | crawl, event (ms), sequence | queue id: the crawl's index of queues |
| ``loads`` | crawl, in-flight count, event (ms), sequence | queue id: ``ready`` by load |
| ``wakes`` | crawl, ``tend_at`` (ms), queue | nothing: the loaded queues to tend by time |
| ``pending`` | crawl, queue, rank, class, sequence | fingerprint |
| ``leases`` | crawl, queue, sequence | fingerprint, expiry, holder pid and start, nonce |
| ``expiries`` | crawl, queue, expiry (ms), sequence | nothing |
| ``schedule`` | crawl, queue, due (ms, rounded up), sequence | fingerprint, exact due time |
| ``urls`` | crawl, queue, sequence | fingerprint, then the URL record (``encode_url``) |
| ``fingerprints`` | crawl, fingerprint | queue, sequence: where its URL record is |

A new URL's record goes at the end of its queue's range of ``urls`` (its sequence is the crawl's
next), beside the URLs its queue took before it, rather than at a random place: a page's new
URLs dirty the last leaf of a few queues, and the random writes go to the small entries of
``fingerprints`` only.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import os
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import lmdb

from ...errors import CorruptRecord, StoreError
from ...frontier.policy import DEFAULTS, CrawlPolicy, Defaults
from ...frontier.spi import (
    FINISHED,
    QUEUE_FIELDS,
    Capabilities,
    CrawlRecord,
    Entry,
    Failure,
    LeaseRecord,
    QueueRecord,
    Slot,
    UrlRecord,
    tend_time,
)
from ...url import Fingerprint
from .._records import ORDER, decode_url, encode_url, ms_up
from . import indexes, keys
from .codec import pack, scan, unpack
from .context import COUNTERS
from .engine import Durability
from .file import LmdbFile
from .viewdata import LmdbViewData

if TYPE_CHECKING:
    from .context import WriteContext
    from .engine import Engine

__all__ = ["LmdbStorage"]

_T = TypeVar("_T")
_LEASE = struct.Struct(">16sdqq4s")  # fingerprint, expiry, holder pid and start, nonce
_U32 = struct.Struct(">I")
_MS_SEQ = struct.Struct(">QQ")
#: A schedule's value: the fingerprint, and the exact due time (its key holds it rounded up).
_SCHEDULED = struct.Struct(">16sd")
#: Tables whose records a write transaction caches and writes back at its end: a cursor on
#: one reads what was flushed.
_HASHED = keys.HASHED
_WRITE_BACK = frozenset({"meta", "crawls", "queues", "bloom"})
#: Tables whose keys start with a crawl's id (deleting a crawl clears its range in each).
CRAWL_TABLES = ("queues", "qnames", "ready", "loads", "wakes", "pending", "leases", "expiries",
                "schedule", "urls", "fingerprints", "bloom", "validators", "state", "failures",
                "revisits")  # fmt: skip
#: A queue's URL records are sorted in memory for a walk in fingerprint order when it has at
#: most this many; a larger queue is walked through ``fingerprints`` (the crawl's, in order).
_SORTED_WALK = 65536
#: Where a queue record (``QUEUE_FIELDS``, then its key in ``ready``) holds its in-flight count
#: (its key in ``loads``) and the other values of its ``tend_at`` (its key in ``wakes``).
_IN_FLIGHT = QUEUE_FIELDS.index("in_flight")
_DUE_AT, _EXPIRY_AT, _EVENT = (QUEUE_FIELDS.index(f) for f in ("due_at", "expiry_at", "event"))


def _wake(crawl: bytes, qid: int, record: list[Any]) -> bytes | None:
    """A queue's key in ``wakes``, from its record (None: none)."""
    if record[_IN_FLIGHT] is None:
        return None  # (a queue not stored yet)
    at = tend_time(record[_IN_FLIGHT], record[_DUE_AT], record[_EXPIRY_AT], record[_EVENT])
    return keys.wake_key(crawl, qid, None if at is None else ms_up(at))


def _memo(decode: Callable[[Any], _T]) -> Callable[[dict[str, Any]], _T]:
    """``decode`` of a small record, memoised by its contents (policies: frozen values, read
    at every unit)."""
    cached = functools.lru_cache(maxsize=256)(lambda items: decode(dict(items)))

    def read(record: dict[str, Any]) -> _T:
        try:
            return cached(tuple(sorted(record.items())))
        except TypeError:  # an unhashable value: a damaged record, decoded to say so
            return decode(record)

    return read


_policy = _memo(CrawlPolicy.from_record)
_defaults = _memo(Defaults.from_record)


#: ``_Local.ctx`` when the thread runs none of this storage's units: ``current`` is then the
#: engine's (the write transaction the calling flow has open, if any).
_ENGINE: Any = object()


class _Local(threading.local):
    """What the calling thread has open in this storage."""

    #: A read transaction: a snapshot's (``_Reader.run``), a view's or a dry run's.
    txn: lmdb.Transaction | None = None
    #: What ``current`` hands the thread: its write unit's transaction, a dry run's, or None
    #: while a snapshot's operation reads (``_ENGINE`` outside all of these).
    ctx: Any = _ENGINE
    #: Whether ``ctx`` is a snapshot's or a dry run's, which a unit begun inside keeps.
    pinned = False


class _Reader:
    """A read transaction kept open across calls; each ``run`` reads in it. The engine does not
    grow its map while one is open (that would end it)."""

    def __init__(self, storage: LmdbStorage) -> None:
        self._storage = storage
        engine = storage.engine
        with engine.lock:  # no map growth under way while it begins
            engine.check_process()
            try:
                self._txn: lmdb.Transaction | None = engine.begin(write=False)
            except lmdb.Error as exc:
                raise engine.translate(exc) from None
            engine.readers += 1

    def run(self, operation: Callable[[], _T]) -> _T:
        if self._txn is None:
            raise StoreError(f"{self._storage.engine.path}: this snapshot was closed")
        storage = self._storage
        local = storage._local
        saved = local.txn, local.ctx, local.pinned
        # reads of the snapshot, even inside a unit or in one begun by the operation
        local.txn, local.ctx, local.pinned = self._txn, None, True
        try:
            return operation()
        except lmdb.Error as exc:
            raise storage.engine.translate(exc) from None
        finally:
            local.txn, local.ctx, local.pinned = saved

    def close(self) -> None:
        if self._txn is not None:
            txn, self._txn = self._txn, None
            with self._storage.engine.lock:
                txn.abort()
                self._storage.engine.readers -= 1


class LmdbStorage:
    """The frontier storage of a store file. Several processes may share it: LMDB lets one
    writer in at a time, and every write unit is one LMDB write transaction."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.dbs = engine.dbs
        self.capabilities = Capabilities(
            persistent=True,
            atomic_views=True,
            durability="disk" if engine.durability is not Durability.NOSYNC else "os",
            shared=True,
            snapshot=True,
        )
        self._local = _Local()

        self.file = LmdbFile(engine)
        self.location = str(engine.path)
        self.readonly = engine.readonly
        self.durability = engine.durability
        self.view_data = LmdbViewData(self)

    def __repr__(self) -> str:
        return f"LmdbStorage({str(self.engine.path)!r})"

    # -- the store ------------------------------------------------------------------------------

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.engine.meta)

    @property
    def fingerprint(self) -> int:
        return self.engine.fingerprint

    def set_fingerprint(self, version: int) -> None:
        self.engine.set_fingerprint(version)

    #: The file's format keeps its indexes (an older one is migrated, its indexes written).
    indexed = True

    def set_indexed(self) -> None:
        pass

    def close(self) -> None:
        self.engine.release()

    def server_clock(self) -> Callable[[], float] | None:
        return None  # one machine's processes: its clock

    # -- units ----------------------------------------------------------------------------------

    def run(self, operation: Callable[[], _T]) -> _T:
        local = self._local

        def unit(ctx: WriteContext) -> _T:
            # The unit's transaction, for every call inside it: an operation never awaits, so
            # no other flow of this thread runs until it returns, and the engine lets one
            # thread at a time into a write unit. Inside a snapshot's or a dry run's operation,
            # its own stays (a write there is a bug, refused, or the dry run's).
            if local.pinned:
                return operation()
            outer = local.ctx
            local.ctx = ctx
            try:
                return operation()
            finally:
                local.ctx = outer

        return self.engine.run(unit)

    def run_ctx(self, operation: Callable[[WriteContext], _T]) -> _T:
        """``run``, handing the operation its write transaction (the store's own views)."""
        return self.run(lambda: operation(self.ctx()))

    def current(self) -> WriteContext | None:
        """The calling flow's write transaction, if it has one open (None while a reader's
        operation runs: it reads its snapshot). ``ctx``, ``txn`` and ``record``, called dozens
        of times a page, find it in place as it does here."""
        ctx: WriteContext | None = self._local.ctx
        return self.engine.current if ctx is _ENGINE else ctx

    def view(self, operation: Callable[[], _T]) -> _T:
        if self.current() is not None or self._local.txn is not None:
            return operation()

        def read(txn: lmdb.Transaction) -> _T:
            self._local.txn = txn
            try:
                return operation()
            finally:
                self._local.txn = None

        return self.engine.read(read)

    def transaction(self) -> Any:
        return self.engine.transaction()

    def scratch(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as a write unit whose writes go to an ``Overlay`` over one read
        (of the caller's open transaction, its own writes included, when it has one), and are
        dropped after: nothing is written, so a store opened read-only can run it."""
        from .context import WriteContext
        from .dryrun import Overlay

        local = self._local

        def dry(txn: Any) -> _T:
            ctx = WriteContext(self.engine, Overlay(txn), {})  # type: ignore[arg-type]
            saved = local.txn, local.ctx, local.pinned
            local.txn, local.ctx, local.pinned = ctx.txn, ctx, True
            try:
                return operation()
            finally:
                local.txn, local.ctx, local.pinned = saved

        current = self.current()
        if current is not None:  # a write transaction, or a dry run: read what it holds
            current.flush()
            return dry(current.txn)
        if local.txn is not None:  # a snapshot's read (an export's)
            return dry(local.txn)
        return self.engine.read(dry)

    def reader(self) -> _Reader:
        """A read snapshot of what is committed, kept open across calls (an export reads in
        it between its records); close it."""
        return _Reader(self)

    def ctx(self) -> WriteContext:
        ctx: WriteContext | None = self._local.ctx
        if ctx is _ENGINE:
            ctx = self.engine.current
        if ctx is None:
            raise StoreError(f"{self.engine.path}: a write outside a write unit (a bug)")
        return ctx

    def txn(self) -> lmdb.Transaction:
        local = self._local
        ctx: WriteContext | None = local.ctx
        if ctx is _ENGINE:
            ctx = self.engine.current
        if ctx is not None:
            return ctx.txn
        txn: lmdb.Transaction | None = local.txn
        if txn is None:
            raise StoreError(f"{self.engine.path}: a read outside a unit (a bug)")
        return txn

    def get(self, db: str, key: bytes) -> bytes | None:
        raw = self.txn().get(key, db=self.dbs[db])
        return bytes(raw) if raw is not None else None

    def record(self, db: str, key: bytes) -> Any:
        """A cached record (in a write unit) or a fresh read."""
        ctx: WriteContext | None = self._local.ctx
        if ctx is _ENGINE:
            ctx = self.engine.current
        if ctx is not None:
            return ctx.record(db, key)
        raw = self.get(db, key)
        return unpack(db, key, raw) if raw is not None else None

    def cursor(self, db: str) -> lmdb.Cursor:
        ctx = self.current()
        if ctx is not None:
            if db in _WRITE_BACK:
                ctx.flush()  # the records this transaction changed, so that the cursor sees them
            return ctx.cursor(db)
        return self.txn().cursor(db=self.dbs[db])

    # -- crawls ---------------------------------------------------------------------------------

    def defaults(self) -> Defaults:
        record = self.record("meta", b"defaults")
        return _defaults(record) if isinstance(record, dict) else DEFAULTS

    def save_defaults(self, defaults: Defaults) -> None:
        self.ctx().put_record("meta", b"defaults", defaults.to_record())

    def crawl(self, name: str) -> CrawlRecord | None:
        record = self.record("crawls", name.encode("utf-8"))
        if record is None:
            return None
        ctx = self.current()
        if ctx is not None:  # decoded once a transaction, while its record stays the same
            memo = ctx.memo.get(("crawl", name))
            if memo is not None and memo[0] is record:
                crawl: CrawlRecord = memo[1]
                return crawl
        try:
            policy = _policy(record.get("policy") or {})
            crawl = CrawlRecord(name, policy, float(record["created"]), keys.u32(record["id"]),
                                settled=bool(record.get("settled", True)))  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptRecord(f"crawls record {name!r} is malformed: {exc}") from None
        if ctx is not None and crawl.settled:  # an unsettled one is changed by its reader
            ctx.memo[("crawl", name)] = (record, crawl)
        return crawl

    def save_crawl(self, crawl: CrawlRecord) -> None:
        ctx = self.ctx()
        key = crawl.name.encode("utf-8")
        if crawl.ref is None:
            ids = ctx.record("meta", b"crawl_ids", lambda: 0) + 1
            ctx.put_record("meta", b"crawl_ids", ids)
            crawl.ref = keys.u32(ids)
        record = {"id": keys.read_u32(crawl.ref), "policy": crawl.policy.to_record(),
                  "created": crawl.created}  # fmt: skip
        if not crawl.settled:
            record["settled"] = False
        ctx.put_record("crawls", key, record)

    def crawl_key(self, name: str, *, create: float | None = None) -> bytes | None:
        """In a unit: the crawl's key prefix, None when there is no such crawl; with ``create``
        (the time) a missing crawl is created, its policy not settled yet."""
        record = self.record("crawls", name.encode("utf-8"))
        if isinstance(record, dict) and isinstance(record.get("id"), int):
            return keys.u32(record["id"])  # the common case: no policy decoded
        crawl = self.crawl(name)  # missing, or damaged: CorruptRecord names it
        if crawl is None:
            if create is None:
                return None
            crawl = CrawlRecord(name, CrawlPolicy(), create, settled=False)
            self.save_crawl(crawl)
        prefix: bytes = crawl.ref
        return prefix

    def crawls(self) -> list[str]:
        ctx = self.current()
        if ctx is not None:
            ctx.flush()
        cursor = self.txn().cursor(db=self.dbs["crawls"])
        return [bytes(k).decode("utf-8") for k in cursor.iternext(values=False)]

    def delete_crawl(self, crawl: CrawlRecord) -> int:
        ctx = self.ctx()
        prefix = crawl.ref
        removed = sum(1 for _ in scan(ctx.txn, self.dbs["fingerprints"], prefix))
        for table in CRAWL_TABLES:
            self._delete_range(table, prefix)
        ctx.txn.delete(prefix, db=self.dbs["seen"])  # the exact seen set: duplicates of one key
        for slot in [s for s in ctx.records if s[1][keys.CRAWL] == prefix]:
            ctx.put_record(slot[0], slot[1], None)
        ctx.forget_blobs(prefix)  # cached Bloom chunks of the crawl: not written back
        ctx.put_record("crawls", crawl.name.encode("utf-8"), None)
        return removed

    def _delete_range(self, table: str, prefix: bytes) -> int:
        cursor = self.ctx().cursor(table)
        n = 0
        if cursor.set_range(prefix):
            while cursor.key()[: len(prefix)] == prefix:
                n += 1
                if not cursor.delete():
                    break
        return n

    def totals(self, crawl: CrawlRecord) -> dict[str, int]:
        return self.totals_of(crawl.ref)

    def totals_of(self, prefix: bytes) -> dict[str, int]:
        """In a unit: the totals of the crawl with this key prefix."""
        counters = self.record(COUNTERS, prefix)
        return dict(counters) if counters else {}

    def add_totals(self, crawl: CrawlRecord, deltas: dict[str, int]) -> None:
        counters = self.ctx().counters(crawl.ref)
        for name, n in deltas.items():
            counters[name] += n

    def next_seq(self, crawl: CrawlRecord, n: int = 1) -> int:
        return self.ctx().next_seq(crawl.ref, n)

    def last_seq(self, crawl: CrawlRecord) -> int:
        return self.totals_of(crawl.ref).get("seq", 0)

    def advance_seq(self, crawl: CrawlRecord, at_least: int) -> None:
        counters = self.ctx().counters(crawl.ref)
        counters["seq"] = max(counters["seq"], at_least)

    # A state value is at crawl + namespace + NUL + key; a long key is stored under a digest,
    # with the key kept in the value: [key, value].

    @staticmethod
    def _state_key(crawl: CrawlRecord, namespace: str, key: str) -> tuple[bytes, bool]:
        """The key of a state value, and whether it is a digest of a long key."""
        prefix = crawl.ref + namespace.encode("utf-8") + b"\x00"
        k = keys.text_key(prefix, key, "a state key")
        return k, k[len(prefix) : len(prefix) + 1] == _HASHED

    @staticmethod
    def _long_state(k: bytes, raw: bytes) -> tuple[str, bytes]:
        """The key and packed value of the record of a long key: [key, value]."""
        record = unpack("state", k, raw)
        if not (isinstance(record, list) and len(record) == 2):
            raise CorruptRecord(f"state record {k.hex()} is malformed: {record!r:.100}")
        return record[0], pack(record[1])

    def state_get(self, crawl: CrawlRecord, namespace: str, key: str) -> bytes | None:
        k, hashed = self._state_key(crawl, namespace, key)
        raw = self.get("state", k)
        return self._long_state(k, raw)[1] if raw is not None and hashed else raw

    def state_put(self, crawl: CrawlRecord, namespace: str, key: str, value: bytes) -> None:
        k, hashed = self._state_key(crawl, namespace, key)
        if hashed:
            value = b"\x92" + pack(key) + value  # the msgpack of [key, value]
        self.ctx().txn.put(k, value, db=self.dbs["state"])

    def state_delete(self, crawl: CrawlRecord, namespace: str, key: str) -> bool:
        k, _ = self._state_key(crawl, namespace, key)
        return bool(self.ctx().txn.delete(k, db=self.dbs["state"]))

    def state_keys(self, crawl: CrawlRecord, namespace: str) -> list[str]:
        prefix = crawl.ref + namespace.encode("utf-8") + b"\x00"
        return [key for _, key, _ in self._states(prefix)]

    def states(self, crawl: CrawlRecord) -> Iterator[tuple[str, str, bytes]]:
        return self._states(crawl.ref)

    def _states(self, prefix: bytes) -> Iterator[tuple[str, str, bytes]]:
        for key, raw in scan(self.txn(), self.dbs["state"], prefix):
            namespace, _, rest = key[keys.AFTER_CRAWL].partition(b"\x00")
            if rest[:1] == _HASHED:
                yield (namespace.decode("utf-8"), *self._long_state(key, raw))
            else:
                yield namespace.decode("utf-8"), rest.decode("utf-8"), raw

    # -- queues ---------------------------------------------------------------------------------

    def _qid(self, crawl: CrawlRecord, key: str) -> int | None:
        ctx = self.current()
        slot = ("qid", crawl.ref, key)
        if ctx is not None and slot in ctx.memo:  # a queue's id never changes while it exists
            qid: int = ctx.memo[slot][1]
            return qid
        raw = self.get("qnames", keys.text_key(crawl.ref, key, "a queue key"))
        if raw is None:
            return None
        qid = keys.read_u32(raw)
        if ctx is not None:
            ctx.memo[slot] = (None, qid)
        return qid

    def _queue_at(self, crawl: CrawlRecord, qid: int) -> QueueRecord:
        qkey = crawl.ref + keys.u32(qid)
        record = self.record("queues", qkey)
        ctx = self.current()
        if ctx is not None:  # decoded once a transaction, while its record stays the one saved
            memo = ctx.memo.get(("queue", qkey))
            if memo is not None and memo[0] is record:
                queue: QueueRecord = memo[1]
                return queue
        try:
            *fields, index_key = record  # the queue, then its key in the crawl's index
            q = QueueRecord.from_record(fields)
        except (TypeError, ValueError) as exc:
            raise CorruptRecord(f"queues record {qkey.hex()} is malformed: {exc!r}") from None
        q.ref = (qid, qkey, index_key, record)  # and the record as stored (its index keys)
        if ctx is not None:
            ctx.memo[("queue", qkey)] = (record, q)
        return q

    def queue(self, crawl: CrawlRecord, key: str) -> QueueRecord | None:
        qid = self._qid(crawl, key)
        return self._queue_at(crawl, qid) if qid is not None else None

    def save_queue(
        self, crawl: CrawlRecord, queue: QueueRecord, event: float | None, rotate: bool = False
    ) -> None:
        ctx = self.ctx()
        if queue.ref is None:
            qid = self._qid(crawl, queue.key)
            if qid is None:
                counters = ctx.counters(crawl.ref)
                counters["qids"] += 1
                counters["queues"] += 1
                qid = counters["qids"]
                ctx.txn.put(keys.text_key(crawl.ref, queue.key, "a queue key"), keys.u32(qid),
                            db=self.dbs["qnames"])  # fmt: skip
                ctx.memo[("qid", crawl.ref, queue.key)] = (None, qid)
            queue.ref = (qid, crawl.ref + keys.u32(qid), None, None)
        qid, qkey, placed, stored = queue.ref
        if event is None:
            index_key = None
        elif (
            placed is not None
            and not rotate
            and keys.read_u64(placed, keys.READY_MS) == ms_up(event)
        ):
            index_key = placed
        else:
            index_key = crawl.ref + _MS_SEQ.pack(ms_up(event), ctx.next_seq(crawl.ref))
        queue.event = event
        record = [*queue.to_record(), index_key]
        txn, dbs, value = ctx.txn, self.dbs, keys.u32(qid)
        if stored is None:
            stored = [None] * len(record)  # no keys yet
        if index_key != placed:
            if placed is not None:
                txn.delete(placed, db=dbs["ready"])
            if index_key is not None:
                txn.put(index_key, value, db=dbs["ready"])
        if index_key != placed or stored[_IN_FLIGHT] != record[_IN_FLIGHT]:
            old = keys.load_key(placed, stored[_IN_FLIGHT])
            if old is not None:
                txn.delete(old, db=dbs["loads"])
            new = keys.load_key(index_key, record[_IN_FLIGHT])
            if new is not None:
                txn.put(new, value, db=dbs["loads"])
        if (stored[_IN_FLIGHT], stored[_DUE_AT], stored[_EXPIRY_AT], stored[_EVENT]) != (
            record[_IN_FLIGHT],
            record[_DUE_AT],
            record[_EXPIRY_AT],
            record[_EVENT],
        ):
            old, new = _wake(crawl.ref, qid, stored), _wake(crawl.ref, qid, record)
            if old != new:
                if old is not None:
                    txn.delete(old, db=dbs["wakes"])
                if new is not None:
                    txn.put(new, b"", db=dbs["wakes"])
        queue.ref = (qid, qkey, index_key, record)
        ctx.put_record("queues", qkey, record)
        ctx.memo[("queue", qkey)] = (record, queue)

    def queues(self, crawl: CrawlRecord, after: str | None, limit: int) -> list[QueueRecord]:
        cursor = self.cursor("qnames")
        start = crawl.ref if after is None else keys.text_key(crawl.ref, after, "a queue key")
        out: list[QueueRecord] = []
        if not cursor.set_range(start):
            return out
        while len(out) < limit:
            key = cursor.key()
            if key[keys.CRAWL] != crawl.ref:
                break
            if after is None or bytes(key) != start:
                out.append(self._queue_at(crawl, keys.read_u32(cursor.value())))
            if not cursor.next():
                break
        return out

    def queue_count(self, crawl: CrawlRecord) -> int:
        return self.totals(crawl).get("queues", 0)

    def due_queues(
        self, crawl: CrawlRecord, now: float, limit: int, below: int | None = None
    ) -> list[QueueRecord]:
        # Index keys are event times rounded up to the millisecond: a queue placed at ``now``
        # itself (no delay) must be found at ``now``, so compare with ``now`` rounded up too.
        # One indexed up to a millisecond ahead may come back; the core checks each queue's
        # exact time, and ``next_event`` (rounded up) is never early.
        now_ms = ms_up(now)
        if below is not None:
            places = self._due_loads(crawl, now_ms, limit, below)
            places.update(self._woken(crawl, now_ms))
            chosen = heapq.nsmallest(limit, places.items(), key=lambda item: item[1])
            return [self._queue_at(crawl, qid) for qid, _ in chosen]
        cursor = self.cursor("ready")
        out: list[QueueRecord] = []
        if not cursor.set_range(crawl.ref):
            return out
        while len(out) < limit:
            key = cursor.key()
            if key[keys.CRAWL] != crawl.ref or keys.read_u64(key, keys.READY_MS) > now_ms:
                break
            out.append(self._queue_at(crawl, keys.read_u32(cursor.value())))
            if not cursor.next():
                break
        return out

    def _due_loads(self, crawl: CrawlRecord, now_ms: int, limit: int,
                   below: int) -> dict[int, bytes]:  # fmt: skip
        """Up to ``limit`` queues of each in-flight count under ``below`` indexed at ``now_ms``
        or before: queue id -> place. A seek for each count the crawl's queues have."""
        cursor, prefix, places = self.cursor("loads"), crawl.ref, {}
        load = 0
        while load < below and cursor.set_range(prefix + keys.u32(load)):
            key = cursor.key()
            if key[keys.CRAWL] != prefix or keys.read_u32(key, keys.LOAD) >= below:
                break
            load = keys.read_u32(key, keys.LOAD)
            for _ in range(limit):
                if (key[keys.CRAWL] != prefix or keys.read_u32(key, keys.LOAD) != load
                        or keys.read_u64(key, keys.LOAD_PLACE.start) > now_ms):  # fmt: skip
                    break
                places[keys.read_u32(cursor.value())] = bytes(key[keys.LOAD_PLACE])
                if not cursor.next():
                    break
                key = cursor.key()
            load += 1
        return places

    def _woken(self, crawl: CrawlRecord, now_ms: int) -> dict[int, bytes]:
        """The queues to tend at ``now_ms`` whatever their load (``tend_at``): id -> place."""
        cursor, prefix, places = self.cursor("wakes"), crawl.ref, {}
        found = cursor.set_range(prefix)
        while found:
            key = cursor.key()
            if key[keys.CRAWL] != prefix or keys.read_u64(key, keys.WAKE_MS) > now_ms:
                break
            qid = keys.read_u32(key, keys.WAKE_QUEUE)
            placed = self._queue_at(crawl, qid).ref[2]
            if placed is None:
                raise CorruptRecord(f"wakes record {bytes(key).hex()} names queue {qid}, "
                                    "which has no place in ready")  # fmt: skip
            places[qid] = placed[keys.AFTER_CRAWL]
            found = cursor.next()
        return places

    def next_event(self, crawl: CrawlRecord) -> float | None:
        cursor = self.cursor("ready")
        if cursor.set_range(crawl.ref) and cursor.key()[keys.CRAWL] == crawl.ref:
            return keys.read_u64(cursor.key(), keys.READY_MS) / 1000
        return None

    def delete_queue(self, crawl: CrawlRecord, queue: QueueRecord) -> int:
        ctx = self.ctx()
        qid, qkey, placed, stored = queue.ref
        loaded = None if stored is None else keys.load_key(placed, stored[_IN_FLIGHT])
        woken = None if stored is None else _wake(crawl.ref, qid, stored)
        index, prefix = self.dbs["fingerprints"], crawl.ref
        fps = [bytes(raw[:16]) for _, raw in scan(ctx.txn, self.dbs["urls"], qkey)]
        for fp in fps:
            ctx.txn.delete(prefix + fp, db=index)
        for table in ("pending", "leases", "expiries", "schedule", "urls"):
            self._delete_range(table, qkey)
        for table, indexed in (("ready", placed), ("loads", loaded), ("wakes", woken)):
            if indexed is not None:
                ctx.txn.delete(indexed, db=self.dbs[table])
        ctx.txn.delete(keys.text_key(crawl.ref, queue.key, "a queue key"), db=self.dbs["qnames"])
        ctx.put_record("queues", qkey, None)
        ctx.memo.pop(("qid", crawl.ref, queue.key), None)
        ctx.memo.pop(("queue", qkey), None)
        ctx.counters(crawl.ref)["queues"] -= 1
        return len(fps)

    # -- a queue's entries, leases and schedule -------------------------------------------------

    def enqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry,
                fp: bytes) -> None:  # fmt: skip
        self.ctx().txn.put(queue.ref[1] + ORDER.pack(*order), fp, db=self.dbs["pending"])

    def enqueue_many(self, crawl: CrawlRecord, queue: QueueRecord, urls: list[UrlRecord]) -> None:
        ctx = self.ctx()
        txn, dbs, key, prefix = ctx.txn, self.dbs, queue.key, crawl.ref
        put, pending, records, index = txn.put, dbs["pending"], dbs["urls"], dbs["fingerprints"]
        if queue.ref is None:
            raise StoreError(f"URLs queued before their queue {key!r} was saved")
        qkey, entry_key, u64 = queue.ref[1], ORDER.pack, keys.u64
        for url in urls:
            fp = url.fp
            if url.queue != key:
                raise StoreError(f"URL {fp.hex()} of queue {url.queue!r} queued in {key!r}")
            entry = url.entry
            put(qkey + entry_key(*entry), fp, db=pending)
            place = url.ref
            if place is None:  # new: its entry's sequence is the crawl's next, its place too
                new = qkey + u64(entry.seq)
                if put(prefix + fp, new[keys.AFTER_CRAWL], db=index, overwrite=False):
                    place = url.ref = new
            if place is None or place[keys.QUEUE] != qkey:  # known (a caller's bug), moved
                self._place(ctx, crawl, queue, [url])
                place = url.ref
            put(place, fp + encode_url(url), db=records)

    def dequeue(self, crawl: CrawlRecord, queue: QueueRecord, n: int) -> list[bytes]:
        cursor = self.ctx().cursor("pending")
        qkey = queue.ref[1]
        out: list[bytes] = []
        if n <= 0 or not cursor.set_range(qkey):
            return out
        while len(out) < n and cursor.key()[keys.QUEUE] == qkey:
            out.append(bytes(cursor.value()))
            if not cursor.delete():  # moves to the next entry
                break
        return out

    def unqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry) -> None:
        self.ctx().txn.delete(queue.ref[1] + ORDER.pack(*order), db=self.dbs["pending"])

    def lease(self, crawl: CrawlRecord, queue: QueueRecord, lease: LeaseRecord) -> None:
        ctx = self.ctx()
        seq = ctx.next_seq(crawl.ref)
        qid = queue.ref[0]
        nonce = os.urandom(4)  # a token from another crawl's lease never matches this one
        lease.token = keys.u32(qid) + keys.u64(seq) + nonce
        value = _LEASE.pack(lease.fp, lease.expires, *lease.owner, nonce)
        ctx.txn.put(crawl.ref + lease.token[keys.TOKEN_KEY], value, db=self.dbs["leases"])
        ctx.txn.put(self._expiry_key(crawl, lease.token, lease.expires), b"",
                    db=self.dbs["expiries"])  # fmt: skip

    @staticmethod
    def _expiry_key(crawl: CrawlRecord, token: bytes, expires: float) -> bytes:
        prefix: bytes = crawl.ref
        return (prefix + token[keys.TOKEN_QUEUE]
                + _MS_SEQ.pack(ms_up(expires), keys.read_u64(token, keys.TOKEN_SEQ)))  # fmt: skip

    def get_lease(self, crawl: CrawlRecord, token: bytes) -> LeaseRecord | None:
        if not isinstance(token, bytes) or len(token) != 16:
            return None
        raw = self.get("leases", crawl.ref + token[keys.TOKEN_KEY])
        if raw is None:
            return None
        lease = self._lease(crawl, token[keys.TOKEN_KEY], raw)
        return lease if lease.token == token else None

    def _lease(self, crawl: CrawlRecord, key: bytes, raw: bytes) -> LeaseRecord:
        """The lease stored under ``key`` (queue id and sequence)."""
        try:
            fp, expires, pid, start, nonce = _LEASE.unpack(raw)
        except struct.error:
            raise CorruptRecord(f"leases record {(crawl.ref + key).hex()} is malformed") from None
        queue = self._queue_at(crawl, keys.read_u32(key))
        return LeaseRecord(key + nonce, Fingerprint(fp), queue.key, expires, (pid, start))

    def extend_lease(self, crawl: CrawlRecord, lease: LeaseRecord, expires: float) -> None:
        ctx = self.ctx()
        ctx.txn.delete(self._expiry_key(crawl, lease.token, lease.expires), db=self.dbs["expiries"])
        lease.expires = expires
        value = _LEASE.pack(lease.fp, expires, *lease.owner, lease.token[keys.TOKEN_NONCE])
        ctx.txn.put(crawl.ref + lease.token[keys.TOKEN_KEY], value, db=self.dbs["leases"])
        ctx.txn.put(self._expiry_key(crawl, lease.token, expires), b"", db=self.dbs["expiries"])

    def end_lease(self, crawl: CrawlRecord, lease: LeaseRecord) -> None:
        ctx = self.ctx()
        ctx.txn.delete(crawl.ref + lease.token[keys.TOKEN_KEY], db=self.dbs["leases"])
        ctx.txn.delete(self._expiry_key(crawl, lease.token, lease.expires), db=self.dbs["expiries"])

    def expired(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[LeaseRecord]:
        cursor = self.cursor("expiries")
        qkey = queue.ref[1]
        now_ms = ms_up(now)  # keys are rounded up: the last millisecond is checked exactly
        found = []
        if cursor.set_range(qkey):
            while (cursor.key()[keys.QUEUE] == qkey
                   and keys.read_u64(cursor.key(), keys.TIME_MS) <= now_ms):  # fmt: skip
                found.append(qkey[keys.AFTER_CRAWL] + bytes(cursor.key()[keys.TIME_SEQ]))
                if not cursor.next():
                    break
        out = []
        for key in found:
            raw = self.get("leases", crawl.ref + key)
            if raw is not None:
                lease = self._lease(crawl, key, raw)
                if lease.expires <= now:
                    out.append(lease)
        return out

    def next_expiry(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        return self._earliest("expiries", queue)

    def _earliest(self, table: str, queue: QueueRecord) -> float | None:
        """The earliest time in a queue's range of ``table`` (keyed queue, ms, sequence)."""
        cursor = self.cursor(table)
        qkey = queue.ref[1]
        if cursor.set_range(qkey) and cursor.key()[keys.QUEUE] == qkey:
            return keys.read_u64(cursor.key(), keys.TIME_MS) / 1000
        return None

    def leases(self, crawl: CrawlRecord) -> Iterator[LeaseRecord]:
        for key, raw in list(scan(self.txn(), self.dbs["leases"], crawl.ref)):
            yield self._lease(crawl, key[keys.AFTER_CRAWL], raw)

    def _when_key(self, queue: QueueRecord, when: Slot) -> bytes:
        at, seq = when
        qkey: bytes = queue.ref[1]
        return qkey + _MS_SEQ.pack(ms_up(at), seq)

    def schedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot,
                 fp: bytes) -> None:  # fmt: skip
        value = _SCHEDULED.pack(fp, when.at)
        self.ctx().txn.put(self._when_key(queue, when), value, db=self.dbs["schedule"])

    def unschedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot) -> None:
        self.ctx().txn.delete(self._when_key(queue, when), db=self.dbs["schedule"])

    def due(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[bytes]:
        cursor = self.ctx().cursor("schedule")
        qkey = queue.ref[1]
        now_ms = ms_up(now)  # keys are rounded up: the last millisecond is checked exactly
        out: list[bytes] = []
        if cursor.set_range(qkey):
            while (cursor.key()[keys.QUEUE] == qkey
                   and keys.read_u64(cursor.key(), keys.TIME_MS) <= now_ms):  # fmt: skip
                try:
                    fp, at = _SCHEDULED.unpack(cursor.value())
                except struct.error:
                    raise CorruptRecord(
                        f"schedule record {bytes(cursor.key()).hex()} is malformed"
                    ) from None
                if at > now:
                    if not cursor.next():  # due later in this millisecond
                        break
                    continue
                out.append(fp)
                if not cursor.delete():
                    break
        return out

    def next_due(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        return self._earliest("schedule", queue)

    # -- bounded indexes (``indexes.py``) -------------------------------------------------------

    def note_failure(self, crawl: CrawlRecord, queue: QueueRecord, failure: Failure,
                     keep: int) -> None:  # fmt: skip
        indexes.note_failure(self, crawl, failure, keep)

    def failures(self, crawl: CrawlRecord, limit: int) -> list[Failure]:
        return indexes.failures(self, crawl, limit)

    def count_revisit(self, crawl: CrawlRecord, queue: QueueRecord, fp: bytes, at: float,
                      n: int) -> None:  # fmt: skip
        indexes.count_revisit(self, crawl, at, n)

    def revisits_due(self, crawl: CrawlRecord, until: float) -> int:
        return indexes.revisits_due(self, crawl, until)

    # -- URLs -----------------------------------------------------------------------------------

    def _url(self, key: bytes, raw: bytes) -> UrlRecord:
        """The URL record stored at ``key`` (``raw``: its fingerprint, then its record)."""
        url = decode_url(raw[:16], raw[16:], key)
        url.ref = key  # where it is stored
        return url

    def _place(self, ctx: WriteContext, crawl: CrawlRecord, queue: QueueRecord,
               urls: list[UrlRecord]) -> None:  # fmt: skip
        """Give each of ``urls`` (of ``queue``, stored already) its place in the queue's range
        of ``urls``: where its record is when the crawl has one there, else the end of the
        range (a record of another queue is deleted: the URL moved)."""
        if queue.ref is None:
            raise StoreError(f"URLs saved before their queue {queue.key!r}")
        txn, prefix, qkey = ctx.txn, crawl.ref, queue.ref[1]
        index, records = self.dbs["fingerprints"], self.dbs["urls"]
        seq = ctx.next_seq(prefix, len(urls))
        for url in urls:
            if url.queue != queue.key:
                raise StoreError(f"URL {url.fp.hex()} of queue {url.queue!r} saved in "
                                 f"{queue.key!r}")  # fmt: skip
            found = txn.get(prefix + url.fp, db=index)
            if found is not None:
                old = prefix + bytes(found)
                if old[keys.QUEUE] == qkey:
                    url.ref = old
                    continue
                txn.delete(old, db=records)
            url.ref = qkey + keys.u64(seq)
            txn.put(prefix + url.fp, url.ref[keys.AFTER_CRAWL], db=index)
            seq += 1

    def prefetch(self, crawl: CrawlRecord, fps: Sequence[bytes], queues: Sequence[str],
                 tokens: Sequence[bytes] = ()) -> None:  # fmt: skip
        pass  # reads are memory reads

    def find_urls(self, crawl: CrawlRecord, fps: Sequence[bytes],
                  queues: Sequence[str]) -> list[UrlRecord | None]:  # fmt: skip
        url = self.url
        return [url(crawl, fp) for fp in fps]

    def url(self, crawl: CrawlRecord, fp: bytes) -> UrlRecord | None:
        prefix = crawl.ref
        found = self.txn().get(prefix + fp, db=self.dbs["fingerprints"])
        if found is None:
            return None
        return self._record_at(prefix + bytes(found))

    def save_url(self, crawl: CrawlRecord, queue: QueueRecord, url: UrlRecord) -> None:
        ctx = self.ctx()
        key = url.ref
        if key is None or queue.ref is None or key[keys.QUEUE] != queue.ref[1]:
            self._place(ctx, crawl, queue, [url])
        ctx.txn.put(url.ref, url.fp + encode_url(url), db=self.dbs["urls"])

    def delete_url(self, crawl: CrawlRecord, url: UrlRecord) -> None:
        txn, prefix = self.ctx().txn, crawl.ref
        found = txn.get(prefix + url.fp, db=self.dbs["fingerprints"])
        if found is not None:
            txn.delete(prefix + bytes(found), db=self.dbs["urls"])
            txn.delete(prefix + url.fp, db=self.dbs["fingerprints"])

    def urls(self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None,
             limit: int) -> list[UrlRecord]:  # fmt: skip
        if queue is not None:
            placed = self._sorted_places(queue, after, limit)
            if placed is not None:
                return [self._record_at(key) for _, key in placed]
        return list(itertools.islice(self._walk(crawl, queue, after), limit))

    def iter_urls(self, crawl: CrawlRecord, queue: QueueRecord | None) -> Iterator[UrlRecord]:
        if queue is not None:
            placed = self._sorted_places(queue, None, None)
            if placed is not None:
                return (self._record_at(key) for _, key in placed)
        return self._walk(crawl, queue, None)

    def _sorted_places(self, queue: QueueRecord, after: bytes | None,
                       limit: int | None) -> list[tuple[bytes, bytes]] | None:  # fmt: skip
        """The fingerprints and keys of a queue's URL records after ``after``, in fingerprint
        order (the first ``limit``), read off its range of ``urls``; None for a queue of more
        than ``_SORTED_WALK`` (walked through ``fingerprints`` instead: a page of it reads about
        ``limit`` index entries over the queue's share of the crawl)."""
        held = queue.queued + queue.in_flight + queue.scheduled
        held += sum(queue.counts.get(gauge, 0) for gauge in FINISHED.values())
        if held > _SORTED_WALK:
            return None
        qkey = queue.ref[1]
        cursor = self.txn().cursor(db=self.dbs["urls"])
        places: list[tuple[bytes, bytes]] = []
        read = 0
        if cursor.set_range(qkey):
            for key, raw in cursor:
                if key[keys.QUEUE] != qkey:
                    break
                read += 1
                if read > _SORTED_WALK:  # more than its gauges say
                    return None
                fp = bytes(raw[:16])
                if after is None or fp > after:
                    places.append((fp, bytes(key)))
        if limit is None:
            return sorted(places)
        return heapq.nsmallest(limit, places)

    def _record_at(self, key: bytes) -> UrlRecord:
        raw = self.txn().get(key, db=self.dbs["urls"])
        if raw is None:
            raise CorruptRecord(f"urls record {key.hex()} is missing")
        return self._url(key, bytes(raw))

    def _walk(
        self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None
    ) -> Iterator[UrlRecord]:
        """The crawl's URLs (or one queue's) in fingerprint order, through ``fingerprints``."""
        txn = self.txn()
        prefix = crawl.ref
        qid = None if queue is None else queue.ref[1][keys.AFTER_CRAWL]
        cursor = txn.cursor(db=self.dbs["fingerprints"])
        start = prefix + after if after is not None else prefix
        if not cursor.set_range(start):
            return
        for key, place in cursor:
            if key[keys.CRAWL] != prefix:
                return
            if after is not None and key[keys.AFTER_CRAWL] == after:
                continue
            if qid is None or place[: len(qid)] == qid:
                yield self._record_at(prefix + bytes(place))
