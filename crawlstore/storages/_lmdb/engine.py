"""The LMDB environment behind a store: the file's tables and format, checking and opening the
file, one shared environment per file per process (``registry``), running write units
(``context``) with map growth, durability modes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar

import lmdb

from ... import journal
from ...errors import (
    CorruptStore,
    IncompatibleStore,
    NotAStore,
    OlderFormat,
    ReadOnlyStore,
    StoreError,
    StoreFull,
)
from ...frontier.spi import Durability
from ...url import FINGERPRINT_VERSION
from .access import lock_holder, why_unwritable
from .backup import sync_directory
from .codec import pack, unpack
from .context import JOINED, MAP_FULL, Transaction, WriteContext
from .filecheck import check_file
from .registry import registry, registry_lock

__all__ = ["FORMAT_VERSION", "Durability", "Engine", "WriteContext"]

#: The layout of every record and key in the file; bumped on any incompatible change.
FORMAT_VERSION = 4
APP = "crawlstore"

#: Named databases and their flags. Keys start with a 4-byte crawl id wherever crawls differ.
DATABASES: dict[str, dict[str, Any]] = {
    "meta": {},  # name -> msgpack
    "crawls": {},  # crawl name -> msgpack crawl record (id, policy, creation time)
    # crawl -> msgpack totals (and the crawl's sequences); crawl, queue id -> queue record:
    # one table, so a commit that changes a queue and the totals dirties one leaf page
    "queues": {},
    "qnames": {},  # crawl, queue key -> queue id
    "ready": {},  # crawl, event ms, seq -> queue id: the crawl's index of queues
    "loads": {},  # crawl, in-flight count, event ms, seq -> queue id: ready by load
    "wakes": {},  # crawl, ms, queue id -> nothing: loaded queues with a schedule or lease due
    "pending": {},  # crawl, queue id, rank, class, seq -> fingerprint
    "leases": {},  # crawl, token (queue id, seq) -> fingerprint, expiry, holder
    "expiries": {},  # crawl, queue id, expiry ms, seq -> nothing
    "schedule": {},  # crawl, queue id, due ms, seq -> fingerprint, exact due time
    "urls": {},  # crawl, queue id, seq -> fingerprint, msgpack URL record
    "fingerprints": {},  # crawl, fingerprint -> queue id, seq: where its URL record is
    "seen": {"dupsort": True, "dupfixed": True},  # crawl -> fp (sorted duplicates)
    "bloom": {},  # crawl, kind, chunk -> bits
    "validators": {},  # crawl, fp -> msgpack [etag, last_modified, stored_at]
    "state": {},  # crawl, namespace NUL key -> msgpack
    "failures": {},  # crawl -> count; crawl, ms, URL digest -> msgpack failure: a ring
    "revisits": {},  # crawl, slot -> count of revisits due in it
}

#: Free map space kept ahead of every write transaction (see ``Engine._grow_early``).
_HEADROOM = 64 * 2**20

#: Free space under which a failed write is taken for a full disk.
_DISK_FULL_BYTES = 16 * 2**20

_T = TypeVar("_T")

#: LMDB errors that only a damaged file causes (LMDB has no checksums: it finds damage when a
#: page does not hold what it should; after that, the transaction itself is marked bad).
#: What LMDB says of an I/O error and of a full disk (the C library's own words).
_IO_ERROR = os.strerror(errno.EIO)
_NO_SPACE = os.strerror(errno.ENOSPC)
_DAMAGE = (
    lmdb.CorruptedError,
    lmdb.PageNotFoundError,
    lmdb.BadChecksumError,
    lmdb.PageFullError,
    lmdb.CursorFullError,
    lmdb.BadTxnError,
    lmdb.IncompatibleError,
    lmdb.ProblemError,
)


def _unwritable(exc: lmdb.Error) -> bool:
    """Whether opening failed because this process may not write the file or its lock file."""
    text = str(exc)
    return isinstance(exc, lmdb.ReadonlyError) or any(
        reason in text for reason in ("Permission denied", "Read-only file system")
    )


def _open_error(path: Path, exc: lmdb.Error) -> StoreError:
    """The typed error for an environment that would not open."""
    if isinstance(exc, lmdb.InvalidError):
        return NotAStore(f"{path} is not a crawlstore store (invalid LMDB file)")
    if isinstance(exc, _DAMAGE):
        return CorruptStore(f"{path} is damaged: {exc}")
    if isinstance(exc, lmdb.VersionMismatchError):
        return IncompatibleStore(f"{path} was written by another LMDB version")
    if "already open" in str(exc):
        return StoreError(
            f"{path} is open in the process this one was forked from, and LMDB cannot open it "
            "again here: open stores after forking, or start workers with multiprocessing's "
            "'spawn' or 'forkserver' method"
        )
    return StoreError(f"{path} cannot be opened: {exc}")


class Engine:
    """One LMDB environment per file per process, shared by every ``Store`` opened on it."""

    def __init__(
        self,
        path: Path,
        *,
        durability: Durability,
        readonly: bool,
        map_size: int,
        max_map_size: int,
        flush_interval: float,
        fingerprint: int = FINGERPRINT_VERSION,
    ) -> None:
        #: The fingerprint version the file must hold (an older one, for its migration).
        self.fingerprint = fingerprint
        self.path = path
        self.durability = durability
        self.readonly = readonly
        self.max_map_size = max_map_size
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self._records: dict[tuple[str, bytes], Any] = {}
        self._records_txnid = -1
        #: The open write transaction, if any: LMDB has one writer, and ``lock`` is held by
        #: its thread for as long as it is open.
        self._writer: WriteContext | None = None
        #: Why this process writes no more to the file: a commit's write or sync failed with an
        #: I/O error. The kernel may have dropped the pages it could not write and marked them
        #: clean, so a later sync that succeeds proves nothing of them (PostgreSQL's "fsyncgate"):
        #: only a new process, reading the file from the disk, may write it again.
        self.failure: str | None = None
        self.refs = 0
        exists = check_file(path)
        if readonly and not exists:
            raise StoreError(f"{path} does not exist (readonly=True opens existing stores only)")
        if not exists:
            self._make_file(map_size)
        #: Opened without LMDB's lock file, which this process cannot write (read-only only):
        #: no writer knows of its readers, so each read checks that none overtook it.
        self.lockless = False
        #: Read snapshots kept open across calls (exports): the map does not grow meanwhile.
        self.readers = 0
        try:
            self.env = self._open_env(map_size, lock=True)
        except lmdb.Error as exc:
            if not _unwritable(exc):
                raise _open_error(path, exc) from None
            reason = why_unwritable(path)
            if not readonly:
                what = "cannot be created" if not exists else "cannot be opened for writing"
                hint = "" if not exists else "; readonly=True opens it to inspect it"
                raise ReadOnlyStore(f"{path} {what}: {reason}{hint}") from None
            holder = lock_holder(path)
            if holder is not None:
                raise ReadOnlyStore(
                    f"{path} cannot be read safely: {reason}, and process {holder} has the "
                    "store open; a reader that cannot write the lock file cannot keep a writer "
                    "from reusing the pages it reads. Read it as a user who can write the lock "
                    "file, or read a backup"
                ) from None
            try:
                self.env = self._open_env(map_size, lock=False)
            except lmdb.Error as again:
                raise _open_error(path, again) from None
            self.lockless = True
        try:
            if not readonly:
                self.env.set_mapsize(0)  # adopt the size another process may have grown to
            self.env.reader_check()
            self._page_size = int(self.env.stat()["psize"])
            self.dbs = self._open_databases()
        except lmdb.Error as exc:
            self.env.close()
            raise self.translate(exc) from None
        except BaseException:
            self.env.close()
            raise
        self._stop = threading.Event()
        #: Held by the flushing thread while it syncs, and by a fork (``registry``): a child
        #: must not inherit an LMDB call under way in another thread.
        self.syncing = threading.Lock()
        self._flusher: threading.Thread | None = None
        if durability is Durability.NOSYNC and not readonly:
            self._flusher = threading.Thread(
                target=self._flush_loop,
                args=(flush_interval,),
                daemon=True,
                name="crawlstore-flush",
            )
            self._flusher.start()

    # -- opening --------------------------------------------------------------------------------

    def _open_env(self, map_size: int, *, lock: bool) -> lmdb.Environment:
        return lmdb.open(
            str(self.path),
            subdir=False,
            map_size=map_size,
            max_dbs=len(DATABASES) + 1,
            readonly=self.readonly,
            lock=lock,
            sync=self.durability is not Durability.NOSYNC,
            metasync=self.durability is Durability.FULL,
            max_spare_txns=0,
            max_readers=1024,
            lib_version=0,
        )

    @classmethod
    def acquire(cls, path: str | os.PathLike[str], **options: Any) -> Engine:
        """The process's engine for ``path``, opened on first use."""
        real = Path(os.path.realpath(path))
        with registry_lock:
            engine = registry.get(str(real))
            if engine is None:
                try:
                    engine = cls(real, **options)
                except OlderFormat:
                    if options["readonly"]:
                        raise
                    from .migrate import migrate

                    migrate(real)  # a new file in its place; the old one kept beside it
                    engine = cls(real, **options)
                registry[str(real)] = engine
            elif not options["readonly"] and (engine.durability, engine.max_map_size) != (
                options["durability"],
                options["max_map_size"],
            ):
                raise StoreError(
                    f"{real} is already open in this process with durability="
                    f"{engine.durability.value!r}, max_map_size={engine.max_map_size}: open it "
                    "with the same options (the process shares one environment)"
                )
            elif not options["readonly"] and engine.readonly:
                raise StoreError(
                    f"{real} is open read-only in this process: close it before opening it "
                    "for writing"
                )
            engine.refs += 1
            return engine if engine.readonly or not options["readonly"] else ReadOnly(engine)

    def release(self) -> None:
        if self.refs == 1 and os.getpid() == self.pid and self.joined() is not None:
            raise StoreError(
                f"{self.path} cannot be closed inside a transaction that writes to it: close "
                "it once the transaction ended"
            )
        with registry_lock:
            self.refs -= 1
            if self.refs > 0:
                return
            if registry.get(str(self.path)) is self:
                del registry[str(self.path)]
        if os.getpid() != self.pid:
            return  # inherited across fork(): its environment was dropped in the child
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        with self.lock:
            if self.durability is Durability.NOSYNC and not self.readonly:
                self.env.sync(True)
            self.env.close()

    def _make_file(self, map_size: int) -> None:
        """Make a new store's file under another name and link it into place once whole and
        synced, so that a crash while it is made leaves no file at ``path``, never a file that
        is not a store (another process that made it first wins: its file is kept). Where the
        file cannot be made, nothing happens: opening ``path`` then says why."""
        path = self.path
        self.path = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.new")
        try:
            try:
                self.env = self._open_env(map_size, lock=True)
            except lmdb.Error as exc:
                if _unwritable(exc):
                    return  # opening ``path`` says why it cannot be made
                raise self.translate(exc) from None
            try:
                self._create()
                self.env.sync(True)
            except lmdb.Error as exc:  # the new file is dropped: nothing was made
                raise self.translate(exc) from None
            finally:
                self.env.close()
            try:
                os.link(self.path, path)  # unlike a rename, never replaces a file that appeared
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                os.replace(self.path, path)
            try:
                sync_directory(path.parent)
            except OSError as exc:
                raise StoreError(f"{path}: its directory could not be synced: {exc}") from None
        finally:
            for made in (self.path, Path(f"{self.path}-lock")):
                with suppress(OSError):  # a read-only file system refuses even a missing one
                    made.unlink()
            self.path = path

    def _open_databases(self) -> dict[str, Any]:
        with self.begin(write=False) as txn:
            main_keys = [bytes(k) for k, _ in txn.cursor()]
        if not main_keys:
            if self.readonly:
                raise NotAStore(f"{self.path} is an empty LMDB file, not a crawlstore store")
            return self._create()
        if b"meta" not in main_keys:
            raise NotAStore(f"{self.path} is an LMDB file of another application")
        meta_db = self.env.open_db(b"meta", create=False)
        with self.begin(write=False) as txn:
            raw = txn.get(b"meta", db=meta_db)
        meta = unpack("meta", b"meta", raw) if raw is not None else None
        if not isinstance(meta, dict) or meta.get("app") != APP:
            raise NotAStore(f"{self.path} is an LMDB file of another application")
        if meta.get("format", 0) > FORMAT_VERSION:
            raise IncompatibleStore(
                f"{self.path} has format version {meta['format']}; this crawlstore reads "
                f"up to {FORMAT_VERSION}: upgrade crawlstore"
            )
        if meta.get("format", 0) < FORMAT_VERSION:
            raise OlderFormat(
                f"{self.path} has format version {meta.get('format', 0)}, older than this "
                f"crawlstore's {FORMAT_VERSION}: open it for writing to migrate it, or run "
                f"'crawlstore migrate {self.path}'"
            )
        found = meta.get("fingerprint")
        if found != self.fingerprint:
            if isinstance(found, int) and found < self.fingerprint:
                raise OlderFormat(
                    f"{self.path} holds fingerprint version {found}, older than this "
                    f"crawlstore's {self.fingerprint}: open it for writing to migrate it, or "
                    f"run 'crawlstore migrate {self.path}'"
                )
            raise IncompatibleStore(
                f"{self.path} holds fingerprint version {found}; this crawlstore computes "
                f"version {self.fingerprint}: upgrade crawlstore"
            )
        self.meta = meta
        missing = [name for name in DATABASES if name.encode() not in main_keys]
        if missing and not self.readonly:
            with self.begin(write=True) as txn:
                for name in missing:
                    self.env.open_db(name.encode(), txn=txn, **DATABASES[name])
        dbs = {}
        for name, flags in DATABASES.items():
            if name.encode() in main_keys or not self.readonly:
                dbs[name] = self.env.open_db(name.encode(), create=False, **flags)
        return dbs

    def set_fingerprint(self, version: int) -> None:
        """Record the fingerprint version the file's records now hold (a migration's end)."""
        self.meta = {**self.meta, "fingerprint": version}
        with self.begin(write=True) as txn:
            txn.put(b"meta", pack(self.meta), db=self.dbs["meta"])

    def _create(self) -> dict[str, Any]:
        self.meta = {
            "app": APP,
            "format": FORMAT_VERSION,
            "fingerprint": FINGERPRINT_VERSION,
            "created": time.time(),
        }
        with self.begin(write=True) as txn:
            dbs = {
                name: self.env.open_db(name.encode(), txn=txn, **flags)
                for name, flags in DATABASES.items()
            }
            txn.put(b"meta", pack(self.meta), db=dbs["meta"])
        return dbs

    # -- transactions ---------------------------------------------------------------------------

    def check_process(self) -> None:
        if os.getpid() != self.pid:
            raise StoreError(
                f"{self.path} was opened before fork(); open the store again in the child"
            )

    def begin(self, write: bool) -> lmdb.Transaction:
        for _ in range(3):
            try:
                return self.env.begin(write=write)
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)  # another process grew the map: adopt its size
        raise StoreError(f"{self.path}: the map keeps being resized by another process")

    @property
    def current(self) -> WriteContext | None:
        """The write transaction the calling flow has open (reads see its writes)."""
        writer = self._writer
        if writer is None or writer.owner[0] != journal.flow():
            return None
        return writer

    def joined(self) -> WriteContext | None:
        """The calling flow's open write transaction, for a write to join; raises
        ``TransactionBusy`` when another task of this thread holds the writer."""
        writer = self._writer
        if writer is not None and journal.check_owner(writer.owner, self.path):
            return writer
        return None

    def _start(self) -> WriteContext:
        """Begin this thread's write transaction (the caller holds ``lock``)."""
        if self.readonly:
            raise ReadOnlyStore(f"{self.path} is open read-only")
        self.check_process()
        if self.failure is not None:
            raise StoreError(self._failed())
        last = self._grow_early()
        txn = self.begin(write=True)
        # Records decoded by this process's last commit are still current when no other
        # process has committed since: then this transaction's id follows that commit's.
        txn_id = txn.id()
        cached = self._records if txn_id == self._records_txnid + 1 == last + 1 else {}
        self._records, self._records_txnid = {}, -1
        ctx = self._writer = WriteContext(self, txn, cached, txn_id)
        return ctx

    def commit(self, ctx: WriteContext) -> None:
        try:
            wrote = ctx.flush()
            ctx.txn.commit()
        except lmdb.Error as exc:
            self.abort(ctx)
            if _IO_ERROR in str(exc) or isinstance(exc, lmdb.PanicError):
                self.failure = str(exc)
            raise
        except BaseException:
            self.abort(ctx)
            raise
        self._writer = None
        # An empty commit takes no id (another process's next commit gets it): keep the
        # records only after a commit that wrote some.
        if wrote:
            self._records, self._records_txnid = ctx.records, ctx.txn_id

    def abort(self, ctx: WriteContext) -> None:
        self._writer = None
        with suppress(lmdb.Error):
            ctx.txn.abort()

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """The public grouping of operations: all or nothing; nested use joins (at no cost)."""
        if self.joined() is not None:
            return JOINED
        return self._outer_transaction()

    def _outer_transaction(self) -> Transaction:
        return Transaction(self)

    def run(self, operation: Callable[[WriteContext], _T]) -> _T:
        """Run one operation in a write transaction (or the caller's); a full map is grown and
        the operation retried, invisibly, up to ``max_map_size``."""
        ctx = self.joined()
        if ctx is None and (txn := journal.current()) is not None and txn.storage is None:
            # A memory transaction is open in this flow: this store's writes join it.
            transaction = Transaction(self)
            ctx = transaction.__enter__()
            txn.enlist(transaction)
        if ctx is not None:
            if ctx.failed is not None:
                raise StoreError(
                    f"{self.path}: an earlier operation of this transaction failed "
                    f"({ctx.failed}); it can only roll back: leave it, and retry it whole"
                )
            try:
                return operation(ctx)
            except lmdb.MapFullError:
                ctx.failed = MAP_FULL
                raise StoreFull(
                    f"{self.path}: the transaction outgrew the map; it rolls back when it ends "
                    "(the map then grows): retry it whole"
                ) from None
            except lmdb.Error as exc:
                ctx.failed = str(exc)
                raise self.translate(exc) from None
        while True:  # write(), without a generator: this is every operation's path
            try:
                with self.lock:
                    ctx = self._start()
                    try:
                        result = operation(ctx)
                    except BaseException:
                        self.abort(ctx)
                        raise
                    self.commit(ctx)
                return result
            except lmdb.MapFullError:
                self.grow()
            except lmdb.Error as exc:
                raise self.translate(exc) from None

    def read(self, operation: Callable[[lmdb.Transaction], _T]) -> _T:
        """Run a read-only operation: in the caller's write transaction, or a short read one."""
        ctx = self.current
        if ctx is not None:
            ctx.flush()  # the records this transaction changed, so the read sees them
            return operation(ctx.txn)
        return self.read_committed(operation)

    def read_committed(self, operation: Callable[[lmdb.Transaction], _T]) -> _T:
        """Run a read-only operation on a snapshot of what is committed, even inside this
        thread's write transaction (a backup copies nothing uncommitted)."""
        with self.lock:
            self.check_process()
            for _ in range(3):
                try:
                    txn = self.begin(write=False)
                    try:
                        result = operation(txn)
                        if not self.lockless or self._unchanged_since(txn.id()):
                            return result
                    finally:
                        txn.abort()
                except lmdb.Error as exc:
                    raise self.translate(exc) from None
            raise StoreError(
                f"{self.path} is being written while this reader, which cannot write the lock "
                "file, reads it: its reads cannot be consistent. Read it as a user who can "
                "write the lock file, or read a backup"
            )

    def _unchanged_since(self, txn_id: int) -> bool:
        """Whether a lock-less read of snapshot ``txn_id`` could not have met a page that a
        writer reused meanwhile (LMDB reuses a page freed by commit N at N + 2 at the
        soonest, when no reader it knows of is older)."""
        return int(self.env.info()["last_txnid"]) < txn_id + 2

    # -- size -----------------------------------------------------------------------------------

    def used_bytes(self) -> int:
        self.check_process()
        return int((self.env.info()["last_pgno"] + 1) * self._page_size)

    def record_bytes(self) -> int:
        """Bytes of the pages that hold the file's records now, with its two meta pages (the
        rest, up to ``used_bytes``, is free pages and the list of them)."""

        def pages(txn: lmdb.Transaction) -> int:
            stats = [txn.stat(), *(txn.stat(db) for db in self.dbs.values())]
            return sum(s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"] for s in stats)

        return (2 + self.read_committed(pages)) * self._page_size

    def _grow_early(self) -> int:
        """Grow the map before a transaction could fill it: keep at least half of it, and at
        least ``_HEADROOM`` bytes, free (the map is address space, not disk). A transaction
        that outgrows the map mid-way can only be retried when it is one operation; this keeps
        that rare. Returns the id of the last committed transaction."""
        info = self.env.info()
        size = info["map_size"]
        used = (info["last_pgno"] + 1) * self._page_size
        headroom = max(size // 2, _HEADROOM)
        if used + headroom > size and size < self.max_map_size and not self.readers:
            self.env.set_mapsize(min(self.max_map_size, max(size * 2, used + 2 * headroom)))
        return int(info["last_txnid"])

    def grow(self) -> None:
        with self.lock:
            size = self.env.info()["map_size"]
            if self.readers:
                raise StoreFull(
                    f"{self.path}: the map is full, and cannot grow while an export of this "
                    "process reads it: finish or close the export, then retry"
                )
            if size >= self.max_map_size:
                raise StoreFull(
                    f"{self.path} reached its maximum size of {self.max_map_size} bytes "
                    "(max_map_size); nothing committed was lost"
                )
            self.env.set_mapsize(min(self.max_map_size, size * 2))

    def translate(self, exc: lmdb.Error) -> StoreError:
        if isinstance(exc, lmdb.MapFullError):
            return StoreFull(f"{self.path}: the transaction does not fit the map; {exc}")
        if isinstance(exc, lmdb.ReadonlyError):
            return ReadOnlyStore(f"{self.path}: {exc}")
        if isinstance(exc, _DAMAGE):
            return CorruptStore(f"{self.path} is damaged: {exc}")
        if isinstance(exc, lmdb.PanicError) and self.failure is None:
            self.failure = str(exc)  # LMDB itself writes no more: a meta page was not written
        if self.failure is not None:
            return StoreError(self._failed())
        if _NO_SPACE in str(exc):
            return StoreFull(f"{self.path}: the disk is full; nothing committed was lost ({exc})")
        if self._disk_full():
            # LMDB reports a short write (ENOSPC) as an I/O error: ask the file system.
            return StoreFull(f"{self.path}: the disk is full; nothing committed was lost ({exc})")
        return StoreError(f"{self.path}: {exc}")

    def _failed(self) -> str:
        return (f"{self.path}: a write to the disk failed ({self.failure}); this process writes "
                "nothing more to the store, whose commits before it are kept: close it, check "
                "the disk, and open it again in a new process")  # fmt: skip

    def _disk_full(self) -> bool:
        try:
            fs = os.statvfs(self.path.parent)
        except OSError:
            return False
        return fs.f_bavail * fs.f_frsize < _DISK_FULL_BYTES

    def _flush_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                with self.syncing:
                    self.env.sync(True)
            except lmdb.Error as exc:  # a flush that failed: no write after it is trusted
                if _IO_ERROR in str(exc) or isinstance(exc, lmdb.PanicError):
                    self.failure = self.failure or f"a periodic flush: {exc}"


class ReadOnly(Engine):
    """A writable engine seen through a store opened with ``readonly=True``: reads are shared,
    writes raise ``ReadOnlyStore``."""

    def __init__(self, engine: Engine) -> None:  # no super().__init__: it shares ``engine``
        self._inner = engine
        self._writer = None  # never in a write context: never joins the writer's

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def readonly(self) -> bool:  # type: ignore[override]
        return True

    def release(self) -> None:
        self._inner.release()
