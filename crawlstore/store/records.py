"""The records of a store frontier, encoded and decoded: queue records, pending entries,
leases. Each decoder names the table and key of a record that does not decode."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

import lmdb
import msgpack

from ..errors import CorruptRecord
from ..seed import Seed
from ..url import Fingerprint
from . import keys
from .engine import pack

#: A lease: queue id, expiry time, owner pid and start time, then the pending entry's bytes.
LEASE = struct.Struct(">Idqq")


def new_queue(key: str) -> dict[str, Any]:
    """A new queue's record (msgpack in the queue table)."""
    # n: queued, f: in flight, last: last pop, blk: blocked until, d / cap: overrides,
    # rk: its key in the ready index (None when not ready-eligible)
    # ra: the ready time it was placed at
    return {"k": key, "n": 0, "f": 0, "last": float("-inf"), "blk": 0.0, "d": None, "cap": None,
            "rk": None, "ra": None}  # fmt: skip


def scan(txn: lmdb.Transaction, db: Any, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The records of ``db`` whose keys start with ``prefix``, in key order."""
    cursor = txn.cursor(db=db)
    if cursor.set_range(prefix):
        for key, value in cursor:
            if key[: len(prefix)] != prefix:
                return
            yield bytes(key), bytes(value)


def pack_entry(seed: Seed) -> bytes:
    return pack([seed.fingerprint, seed.to_record()])


def unpack_entry(key: keys.Buf, raw: keys.Buf) -> Seed:
    """A pending entry (``[fingerprint, seed record]``) as its seed; every pop decodes one."""
    try:
        fp, record = msgpack.unpackb(raw)
        return Seed._trusted(record, fp)
    except Exception as exc:
        raise CorruptRecord(f"pending record {bytes(key).hex()} is malformed: {exc!r}") from None


def unpack_seed(db: str, key: keys.Buf, record: Any, fp: keys.Buf) -> Seed:
    try:
        return Seed._trusted(record, Fingerprint(bytes(fp)))
    except (TypeError, ValueError, KeyError, IndexError):
        raise CorruptRecord(f"{db} record {bytes(key).hex()} holds a malformed seed") from None


def read_lease(key: keys.Buf, lease: keys.Buf) -> tuple[int, float, int, int]:
    """(queue id, expiry time, owner pid, owner start time) from a lease's header."""
    try:
        qid, expires, pid, start = LEASE.unpack_from(lease)
    except struct.error:
        raise CorruptRecord(f"leases record {bytes(key).hex()} is malformed") from None
    return qid, expires, pid, start
