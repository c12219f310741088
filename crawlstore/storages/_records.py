"""Record codecs every storage shares, named per record: what the bytes of a URL record, a queue
entry's order and a time in a key are. msgpack values, never pickle; a record that does not
decode raises ``CorruptRecord`` naming its table and key."""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable
from typing import Any

import msgpack

from ..errors import CorruptRecord
from ..frontier.spi import (
    ACTIVE,
    DONE,
    FAILED,
    IN_FLIGHT,
    QUEUED,
    REVISIT_SLOT,
    SCHEDULED,
    SKIPPED,
    Entry,
    Failure,
    Slot,
    UrlRecord,
    Visit,
)
from ..url import Fingerprint

__all__ = ["FAILURE_KEY", "ORDER", "U64_MAX", "decode_failure", "decode_url", "encode_failure",
           "encode_url", "failure_key", "ms_up", "pack", "revisit_slot", "unpack"]  # fmt: skip

#: A queue entry's place: rank (u32), class (u8), sequence (u64), big-endian so that byte order
#: is the order entries leave their queue in.
ORDER = struct.Struct(">IBQ")
U64_MAX = 2**64 - 1
#: The states a URL record may hold.
URL_STATES = ACTIVE | {DONE, FAILED, SKIPPED}

#: A stored array as the named tuple it is (its length checked first): half the cost of a call.
_as = tuple.__new__

#: One packer for every record (making one a call costs more than packing a small record).
#: It calls no Python code, so a pack runs whole under the GIL: threads may share it.
pack: Callable[[Any], bytes] = msgpack.Packer(use_bin_type=True).pack


def unpack(table: str, key: bytes | memoryview, raw: bytes | memoryview | None) -> Any:
    """The msgpack record ``raw`` of ``table`` at ``key``."""
    if raw is None:
        raise CorruptRecord(f"{table} record {bytes(key).hex()} is missing")
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:
        raise CorruptRecord(f"{table} record {bytes(key).hex()} does not decode: {exc!r}") from None


def ms_up(t: float) -> int:
    """Epoch seconds to whole milliseconds, rounded up (an entry keyed by it is never early),
    clamped to the key range."""
    if 0 <= t < 1e15:
        return math.ceil(t * 1000)
    if math.isnan(t):
        raise ValueError("a time cannot be NaN")
    return 0 if t < 0 else U64_MAX


def encode_url(url: UrlRecord) -> bytes:
    """A URL record's bytes: state, queue, where, created, outcome, kind, the packed seed."""
    return pack([url.state, url.queue, url.where, url.created, url.outcome, url.kind,
                 url.packed_seed()])  # fmt: skip


def decode_url(fp: bytes, raw: bytes, key: bytes) -> UrlRecord:
    """The URL record of ``fp`` stored at ``key`` (``CorruptRecord`` naming the key when it is
    not one); its seed is decoded when first read."""
    try:
        state, queue, where, created, outcome, kind, packed = unpack("urls", key, raw)
        if state not in URL_STATES or not isinstance(queue, str) or not isinstance(packed, bytes):
            raise ValueError(f"state {state!r}, queue {queue!r}, seed {type(packed).__name__}")
        if state == QUEUED:
            if len(where) != 3:
                raise ValueError(f"queue entry {where!r}")
            where = _as(Entry, where)
        elif state == SCHEDULED:
            if len(where) != 2:
                raise ValueError(f"schedule slot {where!r}")
            where = _as(Slot, where)
        elif state != IN_FLIGHT:
            where = None
        elif not isinstance(where, bytes):
            raise ValueError(f"lease token {where!r}")
        if outcome is not None:
            outcome = Visit(*outcome)
        return UrlRecord(Fingerprint(fp), None, state, queue, where, float(created),
                         outcome, kind, packed=packed)  # fmt: skip
    except CorruptRecord:
        raise
    except (TypeError, ValueError, IndexError) as exc:
        raise CorruptRecord(f"urls record {key.hex()} is malformed: {exc!r}") from None


def revisit_slot(at: float) -> int:
    """The ``REVISIT_SLOT`` a revisit due at ``at`` is counted in (a number that grows with
    time, from 0)."""
    return ms_up(at) // (REVISIT_SLOT * 1000)


#: A failure's place in its partition's ring: its time (ms) and a digest of its URL (8 bytes),
#: so that byte order is the order of their times and the oldest goes first.
FAILURE_KEY = struct.Struct(">Q8s")


def failure_key(failure: Failure) -> bytes:
    """Where a failure is in its partition's ring (``FAILURE_KEY``); every storage orders
    them by it."""
    digest = hashlib.blake2b(failure.url.encode("utf-8", "surrogatepass"), digest_size=8)
    return FAILURE_KEY.pack(ms_up(failure.at), digest.digest())


def encode_failure(failure: Failure) -> bytes:
    return pack(list(failure))


def decode_failure(raw: bytes | memoryview, key: bytes | memoryview = b"") -> Failure:
    """A failure of a ring, as ``encode_failure`` wrote it."""
    record = unpack("failures", key, raw)
    try:
        at, queue, url, status, reason = record
        if not (isinstance(queue, str) and isinstance(url, str)):
            raise ValueError(f"queue {queue!r}, url {url!r}")
        return Failure(float(at), queue, url, status, reason)
    except (TypeError, ValueError) as exc:
        raise CorruptRecord(f"failures record {bytes(key).hex()} is not a failure: "
                            f"{record!r:.100} ({exc})") from None  # fmt: skip
