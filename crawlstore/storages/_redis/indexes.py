"""A crawl's bounded indexes on Redis (``spi.Storage.note_failure`` and the rest), in the slot
of the crawl's index of queues: the crawl's own (format 1), or each queue's bucket (format 2),
whose reads merge every bucket's.

| key | type | content |
|---|---|---|
| ``<tag>`` ``FAILURES`` | sorted set | recent failures: ``failure_key``, then the record |
| ``<tag>`` ``REVISITS`` | sorted set | scheduled revisits: slot (``revisit_slot``, u64), fp |

A revisit is a member of its own, written without a read (``ZLEXCOUNT`` counts a range of
slots in a read of its own); a failure too, then the ring is trimmed to its newest by rank
(``ZREMRANGEBYRANK``, the write ``T`` of the function library): neither reads anything, and
either, applied twice, leaves what it left once.
"""

from __future__ import annotations

import struct
from typing import Any

from ...errors import CorruptRecord
from ...frontier.spi import Failure
from .._records import FAILURE_KEY, decode_failure, encode_failure, failure_key, revisit_slot

__all__ = ["FAILURES", "REVISITS", "decode", "failure_member", "newest", "note",
           "revisit_member",
           "revisits_until"]  # fmt: skip

FAILURES = b":fl"
REVISITS = b":rv"
_U64 = struct.Struct(">Q")
#: The part of a ``FAILURES`` member before its record: its ``failure_key``.
_HEAD = FAILURE_KEY.size


def failure_member(failure: Failure) -> bytes:
    return failure_key(failure) + encode_failure(failure)


def decode(member: bytes) -> Failure:
    if len(member) <= _HEAD:
        raise CorruptRecord(f"failures member {member.hex()} is too short")
    return decode_failure(member[_HEAD:], member[:_HEAD])


def revisit_member(fp: bytes, at: float) -> bytes:
    return _U64.pack(revisit_slot(at)) + fp


def newest(key: bytes, limit: int) -> tuple[Any, ...]:
    """The read of the newest ``limit`` members of the ring ``key``, newest first."""
    return ("ZRANGE", key, "+", "-", "BYLEX", "REV", "LIMIT", 0, limit)


def revisits_until(key: bytes, until: float) -> tuple[Any, ...]:
    """The read that counts the revisits of ``key`` due by ``until`` (in whole slots)."""
    return ("ZLEXCOUNT", key, "-", b"(" + _U64.pack(revisit_slot(until) + 1))


def note(unit: Any, tag: bytes, failure: Failure, keep: int) -> None:
    """Add ``failure`` to the ring of ``tag`` in ``unit``, keeping its newest ``keep``: two
    blind writes (a failure it holds already is the same member)."""
    key = tag + FAILURES
    unit.zadd(key, failure_member(failure))
    unit.ztrim(key, keep)
