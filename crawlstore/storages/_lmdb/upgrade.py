"""Format 2 to format 3: a copy of the file whose URL records move to their queue's range.

Format 2 kept a URL record under its crawl and fingerprint (``urls``), and a queue's list of
URLs beside it (``queue_urls``: crawl, queue, fingerprint). Format 3 keeps the record under its
crawl, queue and a sequence (``urls``) and finds it by fingerprint through ``fingerprints``.
Every other table is as it was. A queue's records get sequences in the order its URLs were
created (then by fingerprint) from the crawl's counter, which moves past them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import msgpack

from . import keys
from .engine import DATABASES

__all__ = ["upgrade_format_2"]

#: Records written a transaction (the new file is not in place before the last commit).
_CHUNK = 50_000


def upgrade_format_2(source: str, target: str) -> None:
    """Write ``source`` (format 2) at ``target`` in format 3."""
    old = lmdb.open(source, subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        old.copy(target, compact=True)
        new = lmdb.open(target, subdir=False, max_dbs=32, lock=False,
                        map_size=max(Path(source).stat().st_size * 3, 2**24))  # fmt: skip
        try:
            with old.begin() as txn:
                _move_urls(txn, old, new)
        finally:
            new.close()
    finally:
        old.close()


def _move_urls(txn: lmdb.Transaction, old: lmdb.Environment, new: lmdb.Environment) -> None:
    with new.begin(write=True) as out:
        out.drop(new.open_db(b"urls", txn=out), delete=True)
        out.drop(new.open_db(b"queue_urls", txn=out), delete=True)
    with new.begin(write=True) as out:
        dbs = {name: new.open_db(name.encode(), txn=out, **DATABASES[name])
               for name in ("urls", "fingerprints", "queues", "meta")}  # fmt: skip
    puts = _puts(txn, {name: old.open_db(name.encode(), txn=txn, create=False)
                       for name in ("urls", "qnames", "queues")})  # fmt: skip
    while True:
        with new.begin(write=True) as out:
            for n, (db, key, value) in enumerate(puts, 1):
                out.put(key, value, db=dbs[db])
                if n == _CHUNK:
                    break
            else:
                meta = msgpack.unpackb(out.get(b"meta", db=dbs["meta"]), raw=False)
                meta["format"] = 3
                out.put(b"meta", msgpack.packb(meta, use_bin_type=True), db=dbs["meta"])
                return


def _puts(txn: lmdb.Transaction, dbs: dict[str, Any]) -> Iterator[tuple[str, bytes, bytes]]:
    """What the new file gets: each URL's record at its place and its place by fingerprint,
    then each crawl's counters past the sequences taken."""
    crawls: dict[bytes, list[tuple[bytes, float, bytes]]] = {}
    for key, raw in txn.cursor(db=dbs["urls"]):
        crawl, fp = bytes(key[keys.CRAWL]), bytes(key[keys.AFTER_CRAWL])
        _, queue, _, created, *_ = msgpack.unpackb(raw, raw=False)
        qid = txn.get(keys.text_key(crawl, queue), db=dbs["qnames"])
        if qid is None:
            raise ValueError(f"urls record {bytes(key).hex()} names queue {queue!r}, "
                             "which the crawl does not have")  # fmt: skip
        crawls.setdefault(crawl, []).append((crawl + bytes(qid), float(created), fp))
    for crawl, urls in crawls.items():
        stored = txn.get(crawl, db=dbs["queues"])
        counters = msgpack.unpackb(stored, raw=False) if stored is not None else {}
        seq = int(counters.get("seq", 0))
        for qkey, _, fp in sorted(urls):
            seq += 1
            key = qkey + keys.u64(seq)
            record = txn.get(crawl + fp, db=dbs["urls"])
            if record is not None:  # read a moment ago, in this transaction
                yield "urls", key, fp + bytes(record)
                yield "fingerprints", crawl + fp, key[keys.AFTER_CRAWL]
        counters["seq"] = seq
        yield "queues", crawl, msgpack.packb(counters, use_bin_type=True)
