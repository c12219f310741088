"""A crawl's bounded indexes on Redis (``spi.Storage.note_failure`` and the rest), in the slot
of the crawl's index of queues: the crawl's own (format 1), or each queue's bucket (format 2),
whose reads merge every bucket's.

| key | type | content |
|---|---|---|
| ``<tag>`` ``FAILURES`` | sorted set | recent failures: time (ms, u64), URL digest (8), record |
| ``<tag>`` ``TOTALS`` ``~fl`` | field | how many ``FAILURES`` holds |
| ``<tag>`` ``REVISITS`` | sorted set | scheduled revisits: slot (``revisit_slot``, u64), fp |

A revisit is a member of its own, written without a read (``ZLEXCOUNT`` counts a range of
slots in a read of its own); the ring's count is kept with the totals, which a unit reads
anyway, and a failure is added once (a ring of a bucket is small enough for a unit to keep
whole, so the look costs no round trip of its own once read).
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any

from ...errors import CorruptRecord
from ...frontier.spi import Failure
from .._records import decode_failure, encode_failure, ms_up, revisit_slot
from .keys import TOTALS

__all__ = ["FAILURES", "HELD", "REVISITS", "decode", "failure_member", "newest", "note",
           "revisit_member",
           "revisits_until"]  # fmt: skip

FAILURES = b":fl"
REVISITS = b":rv"
#: The field of ``TOTALS`` that counts the ring's failures.
HELD = b"~fl"
_U64 = struct.Struct(">Q")
#: The part of a ``FAILURES`` member before its record.
_HEAD = 16


def failure_member(failure: Failure) -> bytes:
    digest = hashlib.blake2b(failure.url.encode("utf-8", "surrogatepass"), digest_size=8)
    return _U64.pack(ms_up(failure.at)) + digest.digest() + encode_failure(failure)


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
    """Add ``failure`` to the ring of ``tag`` in ``unit``, keeping its newest ``keep``; one it
    holds already is left as it is (so the count stays exact: a migration noting it again,
    one URL failing twice in a millisecond)."""
    key, totals = tag + FAILURES, tag + TOTALS
    member = failure_member(failure)
    if unit.zrange(key, member, None, 1, inclusive=True) == [member]:
        return
    held = int(unit.hgetall(totals).get(HELD) or 0) + 1
    unit.zadd(key, member)
    if held > keep:
        for oldest in unit.zrange(key, None, None, held - keep):
            unit.zrem(key, oldest)
        held = keep
    unit.hset(totals, HELD, b"%d" % held)
