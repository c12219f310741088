"""The key table of a store file: fixed-width big-endian key parts (memcmp order is the order
crawlstore needs), and where each part of each table's keys is."""

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


# -- key layouts ---------------------------------------------------------------------------------
# Every key of a crawl's tables starts with the crawl's id (u32); the keys of one queue go on
# with the queue's id (u32), so that each of a queue's tables is one key range. Times in keys
# are milliseconds rounded up (u64), sequences the crawl's counter (u64).
#
# | table | key |
# |---|---|
# | ``ready`` | crawl, event ms (``READY_MS``), sequence |
# | ``loads`` | crawl, in-flight count (``LOAD``), the queue's ``ready`` key after the crawl |
# | ``wakes`` | crawl, ms (``WAKE_MS``: ``tend_at``), queue id (``WAKE_QUEUE``) |
# | ``pending`` | queue range (``QUEUE``), order (``ORDER``: rank, class, sequence) |
# | ``leases`` | crawl, the token's queue id and sequence (``TOKEN_KEY``) |
# | ``expiries``, ``schedule`` | queue range, ms (``TIME_MS``), sequence (``TIME_SEQ``) |
# | ``urls`` | queue range, sequence (its value starts with the URL's fingerprint) |
# | ``fingerprints`` | crawl, fingerprint (``AFTER_CRAWL``); its value: the queue's id and
#   sequence of the URL's key in ``urls`` (that key after the crawl's id) |
# | ``state`` | crawl, namespace, 0, key (or ``HASHED`` and a digest) |

#: A crawl's id: the first part of every key of its tables.
CRAWL = slice(0, 4)
#: What follows the crawl's id: a fingerprint (``fingerprints``), a lease's key, a state's name.
AFTER_CRAWL = slice(4, None)
#: The crawl's and the queue's ids: the key range of one queue.
QUEUE = slice(0, 8)
#: Where the event's milliseconds are in a ``ready`` key.
READY_MS = 4
#: Where the queue's in-flight count is in a ``loads`` key, and its place (its ``ready`` key
#: after the crawl's id: event ms, sequence), the order ``due_queues`` merges loads in.
LOAD = 4
LOAD_PLACE = slice(8, 24)
#: Where the time is in a ``wakes`` key, and the queue's id.
WAKE_MS = 4
WAKE_QUEUE = 12
#: Where the time's milliseconds are in an ``expiries`` or ``schedule`` key, and its sequence.
TIME_MS = 8
TIME_SEQ = slice(16, 24)

#: A lease's token (16 bytes): its queue's id, its sequence, a random nonce. The first two are
#: its key in ``leases`` (after the crawl's id); the nonce is in the lease's record.
TOKEN_QUEUE = slice(0, 4)
TOKEN_SEQ = 4
TOKEN_KEY = slice(0, 12)
TOKEN_NONCE = slice(12, 16)


def load_key(ready: bytes | None, in_flight: int) -> bytes | None:
    """A queue's key in ``loads``: its key in ``ready`` (None: not indexed) with its in-flight
    count after the crawl's id."""
    return None if ready is None else ready[CRAWL] + u32(in_flight) + ready[AFTER_CRAWL]


def wake_key(crawl: bytes, qid: int, ms: int | None) -> bytes | None:
    """A queue's key in ``wakes`` for ``ms`` (its ``tend_at`` rounded up; None: no key)."""
    return None if ms is None else crawl + u64(ms) + u32(qid)
