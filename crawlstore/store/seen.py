"""Persisted seen sets: exact (sorted 16-byte duplicates under the crawl's key) and Bloom."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

from ..errors import StoreError
from ..seen import bloom_positions, bloom_size
from ..url import Fingerprint
from . import keys
from .context import WriteContext

if TYPE_CHECKING:
    from ..clock import Clock
    from .storage import LmdbStorage

log = logging.getLogger("crawlstore.seen")

__all__ = ["StoreBloomSeen", "StoreSeen"]


def _is_fp(fp: object) -> TypeGuard[bytes]:
    return isinstance(fp, bytes) and len(fp) == 16


class _Crawl:
    """Where a view finds its crawl's key prefix, looked up in each unit: a view never creates
    its crawl; a read of a crawl that does not exist sees nothing, and the first write creates
    it (a deleted crawl made again has a new prefix)."""

    __slots__ = ("clock", "name", "storage")

    def __init__(self, storage: LmdbStorage, name: str, clock: Clock) -> None:
        self.storage, self.name, self.clock = storage, name, clock

    def read(self) -> bytes | None:
        """In a unit: the prefix, or None."""
        return self.storage.crawl_key(self.name)

    def write(self) -> bytes:
        """In a write unit: the prefix, the crawl created when missing."""
        prefix = self.storage.crawl_key(self.name, create=self.clock())
        assert prefix is not None
        return prefix

    def counter(self, name: str) -> int:
        def read() -> int:
            prefix = self.read()
            return 0 if prefix is None else int(self.storage.totals_of(prefix).get(name, 0))

        return self.storage.view(read)


class StoreSeen:
    """An exact seen set in the store: about 24 bytes of file a URL, no memory held.

    Inside ``store.transaction()`` (as ``dedup_with`` uses it) its updates join the push.
    """

    def __init__(self, storage: LmdbStorage, crawl: str, clock: Clock) -> None:
        self._storage = storage
        self._crawl = _Crawl(storage, crawl, clock)

    def insert(self, fp: bytes) -> bool:
        """Record ``fp``; True when it was not seen before."""
        if not _is_fp(fp):
            raise TypeError(f"a fingerprint is 16 bytes: {fp!r}")

        def op(ctx: WriteContext) -> bool:
            key = self._crawl.write()
            new = bool(ctx.txn.put(key, fp, db=ctx.dbs["seen"], dupdata=False))
            if new:
                ctx.counters(key)["seen"] += 1
            return new

        return self._storage.run_ctx(op)

    def insert_many(self, fps: Sequence[bytes]) -> int:
        """Record each fingerprint, in one write; how many were not seen before."""
        for fp in fps:
            if not _is_fp(fp):
                raise TypeError(f"a fingerprint is 16 bytes: {fp!r}")

        def op(ctx: WriteContext) -> int:
            key = self._crawl.write()
            put, db = ctx.txn.put, ctx.dbs["seen"]
            new = sum(1 for fp in fps if put(key, fp, db=db, dupdata=False))
            if new:
                ctx.counters(key)["seen"] += new
            return new

        return self._storage.run_ctx(op) if fps else 0

    def __contains__(self, fp: object) -> bool:
        return isinstance(fp, bytes) and self.contains_many([fp])[0]

    def contains_many(self, fps: Sequence[object]) -> list[bool]:
        """Whether each fingerprint was seen, in one read."""

        def read() -> list[bool]:
            key = self._crawl.read()
            if key is None:
                return [False] * len(fps)
            find = self._storage.cursor("seen").set_key_dup
            return [_is_fp(fp) and bool(find(key, fp)) for fp in fps]

        return self._storage.view(read)

    def __iter__(self) -> Iterator[Fingerprint]:
        """Every fingerprint, in byte order (read in one short transaction)."""

        def read() -> list[Fingerprint]:
            key = self._crawl.read()
            cursor = self._storage.cursor("seen")
            if key is None or not cursor.set_key(key):
                return []
            return [Fingerprint(bytes(fp)) for fp in cursor.iternext_dup()]

        return iter(self._storage.view(read))

    def __len__(self) -> int:
        return self._crawl.counter("seen")


_CHUNK = 4080  # bytes of bits a record: one 4 KiB overflow page with its header
_CHUNK_BITS = _CHUNK * 8


class StoreBloomSeen:
    """A Bloom filter kept in the store, in page-sized chunks: about 1.2 bytes a URL at 1%.

    Its parameters are fixed by the crawl filter's first insert; opening it with others raises.
    """

    def __init__(
        self, storage: LmdbStorage, crawl: str, clock: Clock, expected: int, fp_rate: float
    ) -> None:
        self._storage = storage
        self._crawl = _Crawl(storage, crawl, clock)
        self.bits, self.hashes = bloom_size(expected, fp_rate)
        self.expected, self.fp_rate = expected, fp_rate
        self._params = {"expected": expected, "fp_rate": fp_rate, "bits": self.bits,
                        "hashes": self.hashes}  # fmt: skip
        self._check(storage.view(self._meta))

    def _check(self, meta: dict[str, Any] | None) -> None:
        if meta is not None and any(meta[k] != v for k, v in self._params.items()):
            raise StoreError(
                f"this crawl's Bloom filter was created with expected={meta['expected']}, "
                f"fp_rate={meta['fp_rate']}; open it with those"
            )

    def _meta(self) -> dict[str, Any] | None:
        """In a unit: the filter's parameters and count, None before its first insert."""
        prefix = self._crawl.read()
        if prefix is None:
            return None
        record: dict[str, Any] | None = self._storage.record("bloom", prefix + b"\x00")
        return record

    def insert(self, fp: bytes) -> bool:
        """Record ``fp``; True when it was not seen before (a false positive says False)."""
        return self.insert_many([fp]) == 1

    def insert_many(self, fps: Sequence[bytes]) -> int:
        """Record each fingerprint, in one write; how many were not seen before."""
        for fp in fps:
            if not _is_fp(fp):
                raise TypeError(f"a fingerprint is 16 bytes: {fp!r}")
        if not fps:
            return 0
        every = [bloom_positions(fp, self.bits, self.hashes) for fp in fps]

        def op(ctx: WriteContext) -> int:
            prefix = self._crawl.write()
            meta_key, chunks = prefix + b"\x00", prefix + b"\x01"
            meta = ctx.record("bloom", meta_key)
            if meta is None:
                meta = {**self._params, "n": 0}
                ctx.put_record("bloom", meta_key, meta)
            self._check(meta)  # another process may have created it since this view opened
            inserted = 0
            for positions in every:
                new = False
                for p in positions:
                    key = chunks + keys.u32(p // _CHUNK_BITS)
                    chunk = ctx.blob("bloom", key, _CHUNK)
                    byte, mask = (p % _CHUNK_BITS) >> 3, 0x80 >> (p & 7)
                    if not chunk[byte] & mask:
                        chunk[byte] |= mask
                        ctx.touch_blob("bloom", key)
                        new = True
                inserted += new
            if inserted:
                before = meta["n"]
                meta["n"] += inserted
                ctx.touch("bloom", meta_key)
                if before <= self.expected < meta["n"]:
                    log.warning(
                        "the store's Bloom filter holds %d fingerprints, past its expected %d: "
                        "false positives will exceed %.3g",
                        meta["n"],
                        self.expected,
                        self.fp_rate,
                    )
            return inserted

        return self._storage.run_ctx(op)

    def __contains__(self, fp: object) -> bool:
        return self.contains_many([fp])[0]

    def contains_many(self, fps: Sequence[object]) -> list[bool]:
        """Whether each fingerprint may have been seen (no false negatives), in one read."""
        every = [bloom_positions(fp, self.bits, self.hashes) if _is_fp(fp) else None
                 for fp in fps]  # fmt: skip
        ctx = self._storage.engine.current

        def read() -> list[bool]:
            prefix = self._crawl.read()
            if prefix is None:
                return [False] * len(fps)
            chunks = prefix + b"\x01"
            out = []
            if ctx is not None:
                blob = ctx.blob
                for positions in every:
                    out.append(positions is not None and all(
                        blob("bloom", chunks + keys.u32(p // _CHUNK_BITS), _CHUNK)[
                            (p % _CHUNK_BITS) >> 3] & (0x80 >> (p & 7))
                        for p in positions
                    ))  # fmt: skip
                return out
            txn, db = self._storage.txn(), self._storage.dbs["bloom"]
            got: dict[bytes, Any] = {}
            for positions in every:
                found = positions is not None
                for p in positions or ():
                    key = chunks + keys.u32(p // _CHUNK_BITS)
                    chunk = got[key] if key in got else got.setdefault(key, txn.get(key, db=db))
                    if chunk is None or not chunk[(p % _CHUNK_BITS) >> 3] & (0x80 >> (p & 7)):
                        found = False
                        break
                out.append(found)
            return out

        return self._storage.view(read)

    def __len__(self) -> int:
        meta = self._storage.view(self._meta)
        return int(meta["n"]) if meta is not None else 0
