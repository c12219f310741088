"""A store's write transaction: ``WriteContext`` (decoded records cached and written back once,
at commit) and ``Transaction``, what ``store.transaction()`` opens outside any other."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import lmdb

from ... import journal
from ...errors import StoreError, StoreFull
from .codec import pack, unpack

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["COUNTERS", "JOINED", "MAP_FULL", "Transaction", "WriteContext"]

#: The table that holds each crawl's counters, under the crawl's 4-byte key.
COUNTERS = "queues"


class WriteContext:
    """One write transaction, with decoded records cached and written back once at commit."""

    def __init__(
        self,
        engine: Engine,
        txn: lmdb.Transaction,
        records: dict[tuple[str, bytes], Any],
        txn_id: int = -1,
    ) -> None:
        self.engine = engine
        self.txn = txn
        #: The flow (asyncio task or thread) that began it: the only one that joins it.
        self.owner = journal.owner()
        self.txn_id = txn_id
        #: Whether a record was written: then the commit takes ``txn_id`` (an empty commit
        #: takes no id, and the records may only be carried over after one that does).
        self.wrote = False
        #: Why an operation inside this transaction failed in LMDB, which then refuses every
        #: later one: the transaction can only roll back (``MAP_FULL``: it outgrew the map).
        self.failed: str | None = None
        self.dbs = engine.dbs
        self._records = records
        #: Values decoded from records, for this transaction only: (kind, key) -> (the record
        #: they were decoded from, the value); stale once the record is replaced.
        self.memo: dict[Any, tuple[Any, Any]] = {}
        self._dirty: set[tuple[str, bytes]] = set()
        self._blobs: dict[tuple[str, bytes], bytearray] = {}
        self._dirty_blobs: set[tuple[str, bytes]] = set()
        self._cursors: dict[str, lmdb.Cursor] = {}

    @property
    def records(self) -> dict[tuple[str, bytes], Any]:
        """Every record this transaction decoded or wrote, as they stand."""
        return self._records

    def record(self, db: str, key: bytes, default: Callable[[], Any] | None = None) -> Any:
        """The decoded record at ``key`` (cached); ``default()`` (not yet dirty) when missing."""
        slot = (db, key)
        try:
            return self._records[slot]
        except KeyError:
            pass
        raw = self.txn.get(key, db=self.dbs[db])
        value = unpack(db, key, raw) if raw is not None else (default() if default else None)
        self._records[slot] = value
        return value

    def put_record(self, db: str, key: bytes, value: Any) -> None:
        """Set a record; it is written at commit."""
        self._records[(db, key)] = value
        self._dirty.add((db, key))

    def touch(self, db: str, key: bytes) -> None:
        """Mark a cached record changed in place."""
        self._dirty.add((db, key))

    def counters(self, crawl: bytes) -> Counter[str]:
        """The crawl's counters, to change in place; written at commit."""
        slot = (COUNTERS, crawl)
        counters = self._records.get(slot)
        if not isinstance(counters, Counter):
            counters = self._records[slot] = Counter(self.record(COUNTERS, crawl, dict))
        self._dirty.add(slot)
        return counters

    def cursor(self, db: str) -> lmdb.Cursor:
        """A cursor on ``db`` for this transaction, reused (always position it first)."""
        cursor = self._cursors.get(db)
        if cursor is None:
            cursor = self._cursors[db] = self.txn.cursor(db=self.dbs[db])
        return cursor

    def blob(self, db: str, key: bytes, size: int) -> bytearray:
        """Raw bytes at ``key`` as a cached bytearray (``size`` zero bytes when missing)."""
        slot = (db, key)
        blob = self._blobs.get(slot)
        if blob is None:
            raw = self.txn.get(key, db=self.dbs[db])
            blob = bytearray(raw) if raw is not None else bytearray(size)
            self._blobs[slot] = blob
        return blob

    def forget_blobs(self, prefix: bytes) -> None:
        """Drop the cached blobs whose keys start with ``prefix`` (their records are gone)."""
        for slot in [slot for slot in self._blobs if slot[1].startswith(prefix)]:
            del self._blobs[slot]
            self._dirty_blobs.discard(slot)

    def touch_blob(self, db: str, key: bytes) -> None:
        self._dirty_blobs.add((db, key))

    def next_seq(self, crawl: bytes, n: int = 1) -> int:
        """A sequence number unique in the crawl, increasing (kept with its counters); ``n``:
        the first of ``n`` consecutive ones."""
        counters = self.counters(crawl)
        seq = counters["seq"] + n
        counters["seq"] = seq
        return seq - n + 1

    def flush(self) -> bool:
        """Write the changed records into the transaction; whether this transaction has
        written any record so far (a delete of a missing key writes nothing)."""
        for slot in self._dirty:
            db, key = slot
            value = self._records[slot]
            if value is None:
                self.wrote |= self.txn.delete(key, db=self.dbs[db])
            else:
                self.txn.put(key, pack(value), db=self.dbs[db])
                self.wrote = True
        self._dirty.clear()
        for db, key in self._dirty_blobs:
            self.txn.put(key, bytes(self._blobs[(db, key)]), db=self.dbs[db])
            self.wrote = True
        self._dirty_blobs.clear()
        return self.wrote


JOINED = contextlib.nullcontext()
MAP_FULL = "the map is full"


class Transaction:
    """``store.transaction()`` outside any other: one write transaction, committed on a clean
    exit, rolled back on an exception (a class, not a generator: pushes open one each)."""

    __slots__ = ("_ctx", "_engine", "_journal")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._ctx: WriteContext | None = None
        self._journal: Any = None

    def __enter__(self) -> WriteContext:
        engine = self._engine
        outer = engine.joined()
        if outer is not None:  # made before, entered inside another transaction: join it
            return outer
        engine.lock.acquire()
        try:
            self._ctx = engine._start()
        except BaseException as exc:
            engine.lock.release()
            if isinstance(exc, lmdb.Error):
                raise engine.translate(exc) from None
            raise
        self._journal = journal.begin(engine)  # in-memory state rolls back with it
        return self._ctx

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        engine, ctx = self._engine, self._ctx
        if ctx is None:
            return  # joined an outer transaction, which commits or rolls back
        self._ctx = None
        failed = ctx.failed
        outgrew = failed == MAP_FULL or (kind is not None and issubclass(kind, lmdb.MapFullError))
        committed = False
        try:
            if kind is None and failed is None:
                try:
                    engine.commit(ctx)  # rolls back by itself when the commit fails
                    committed = True
                except lmdb.MapFullError:
                    outgrew = True
            else:
                engine.abort(ctx)
        except lmdb.Error as error:
            raise engine.translate(error) from None
        finally:
            try:
                journal.end(self._journal, commit=committed)
            finally:
                engine.lock.release()
        if outgrew:
            engine.grow()
        if kind is None and not committed:  # the block ended cleanly, its transaction did not
            if outgrew:
                raise StoreFull(
                    f"{engine.path}: the transaction outgrew the map, which is now larger; "
                    "nothing of it was committed: retry it"
                )
            raise StoreError(
                f"{engine.path}: an operation inside the transaction failed ({failed}), so "
                "nothing of it was committed"
            )
        if isinstance(exc, lmdb.Error):
            raise engine.translate(exc) from None

    # A transaction enlisted in a memory transaction's journal ends with it.

    def commit(self) -> None:
        self.__exit__(None, None, None)

    def rollback(self) -> None:
        self.__exit__(BaseException, None, None)
