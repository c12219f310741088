"""Record codecs every storage shares, named per record: what the bytes of a URL record, a queue
entry's order and a time in a key are. msgpack values, never pickle; a record that does not
decode raises ``CorruptRecord`` naming its table and key."""

from __future__ import annotations

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
    SCHEDULED,
    SKIPPED,
    Entry,
    Slot,
    UrlRecord,
    Visit,
)
from ..url import Fingerprint

__all__ = ["ORDER", "U64_MAX", "decode_url", "encode_url", "ms_up", "pack", "unpack"]

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
