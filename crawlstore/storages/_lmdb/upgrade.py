"""Format 2 to format 3: a copy of the file whose URL records move to their queue's range.
(Format 3 to 4 only adds tables: ``mark_format`` marks a copy, then the migration writes them.)

Format 2 kept a URL record under its crawl and fingerprint (``urls``), and a queue's list of
URLs beside it (``queue_urls``: crawl, queue, fingerprint). Format 3 keeps the record under its
crawl, queue and a sequence (``urls``) and finds it by fingerprint through ``fingerprints``,
and indexes the queues in ``ready`` by load too (``loads``, ``wakes``, from each queue's record).
Every other table is as it was. A queue's records get sequences in the order its URLs were
created (then by fingerprint) from the crawl's counter, which moves past them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lmdb
import msgpack

from ...frontier.spi import QueueRecord, tend_at
from .._records import ms_up
from . import keys
from .engine import DATABASES

__all__ = ["mark_format", "upgrade_format_2"]

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
    """The records, through a scratch table of the new file that sorts them by queue, creation
    and fingerprint (a crawl of any size in bounded memory), then placed in that order."""
    with new.begin(write=True) as out:
        out.drop(new.open_db(b"urls", txn=out), delete=True)
        out.drop(new.open_db(b"queue_urls", txn=out), delete=True)
        dbs = {name: new.open_db(name.encode(), txn=out, **DATABASES.get(name, {}))
               for name in ("urls", "fingerprints", "queues", "meta", "loads", "wakes",
                            _ORDER)}  # fmt: skip
    olds = {name: old.open_db(name.encode(), txn=txn, create=False)
            for name in ("urls", "qnames")}  # fmt: skip
    _write(new, ((_ORDER, key, b"") for key in _order(txn, olds)), dbs)
    _place_all(new, txn, olds["urls"], dbs)
    _index_loads(new, dbs)
    with new.begin(write=True) as out:
        out.drop(dbs[_ORDER], delete=True)
        meta = msgpack.unpackb(out.get(b"meta", db=dbs["meta"]), raw=False)
        meta["format"] = 3
        out.put(b"meta", msgpack.packb(meta, use_bin_type=True), db=dbs["meta"])


#: The scratch table: crawl, queue, creation time (a big-endian double, which sorts as the
#: time does for the times after 1970 a record holds), fingerprint.
_ORDER = "upgrading"
_CREATED = struct.Struct(">d")


def _write(env: lmdb.Environment, puts: Iterator[tuple[str, bytes, bytes]],
           dbs: dict[str, Any]) -> None:  # fmt: skip
    """``puts`` in transactions of ``_CHUNK`` (the new file is not in place before the end)."""
    more = True
    while more:
        more = False
        with env.begin(write=True) as out:
            for n, (db, key, value) in enumerate(puts, 1):
                out.put(key, value, db=dbs[db])
                if n == _CHUNK:
                    more = True
                    break


def _order(txn: lmdb.Transaction, dbs: dict[str, Any]) -> Iterator[bytes]:
    """Each URL record's key in the scratch table."""
    for key, raw in txn.cursor(db=dbs["urls"]):
        crawl = bytes(key[keys.CRAWL])
        _, queue, _, created, *_ = msgpack.unpackb(raw, raw=False)
        qid = txn.get(keys.text_key(crawl, queue), db=dbs["qnames"])
        if qid is None:
            raise ValueError(f"urls record {bytes(key).hex()} names queue {queue!r}, "
                             "which the crawl does not have")  # fmt: skip
        yield crawl + bytes(qid) + _CREATED.pack(float(created)) + bytes(key[keys.AFTER_CRAWL])


def _place_all(new: lmdb.Environment, txn: lmdb.Transaction, records: Any,
               dbs: dict[str, Any]) -> None:  # fmt: skip
    """Each URL's record at its place and its place by fingerprint, in the scratch table's
    order, each crawl's sequences past its counter, and its counter past them: ``_CHUNK``
    records a transaction, each resuming after the last record the one before placed."""
    crawl, seq, after = b"", 0, b""
    counters: dict[str, Any] = {}
    while True:
        with new.begin(write=True) as out:
            cursor = out.cursor(db=dbs[_ORDER])
            found = cursor.set_range(after)
            for _ in range(_CHUNK):
                if found and cursor.key() == after:
                    found = cursor.next()
                if not found:
                    if crawl:
                        out.put(crawl, _counters(counters, seq), db=dbs["queues"])
                    return
                after = order = bytes(cursor.key())
                qkey, fp = order[keys.QUEUE], order[keys.QUEUE.stop + _CREATED.size :]
                if qkey[keys.CRAWL] != crawl:
                    if crawl:
                        out.put(crawl, _counters(counters, seq), db=dbs["queues"])
                    crawl = qkey[keys.CRAWL]
                    stored = out.get(crawl, db=dbs["queues"])
                    counters = msgpack.unpackb(stored, raw=False) if stored is not None else {}
                    seq = int(counters.get("seq", 0))
                seq += 1
                key = qkey + keys.u64(seq)
                record = txn.get(crawl + fp, db=records)
                if record is None:  # its key came from this transaction's cursor
                    raise ValueError(f"urls record {(crawl + fp).hex()} went missing")
                out.put(key, fp + bytes(record), db=dbs["urls"])
                out.put(crawl + fp, key[keys.AFTER_CRAWL], db=dbs["fingerprints"])
                found = cursor.next()


def _index_loads(new: lmdb.Environment, dbs: dict[str, Any]) -> None:
    """Each indexed queue's keys in ``loads`` and ``wakes``, from its record (its key in
    ``ready`` last), ``_CHUNK`` queues a transaction."""
    after, found = b"", True
    while found:
        with new.begin(write=True) as out:
            cursor = out.cursor(db=dbs["queues"])
            found = cursor.set_range(after)
            for _ in range(_CHUNK):
                if found and cursor.key() == after:
                    found = cursor.next()
                if not found:
                    break
                after = qkey = bytes(cursor.key())
                if len(qkey) == keys.QUEUE.stop:  # a queue's (the crawl's totals: its id only)
                    *record, placed = msgpack.unpackb(cursor.value(), raw=False)
                    q = QueueRecord.from_record(record)
                    at = tend_at(q)
                    load = keys.load_key(placed, q.in_flight)
                    wake = keys.wake_key(qkey[keys.CRAWL], keys.read_u32(qkey, keys.CRAWL.stop),
                                         None if at is None else ms_up(at))  # fmt: skip
                    if load is not None:
                        out.put(load, qkey[keys.AFTER_CRAWL], db=dbs["loads"])
                    if wake is not None:
                        out.put(wake, b"", db=dbs["wakes"])
                found = cursor.next()


def _counters(counters: dict[str, Any], seq: int) -> bytes:
    packed: bytes = msgpack.packb({**counters, "seq": seq}, use_bin_type=True)
    return packed


def mark_format(path: str, was: int, new: int) -> None:
    """Record format ``new`` in the file at ``path`` (a migration's copy, of format ``was``)."""
    env = lmdb.open(path, subdir=False, max_dbs=32, lock=False)
    try:
        with env.begin(write=True) as txn:
            db = env.open_db(b"meta", txn=txn, create=False)
            meta = msgpack.unpackb(txn.get(b"meta", db=db), raw=False)
            if meta.get("format") != was:
                raise ValueError(f"{path} has format {meta.get('format')!r}, not {was}")
            meta["format"] = new
            txn.put(b"meta", msgpack.packb(meta, use_bin_type=True), db=db)
    finally:
        env.close()
