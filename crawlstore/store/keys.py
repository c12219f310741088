"""Fixed-width big-endian key parts: memcmp order is the order crawlstore needs."""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_RANK_CLASS_SEQ = struct.Struct(">IBQ")
_MS_SEQ = struct.Struct(">QQ")
U64_MAX = 2**64 - 1

#: What LMDB hands back: bytes (or a memoryview into the map with ``buffers=True``).
Buf = bytes | memoryview
PRIORITY_TOP = 2**31 - 1


u32: Callable[[int], bytes] = _U32.pack
u64: Callable[[int], bytes] = _U64.pack


def read_u32(b: Buf, offset: int = 0) -> int:
    return int(_U32.unpack_from(b, offset)[0])


def read_u64(b: Buf, offset: int = 0) -> int:
    return int(_U64.unpack_from(b, offset)[0])


def ms(t: float) -> int:
    """Epoch seconds to whole milliseconds, rounded down, clamped to the key range."""
    if 0 <= t < 1e15:
        return int(t * 1000)
    if math.isnan(t):
        raise ValueError("a time cannot be NaN")
    return 0 if t < 0 else U64_MAX


def ms_seq(t: float, seq: int) -> bytes:
    return _MS_SEQ.pack(ms(t), seq)


def order_key(order: str, priority: int, cls: int, seq: int) -> bytes:
    """(rank, class, seq): highest priority first for the priority order; returning seeds
    (class 0) before pushed ones (class 1); pushed LIFO seeds newest first."""
    rank = PRIORITY_TOP - priority if order == "priority" else 0
    if order == "lifo" and cls == 1:
        seq = U64_MAX - seq
    return _RANK_CLASS_SEQ.pack(rank, cls, seq)


#: Keys longer than this (LMDB allows 511 bytes) hold a digest of their text part instead; a
#: digest starts with 0xFF, which UTF-8 never does.
MAX_KEY = 400
HASHED = b"\xff"


def text_key(prefix: bytes, text: str, what: str = "a key") -> bytes:
    """``prefix`` and ``text`` in UTF-8, or a digest of ``text`` when that would be too long."""
    if not isinstance(text, str):
        raise TypeError(f"{what} is a str, not {type(text).__name__}: {text!r:.100}")
    raw = text.encode("utf-8")
    if len(prefix) + len(raw) > MAX_KEY:
        return prefix + HASHED + hashlib.blake2b(raw, digest_size=20).digest()
    return prefix + raw
