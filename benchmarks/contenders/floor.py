"""The floor: raw py-lmdb doing the writes the store does, nothing else, with the flags of the
store's environment. The one copy of it: ``LmdbFloor`` (a frontier with dedup and leases) and
``FloorSeen`` (a seen set alone), which ``benchmarks.store`` drives directly, and the suite's
contenders ``LmdbFloorSafe`` and ``LmdbFloorNosync`` over ``LmdbFloor``.

A push: a ``get`` on the seen table, a put into the queue (16-byte big-endian sequence key,
msgpack of ``seed.to_record()``), a put into the seen table (crawl id + fingerprint). A pop:
cursor first + delete on the queue (and decoding the record), a put into the lease table; its
report: the delete of that lease. And once a transaction, as the store does, a put of each of
two small msgpack records (the crawl's counters, the queue's state) into a fourth table; the
floor neither reads nor updates them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import lmdb
import msgpack

from crawlstore import Seed
from crawlstore.storages._lmdb.engine import DATABASES

from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered

FLOOR_FILE = "floor.lmdb"
FLOOR_MAP = 2**36  # the floor's map: sparse, never grown
CRAWL = (1).to_bytes(4, "big")  # the floor's crawl id, as the store prefixes its seen keys
#: Stand-ins for the records the store rewrites at each commit: a crawl's counters, a queue's.
_COUNTERS = msgpack.packb(dict.fromkeys(["seq", "admitted", "queued", "seen"], 10**6) | {
    "refused:duplicate": 1, "popped": 0, "in_flight": 0, "done": 0})  # fmt: skip
_QUEUE = msgpack.packb({"k": "", "n": 10**6, "f": 0, "last": 1.0e9, "blk": 0.0, "d": None,
                        "cap": None, "rk": bytes(20), "ra": 1.0e9})  # fmt: skip
#: The seen-set floor's one table, laid out as ``store.seen()`` lays out its own.
SEEN_TABLES = {"seen": DATABASES["seen"]}


def open_env(path: str, *, sync: bool, max_dbs: int) -> lmdb.Environment:
    """A floor file at ``path``, with the store's flags (``sync`` its durability)."""
    return lmdb.open(path, subdir=False, map_size=FLOOR_MAP, max_dbs=max_dbs, sync=sync,
                     metasync=False, max_spare_txns=0, lib_version=0)  # fmt: skip


def used_bytes(env: lmdb.Environment) -> int:
    """Bytes of the data file in use, as ``Store.file_size()`` counts them."""
    return int((env.info()["last_pgno"] + 1) * env.stat()["psize"])


class LmdbFloor:
    """The floor frontier in one file: FIFO queue, seen set, leases, the per-commit records."""

    def __init__(self, path: str, *, sync: bool) -> None:
        self.env = open_env(path, sync=sync, max_dbs=5)
        self.queue = self.env.open_db(b"queue")
        self.seen = self.env.open_db(b"seen")
        self.leases = self.env.open_db(b"leases")
        self.records = self.env.open_db(b"records")
        with self.env.begin() as txn:
            cursor = txn.cursor(db=self.queue)
            self.seq = int.from_bytes(cursor.key(), "big") if cursor.last() else 0

    def commit_records(self, txn: lmdb.Transaction) -> None:
        """The two records the store rewrites at every commit, at their sizes (74 and 82 bytes
        of msgpack in a small crawl)."""
        txn.put(CRAWL, _COUNTERS, db=self.records)
        txn.put(CRAWL + b"\x00\x00\x00\x01", _QUEUE, db=self.records)

    def push(self, txn: lmdb.Transaction, seeds: Sequence[Seed]) -> None:
        """Queue each seed whose fingerprint is not in the seen table, and record it there."""
        seq, queue, seen, packb = self.seq, self.queue, self.seen, msgpack.packb
        for seed in seeds:
            key = CRAWL + seed.fingerprint
            if txn.get(key, db=seen) is None:
                seq += 1
                txn.put(seq.to_bytes(16, "big"), packb(seed.to_record(), use_bin_type=True),
                        db=queue)  # fmt: skip
                txn.put(key, b"", db=seen)
        self.seq = seq

    def lease(self, txn: lmdb.Transaction, cursor: lmdb.Cursor) -> tuple[bytes, Any]:
        """Take the first queued seed into the lease table: its key and its decoded record
        (``Seed.to_record()``: ``[method, url, ...]``). ``cursor``: on the queue, in ``txn``."""
        if not cursor.first():
            raise RuntimeError("the floor's queue is empty")
        key, value = cursor.item()
        record = msgpack.unpackb(value)
        cursor.delete()
        txn.put(key, value, db=self.leases)
        return key, record  # type: ignore[return-value]  # bytes: the env has no buffers=True

    def release(self, txn: lmdb.Transaction, key: bytes) -> None:
        """A leased seed's report: its lease dropped."""
        txn.delete(key, db=self.leases)

    def push_seeds(self, seeds: Sequence[Seed], batch: int) -> None:
        """Push every seed through dedup, ``batch`` to a transaction."""
        begin = self.env.begin
        for i in range(0, len(seeds), batch):
            with begin(write=True) as txn:
                self.push(txn, seeds[i : i + batch])
                self.commit_records(txn)

    def pop_report(self, k: int, batch: int) -> None:
        """Pop a seed and report it done, ``k`` times: with ``batch`` 1 the pop and the report
        a transaction each, else ``batch`` pairs to a transaction."""
        begin, queue, lease, release = self.env.begin, self.queue, self.lease, self.release
        if batch == 1:
            for _ in range(k):
                with begin(write=True) as txn:
                    key, _ = lease(txn, txn.cursor(db=queue))
                    self.commit_records(txn)
                with begin(write=True) as txn:
                    release(txn, key)
                    self.commit_records(txn)
            return
        for i in range(0, k, batch):
            with begin(write=True) as txn:
                cursor = txn.cursor(db=queue)
                for _ in range(min(batch, k - i)):
                    release(txn, lease(txn, cursor)[0])
                self.commit_records(txn)

    def held(self) -> int:
        """Seeds queued or in flight."""
        with self.env.begin() as txn:
            return int(txn.stat(self.queue)["entries"] + txn.stat(self.leases)["entries"])

    def close(self) -> None:
        self.env.close()


class FloorSeen:
    """The seen-set floor: the layout of ``store.seen()`` (sorted 16-byte duplicates under the
    crawl's key) in a new raw py-lmdb file, with the store's flags and an fsync a commit."""

    def __init__(self, path: str) -> None:
        self.env = open_env(path, sync=True, max_dbs=4)
        self.db = self.env.open_db(b"seen", **SEEN_TABLES["seen"])
        self.before = used_bytes(self.env)

    def insert(self, fps: Sequence[bytes], batch: int) -> None:
        """Each fingerprint, ``batch`` to a transaction."""
        begin, db = self.env.begin, self.db
        for i in range(0, len(fps), batch):
            with begin(write=True) as txn:
                for fp in fps[i : i + batch]:
                    txn.put(CRAWL, fp, db=db, dupdata=False)

    def grown(self) -> int:
        """Bytes the file grew by since the set was created."""
        return used_bytes(self.env) - self.before

    def close(self) -> None:
        self.env.close()


class LmdbFloorSafe(Contender):
    """A page of the floor: pop (its own commit: the lease), then one transaction that drops
    the lease and pushes the links, each built as ``Seed.get(url)`` as the store contenders
    build theirs."""

    key = "lmdb-floor-safe"
    sync = True
    label = "raw py-lmdb floor, sync=True (the store's safe flags)"
    syncs = True
    note = "the same puts and deletes as a store page, no bookkeeping"

    def open(self, path: str) -> None:
        self.floor = LmdbFloor(os.path.join(path, FLOOR_FILE), sync=self.sync)

    def _pop(self) -> tuple[bytes, str]:
        fl = self.floor
        with fl.env.begin(write=True) as txn:
            key, record = fl.lease(txn, txn.cursor(db=fl.queue))
            fl.commit_records(txn)
        return key, str(record[1])

    def seed(self, urls: Sequence[str]) -> None:
        self.floor.push_seeds([Seed.get(u) for u in urls], max(1, len(urls)))

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        fl, get = self.floor, Seed.get
        begin, release, pop, push = fl.env.begin, fl.release, self._pop, fl.push
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            key, url = pop()
            popped(url)
            links = [get(u) for u in links_of(i)]
            with begin(write=True) as txn:
                release(txn, key)
                push(txn, links)
                fl.commit_records(txn)
            acked(i, url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        push_seeds, get = self.floor.push_seeds, Seed.get
        for i in range(0, len(urls), batch):
            push_seeds([get(u) for u in urls[i : i + batch]], batch)

    def pop_report(self, k: int, batch: int) -> None:
        self.floor.pop_report(k, batch)

    def close(self) -> None:
        self.floor.close()

    def recover(self, path: str) -> Recovered:
        fl = LmdbFloor(os.path.join(path, FLOOR_FILE), sync=self.sync)
        queued: set[str] = set()
        with fl.env.begin() as txn:
            for db in (fl.queue, fl.leases):  # a user's startup code requeues the leases
                for _, value in txn.cursor(db=db):
                    queued.add(str(msgpack.unpackb(value)[1]))
            seen = {bytes(k) for k in txn.cursor(db=fl.seen).iternext(values=False)}

        def known(url: str) -> bool:
            return url in queued or CRAWL + Seed.get(url).fingerprint in seen

        return Recovered(queued, known)


class LmdbFloorNosync(LmdbFloorSafe):
    key = "lmdb-floor-nosync"
    sync = False
    label = "raw py-lmdb floor, sync=False (the store's no-sync flags)"
    syncs = False


#: Pages to a transaction in the batched floor, as ``pop_many(64)`` in the store's plain loop.
FLOOR_BATCH = 64


class LmdbFloorBatched(LmdbFloorSafe):
    """The floor of the store's plain loop: lease 64 seeds (a commit), then one transaction
    that drops their leases and pushes their links, ``sync=True``."""

    key = "lmdb-floor-64"
    label = f"raw py-lmdb floor, sync=True, {FLOOR_BATCH} pages a transaction"
    syncs = False  # two commits per 64 pages
    loop_only = True
    note = f"lease {FLOOR_BATCH} (commit), then their reports + links in one transaction"

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        fl, get = self.floor, Seed.get
        begin, release, lease, push = fl.env.begin, fl.release, fl.lease, fl.push
        popped, acked = probe.popped, probe.acked
        i = 0
        while i < pages:
            with begin(write=True) as txn:
                cursor = txn.cursor(db=fl.queue)
                leased = [lease(txn, cursor) for _ in range(min(FLOOR_BATCH, pages - i))]
                fl.commit_records(txn)
            urls = [str(record[1]) for _, record in leased]
            for url in urls:
                popped(url)
            links = [get(u) for j in range(len(leased)) for u in links_of(i + j)]
            with begin(write=True) as txn:
                for key, _ in leased:
                    release(txn, key)
                push(txn, links)
                fl.commit_records(txn)
            for j, url in enumerate(urls):
                acked(i + j, url)
            i += len(leased)
