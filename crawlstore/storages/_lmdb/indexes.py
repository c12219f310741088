"""A crawl's bounded indexes in a store file (``spi.Storage.note_failure`` and the rest).

| table | key | value |
|---|---|---|
| ``failures`` | crawl | how many failures the crawl keeps (u32) |
| ``failures`` | crawl, ``failure_key`` (time in ms, URL digest) | the failure, msgpack |
| ``revisits`` | crawl, slot (``revisit_slot``, u64) | revisits due in it (u64) |

A failure goes in by its time: the oldest of a crawl's is the first of its range, and goes
when the crawl keeps more than it should. The revisits of a slot are one count, so that
``revisits_due`` reads a key a minute, whatever the crawl holds.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ...errors import CorruptRecord
from ...frontier.spi import CrawlRecord, Failure
from .._records import decode_failure, encode_failure, failure_key, revisit_slot
from . import keys

if TYPE_CHECKING:
    from .storage import LmdbStorage

__all__ = ["count_revisit", "failures", "note_failure", "revisits_due"]

_U32 = struct.Struct(">I")


def _count(raw: bytes | memoryview | None, key: bytes) -> int:
    if raw is None:
        return 0
    if len(raw) != _U32.size:
        raise CorruptRecord(f"failures record {key.hex()} is not a count")
    return int(_U32.unpack(raw)[0])


def note_failure(storage: LmdbStorage, crawl: CrawlRecord, failure: Failure, keep: int) -> None:
    txn, db = storage.ctx().txn, storage.dbs["failures"]
    prefix: bytes = crawl.ref
    held = _count(txn.get(prefix, db=db), prefix)
    if txn.replace(prefix + failure_key(failure), encode_failure(failure), db=db) is None:
        held += 1
    if held > keep:
        cursor = storage.ctx().cursor("failures")
        found = cursor.set_range(prefix + b"\x00")  # the oldest (the count's key sorts first)
        while found and held > keep and cursor.key()[keys.CRAWL] == prefix:
            found = cursor.delete()
            held -= 1
    txn.put(prefix, _U32.pack(held), db=db)


def failures(storage: LmdbStorage, crawl: CrawlRecord, limit: int) -> list[Failure]:
    if limit <= 0:
        return []
    cursor = storage.txn().cursor(db=storage.dbs["failures"])
    prefix: bytes = crawl.ref
    out: list[Failure] = []
    found = cursor.set_range(prefix + b"\xff")  # past the crawl's range: then back
    found = cursor.prev() if found else cursor.last()
    while found and len(out) < limit:
        key = bytes(cursor.key())
        if key[keys.CRAWL] != prefix or len(key) == len(prefix):
            break
        out.append(decode_failure(cursor.value(), key))
        found = cursor.prev()
    return out


def count_revisit(storage: LmdbStorage, crawl: CrawlRecord, at: float, n: int) -> None:
    txn, db = storage.ctx().txn, storage.dbs["revisits"]
    key = crawl.ref + keys.u64(revisit_slot(at))
    raw = txn.get(key, db=db)
    count = (0 if raw is None else _slot_count(key, raw)) + n
    if count > 0:
        txn.put(key, keys.u64(count), db=db)
    elif raw is not None:
        txn.delete(key, db=db)


def revisits_due(storage: LmdbStorage, crawl: CrawlRecord, until: float) -> int:
    cursor = storage.txn().cursor(db=storage.dbs["revisits"])
    prefix: bytes = crawl.ref
    last = revisit_slot(until)
    total = 0
    found = cursor.set_range(prefix)
    while found:
        key = bytes(cursor.key())
        if key[keys.CRAWL] != prefix or keys.read_u64(key, len(prefix)) > last:
            break
        total += _slot_count(key, cursor.value())
        found = cursor.next()
    return total


def _slot_count(key: bytes, raw: bytes | memoryview) -> int:
    if len(raw) != 8:
        raise CorruptRecord(f"revisits record {key.hex()} is not a count")
    return keys.read_u64(raw)
