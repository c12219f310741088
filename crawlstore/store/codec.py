"""Records as stored: msgpack values (never pickle), decoded with an error that names the table
and key of a record that does not decode; prefix scans of a table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lmdb
import msgpack

from ..errors import CorruptRecord
from .keys import Buf

__all__ = ["pack", "scan", "unpack"]


#: One packer for every record (making one a call costs more than packing a small record).
#: It calls no Python code, so a pack runs whole under the GIL: threads may share it.
_PACK = msgpack.Packer(use_bin_type=True).pack


def pack(value: Any) -> bytes:
    return _PACK(value)  # type: ignore[no-any-return]


def unpack(db: str, key: Buf, raw: Buf | None) -> Any:
    if raw is None:
        raise CorruptRecord(f"{db} record {bytes(key).hex()} is missing")
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:
        raise CorruptRecord(f"{db} record {bytes(key).hex()} does not decode: {exc!r}") from None


def scan(txn: lmdb.Transaction, db: Any, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The records of ``db`` whose keys start with ``prefix``, in key order."""
    cursor = txn.cursor(db=db)
    if cursor.set_range(prefix):
        for key, value in cursor:
            if key[: len(prefix)] != prefix:
                return
            yield bytes(key), bytes(value)
