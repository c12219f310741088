"""Fixed-width big-endian key parts: memcmp order is the order crawlstore needs."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")

#: What LMDB hands back: bytes (or a memoryview into the map with ``buffers=True``).
Buf = bytes | memoryview


u32: Callable[[int], bytes] = _U32.pack
u64: Callable[[int], bytes] = _U64.pack


def read_u32(b: Buf, offset: int = 0) -> int:
    return int(_U32.unpack_from(b, offset)[0])


def read_u64(b: Buf, offset: int = 0) -> int:
    return int(_U64.unpack_from(b, offset)[0])


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
