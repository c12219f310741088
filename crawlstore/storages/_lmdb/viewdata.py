"""Where a file keeps what the store's views hold (``crawlstore.views``), under the crawl's key
prefix: the exact seen set as sorted 16-byte duplicates of that prefix in ``seen``, the Bloom
filter as its parameters (``bloom`` at prefix + 0x00) and page-sized chunks of bits (prefix +
0x01 + chunk number), validators in ``validators`` (prefix + fingerprint), their counts with the
crawl's counters (the Bloom filter's in its parameters)."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from .codec import pack, scan, unpack
from .keys import read_u32, u32

if TYPE_CHECKING:
    from .context import WriteContext
    from .storage import LmdbStorage

__all__ = ["LmdbViewData"]

#: Bytes of bits a Bloom chunk: one 4 KiB overflow page with its header.
CHUNK = 4080
_CHUNK_BITS = CHUNK * 8
_META, _CHUNKS = b"\x00", b"\x01"


def _chunk(prefix: bytes, p: int) -> tuple[bytes, int, int]:
    """The key of the chunk holding bit ``p``, the byte in it and the bit's mask."""
    return prefix + _CHUNKS + u32(p // _CHUNK_BITS), (p % _CHUNK_BITS) >> 3, 0x80 >> (p & 7)


class LmdbViewData:
    """The view primitives of ``LmdbStorage`` (which it is mixed into); a crawl's handle is its
    key prefix."""

    seen_kinds: tuple[str, ...] = ("exact",)

    def __init__(self, storage: LmdbStorage) -> None:
        self._s = storage

    def crawl_ref(self, name: str) -> bytes | None:
        return self._s.crawl_key(name)

    def view_count(self, ref: bytes, name: str) -> int:
        if name == "bloom":
            meta = self._s.record("bloom", ref + _META)
            return int(meta["n"]) if meta is not None else 0
        return int(self._s.totals_of(ref).get(name, 0))

    def add_view_count(self, ref: bytes, name: str, n: int) -> int:
        ctx = self._s.ctx()
        if name == "bloom":
            meta = ctx.record("bloom", ref + _META)
            before = int(meta["n"])
            meta["n"] = before + n
            ctx.touch("bloom", ref + _META)
            return before
        counters = ctx.counters(ref)
        before = counters[name]
        counters[name] += n
        return before

    # -- the exact seen set ---------------------------------------------------------------------

    def seen_mark(self, ref: bytes, kind: str, *, write: bool) -> str | None:
        return kind  # one kind: nothing to keep

    def seen_has(self, ref: bytes, kind: str, fps: Sequence[bytes]) -> list[bool]:
        return list(map(functools.partial(self._s.cursor("seen").set_key_dup, ref), fps))

    def seen_add(self, ref: bytes, kind: str, fps: Sequence[bytes]) -> int:
        ctx = self._s.ctx()
        return sum(map(functools.partial(ctx.txn.put, ref, db=ctx.dbs["seen"], dupdata=False), fps))

    def seen_all(self, ref: bytes, kind: str) -> Iterator[bytes]:
        cursor = self._s.cursor("seen")
        if cursor.set_key(ref):
            for fp in cursor.iternext_dup():
                yield bytes(fp)

    # -- the Bloom filter -----------------------------------------------------------------------

    def bloom_parts(self, bits: int) -> int:
        return 1

    def bloom_part(self, fp: bytes, parts: int) -> int:
        return 0

    def bloom_params(self, ref: bytes) -> tuple[Any, ...] | None:
        meta = self._s.record("bloom", ref + _META)
        if meta is None:
            return None
        return (meta["expected"], meta["fp_rate"], meta["bits"], meta["hashes"])

    def bloom_create(self, ref: bytes, params: tuple[Any, ...], parts: int,
                     part_bits: int) -> None:  # fmt: skip
        expected, fp_rate, bits, hashes = params
        meta = {"expected": expected, "fp_rate": fp_rate, "bits": bits, "hashes": hashes, "n": 0}
        self._s.ctx().put_record("bloom", ref + _META, meta)

    def bloom_get(self, ref: bytes, part: int, positions: Sequence[int]
                  ) -> list[bool]:  # fmt: skip
        ctx: WriteContext | None = self._s.current()
        out = []
        if ctx is not None:
            for p in positions:
                key, byte, mask = _chunk(ref, p)
                out.append(bool(ctx.blob("bloom", key, CHUNK)[byte] & mask))
            return out
        txn, db = self._s.txn(), self._s.dbs["bloom"]
        got: dict[bytes, Any] = {}
        for p in positions:
            key, byte, mask = _chunk(ref, p)
            chunk = got[key] if key in got else got.setdefault(key, txn.get(key, db=db))
            out.append(chunk is not None and bool(chunk[byte] & mask))
        return out

    def bloom_set(self, ref: bytes, part: int, positions: Sequence[int]) -> None:
        ctx = self._s.ctx()
        for p in positions:
            key, byte, mask = _chunk(ref, p)
            chunk = ctx.blob("bloom", key, CHUNK)
            if not chunk[byte] & mask:
                chunk[byte] |= mask
                ctx.touch_blob("bloom", key)

    def bloom_chunks(self, ref: bytes) -> Iterator[tuple[int, bytes]]:
        for key, raw in scan(self._s.txn(), self._s.dbs["bloom"], ref + _CHUNKS):
            yield read_u32(key, len(ref) + 1), raw

    def load_bloom(self, ref: bytes, params: tuple[Any, ...], count: int) -> None:
        self.bloom_create(ref, params, 1, int(params[2]))
        self.add_view_count(ref, "bloom", count)

    def put_bloom_chunk(self, ref: bytes, chunk: int, bits: bytes) -> None:
        self._s.ctx().txn.put(ref + _CHUNKS + u32(chunk), bits, db=self._s.dbs["bloom"])

    # -- validators -----------------------------------------------------------------------------

    def validator(self, ref: bytes, fp: bytes) -> list[Any] | None:
        raw = self._s.get("validators", ref + fp)
        return None if raw is None else list(unpack("validators", ref + fp, raw))

    def put_validator(self, ref: bytes, fp: bytes, record: list[Any] | None
                      ) -> bool:  # fmt: skip
        ctx = self._s.ctx()
        db, key = ctx.dbs["validators"], ref + fp
        existed = ctx.txn.get(key, db=db) is not None
        if record is None:
            ctx.txn.delete(key, db=db)
        else:
            ctx.txn.put(key, pack(record), db=db)
        return existed

    def validators_all(self, ref: bytes) -> Iterator[tuple[bytes, list[Any]]]:
        for key, raw in scan(self._s.txn(), self._s.dbs["validators"], ref):
            yield key[len(ref) :], list(unpack("validators", key, raw))
