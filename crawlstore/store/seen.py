"""Persisted seen sets: exact (sorted 16-byte duplicates under the crawl's key) and Bloom."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import lmdb

from ..errors import StoreError
from ..seen import bloom_positions, bloom_size
from ..url import Fingerprint
from . import keys
from .engine import WriteContext, unpack

if TYPE_CHECKING:
    from .engine import Engine

log = logging.getLogger("crawlstore.seen")

__all__ = ["StoreBloomSeen", "StoreSeen"]


def _is_fp(fp: object) -> bool:
    return isinstance(fp, bytes) and len(fp) == 16


class StoreSeen:
    """An exact seen set in the store: about 24 bytes of file a URL, no memory held.

    Inside ``store.transaction()`` (as ``dedup_with`` uses it) its updates join the push.
    """

    def __init__(self, engine: Engine, crawl_prefix: bytes) -> None:
        self._engine = engine
        self._key = crawl_prefix

    def insert(self, fp: bytes) -> bool:
        if not _is_fp(fp):
            raise TypeError(f"a fingerprint is 16 bytes: {fp!r}")

        def op(ctx: WriteContext) -> bool:
            new = bool(ctx.txn.put(self._key, fp, db=ctx.dbs["seen"], dupdata=False))
            if new:
                ctx.counters(self._key)["seen"] += 1
            return new

        return self._engine.run(op)

    def __contains__(self, fp: object) -> bool:
        if not isinstance(fp, bytes) or len(fp) != 16:
            return False

        ctx = self._engine.current
        if ctx is not None:
            return bool(ctx.cursor("seen").set_key_dup(self._key, fp))

        def read(txn: lmdb.Transaction) -> bool:
            return bool(txn.cursor(db=self._engine.dbs["seen"]).set_key_dup(self._key, fp))

        return self._engine.read(read)

    def __iter__(self) -> Iterator[Fingerprint]:
        """Every fingerprint, in byte order (read in one short transaction)."""

        def read(txn: lmdb.Transaction) -> list[Fingerprint]:
            cursor = txn.cursor(db=self._engine.dbs["seen"])
            if not cursor.set_key(self._key):
                return []
            return [Fingerprint(bytes(fp)) for fp in cursor.iternext_dup()]

        return iter(self._engine.read(read))

    def __len__(self) -> int:
        return int(self._engine.read_counters(self._key).get("seen", 0))


_CHUNK = 4080  # bytes of bits a record: one 4 KiB overflow page with its header
_CHUNK_BITS = _CHUNK * 8


class StoreBloomSeen:
    """A Bloom filter kept in the store, in page-sized chunks: about 1.2 bytes a URL at 1%.

    Its parameters are fixed when the crawl's filter is created; reopening with others raises.
    """

    def __init__(self, engine: Engine, crawl_prefix: bytes, expected: int, fp_rate: float) -> None:
        self._engine = engine
        self._meta_key = crawl_prefix + b"\x00"
        self._chunk_prefix = crawl_prefix + b"\x01"
        self.bits, self.hashes = bloom_size(expected, fp_rate)
        self.expected, self.fp_rate = expected, fp_rate
        params = {"expected": expected, "fp_rate": fp_rate, "bits": self.bits,
                  "hashes": self.hashes}  # fmt: skip
        meta = self._meta(None)
        if meta is None and not engine.readonly:
            engine.run(lambda ctx: ctx.put_record("bloom", self._meta_key, {**params, "n": 0}))
        elif meta is not None and any(meta[k] != v for k, v in params.items()):
            raise StoreError(
                f"this crawl's Bloom filter was created with expected={meta['expected']}, "
                f"fp_rate={meta['fp_rate']}; open it with those"
            )

    def _meta(self, ctx: WriteContext | None) -> dict[str, Any] | None:
        if ctx is not None:
            return ctx.record("bloom", self._meta_key)  # type: ignore[no-any-return]
        raw = self._engine.read(lambda txn: txn.get(self._meta_key, db=self._engine.dbs["bloom"]))
        return unpack("bloom", self._meta_key, raw) if raw is not None else None

    def _chunk_key(self, chunk: int) -> bytes:
        return self._chunk_prefix + keys.u32(chunk)

    def insert(self, fp: bytes) -> bool:
        if not _is_fp(fp):
            raise TypeError(f"a fingerprint is 16 bytes: {fp!r}")
        positions = bloom_positions(fp, self.bits, self.hashes)

        def op(ctx: WriteContext) -> bool:
            new = False
            for p in positions:
                key = self._chunk_key(p // _CHUNK_BITS)
                chunk = ctx.blob("bloom", key, _CHUNK)
                byte, mask = (p % _CHUNK_BITS) >> 3, 0x80 >> (p & 7)
                if not chunk[byte] & mask:
                    chunk[byte] |= mask
                    ctx.touch_blob("bloom", key)
                    new = True
            if new:
                meta = self._meta(ctx)
                assert meta is not None
                meta["n"] += 1
                ctx.touch("bloom", self._meta_key)
                if meta["n"] == self.expected + 1:
                    log.warning(
                        "the store's Bloom filter holds %d fingerprints, past its expected %d: "
                        "false positives will exceed %.3g",
                        meta["n"],
                        self.expected,
                        self.fp_rate,
                    )
            return new

        return self._engine.run(op)

    def __contains__(self, fp: object) -> bool:
        if not _is_fp(fp):
            return False
        assert isinstance(fp, bytes)
        positions = bloom_positions(fp, self.bits, self.hashes)
        ctx = self._engine.current
        if ctx is not None:
            return all(
                ctx.blob("bloom", self._chunk_key(p // _CHUNK_BITS), _CHUNK)[(p % _CHUNK_BITS) >> 3]
                & (0x80 >> (p & 7))
                for p in positions
            )

        def read(txn: lmdb.Transaction) -> bool:
            db = self._engine.dbs["bloom"]
            for p in positions:
                chunk = txn.get(self._chunk_key(p // _CHUNK_BITS), db=db)
                if chunk is None or not chunk[(p % _CHUNK_BITS) >> 3] & (0x80 >> (p & 7)):
                    return False
            return True

        return self._engine.read(read)

    def __len__(self) -> int:
        meta = self._meta(self._engine.current)
        return int(meta["n"]) if meta is not None else 0
