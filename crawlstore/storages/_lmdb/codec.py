"""Records as stored: msgpack values (never pickle), decoded with an error that names the table
and key of a record that does not decode; prefix scans of a table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lmdb

from .._records import pack, unpack

__all__ = ["pack", "scan", "unpack"]


def scan(txn: lmdb.Transaction, db: Any, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The records of ``db`` whose keys start with ``prefix``, in key order."""
    cursor = txn.cursor(db=db)
    if cursor.set_range(prefix):
        for key, value in cursor:
            if key[: len(prefix)] != prefix:
                return
            yield bytes(key), bytes(value)
