"""The floor: raw py-lmdb doing the writes a page of the store does, nothing else (the
environment flags and table layout of ``benchmarks.store.LmdbFloor``). Pop: cursor first +
delete on the queue, a put into the lease table (a commit). Then one transaction: the delete
of that lease, and for each link a ``get`` on the seen table, a put into the queue and one
into the seen table, plus the two small records the store rewrites at every commit. It
builds ``Seed.get(url)`` for each link as the store contenders do."""

from __future__ import annotations

import os
from collections.abc import Sequence

import msgpack

from crawlstore import Seed

from ..store import CRAWL, LmdbFloor
from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered

FLOOR_FILE = "floor.lmdb"


class LmdbFloorSafe(Contender):
    key = "lmdb-floor-safe"
    sync = True
    label = "raw py-lmdb floor, sync=True (the store's safe flags)"
    syncs = True
    note = "the same puts and deletes as a store page, no bookkeeping"

    def open(self, path: str) -> None:
        self.floor = LmdbFloor(os.path.join(path, FLOOR_FILE), sync=self.sync)

    def _push(self, txn: object, seeds: Sequence[Seed]) -> None:
        fl = self.floor
        seq, queue, seen, packb = fl.seq, fl.queue, fl.seen, msgpack.packb
        for seed in seeds:
            key = CRAWL + seed.fingerprint
            if txn.get(key, db=seen) is None:  # type: ignore[attr-defined]
                seq += 1
                record = packb(seed.to_record(), use_bin_type=True)
                txn.put(seq.to_bytes(16, "big"), record, db=queue)  # type: ignore[attr-defined]
                txn.put(key, b"", db=seen)  # type: ignore[attr-defined]
        fl.seq = seq

    def _pop(self) -> tuple[bytes, str]:
        fl = self.floor
        with fl.env.begin(write=True) as txn:
            cursor = txn.cursor(db=fl.queue)
            if not cursor.first():
                raise RuntimeError("the floor's queue is empty")
            key, value = cursor.item()
            record = msgpack.unpackb(value)
            cursor.delete()
            txn.put(key, value, db=fl.leases)
            fl._commit_records(txn)
        return key, str(record[1])  # Seed.to_record(): [method, url, ...]

    def seed(self, urls: Sequence[str]) -> None:
        with self.floor.env.begin(write=True) as txn:
            self._push(txn, [Seed.get(u) for u in urls])
            self.floor._commit_records(txn)

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        fl, get = self.floor, Seed.get
        begin, leases, pop, push = fl.env.begin, fl.leases, self._pop, self._push
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            key, url = pop()
            popped(url)
            links = [get(u) for u in links_of(i)]
            with begin(write=True) as txn:
                txn.delete(key, db=leases)
                push(txn, links)
                fl._commit_records(txn)
            acked(i, url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        fl, get = self.floor, Seed.get
        for i in range(0, len(urls), batch):
            seeds = [get(u) for u in urls[i : i + batch]]
            with fl.env.begin(write=True) as txn:
                self._push(txn, seeds)
                fl._commit_records(txn)

    def pop_report(self, k: int, batch: int) -> None:
        if batch == 1:
            self.floor.pop_each(k)
        else:
            self.floor.pop_grouped(k)

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
