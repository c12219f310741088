"""Where a store on Redis keeps what the store's views hold (``crawlstore.views``), each entry in
the bucket of its fingerprint (the bucket its URL lives in, so a report and its validators are
one commit anyway):

- the exact seen set of kind ``packed`` (the default): small hashes of the fingerprints, less
  the bits their bucket gives, about 22 bytes a URL on Redis 7 (``:sp:N``, 64 a bucket); of
  kind ``set``: a set of 16-byte fingerprints a bucket, about 75 bytes a URL (``:se``). The
  kind is kept in the crawl's totals hash (``~seen``);
- the Bloom filter: strings of bits set with ``BITFIELD`` (``:bl``), one for a small filter, up
  to one a bucket for a large one; its parameters in the totals hash (``~bloom``);
- validators: a hash a bucket (``:v``), fingerprint -> msgpack [etag, last modified, time].

Counts are the crawl's totals (the Bloom filter's is ``seen``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgpack

from ...errors import InvalidArgument, InvalidSnapshot
from .keys import (
    BLOOM,
    BLOOM_PARAMS,
    SEEN,
    SEEN_KIND,
    TOTALS,
    VALIDATORS,
)

if TYPE_CHECKING:
    from ...frontier.spi import CrawlRecord
    from .storage import RedisStorage

__all__ = ["PARTS", "SEEN_KINDS", "RedisViewData"]

#: Hashes of the packed seen set per bucket (a fingerprint's third byte picks one).
PARTS = 64
SEEN_KINDS = ("packed", "set")
#: The smallest part of a Bloom filter, in bits: a small filter takes fewer, larger parts, as
#: the uneven number of fingerprints each of 1,024 tiny ones gets would raise its
#: false-positive rate.
_BLOOM_PART = 65536


class RedisViewData:
    """The view primitives of ``RedisStorage`` (which it is mixed into); a crawl's handle is its
    ``CrawlRecord``."""

    seen_kinds: tuple[str, ...] = SEEN_KINDS

    def __init__(self, storage: RedisStorage) -> None:
        self._s = storage

    def crawl_ref(self, name: str) -> CrawlRecord | None:
        return self._s.crawl(name)

    def view_count(self, ref: CrawlRecord, name: str) -> int:
        return self._s.totals(ref).get("seen" if name == "bloom" else name, 0)

    def add_view_count(self, ref: CrawlRecord, name: str, n: int) -> int:
        name = "seen" if name == "bloom" else name
        before = self._s.totals(ref).get(name, 0)
        self._s.add_totals(ref, {name: n})
        return before

    # -- the exact seen set ---------------------------------------------------------------------

    def seen_mark(self, ref: CrawlRecord, kind: str, *, write: bool) -> str | None:
        key, u = self._s.crawl_tag(ref) + TOTALS, self._s.unit()
        stored = u.hget(key, SEEN_KIND)
        if stored is None and write:
            u.hset(key, SEEN_KIND, kind.encode())
            return kind
        return stored.decode() if stored is not None else None

    def _seen_at(self, ref: CrawlRecord, kind: str, fp: bytes) -> tuple[bytes, bytes]:
        bucket = self._s.fp_bucket(ref, fp)
        if kind == "set":
            return bucket + SEEN, fp
        return bucket + b":sp:%d" % (fp[2] % PARTS), fp[self._s.fp_skip :]

    def seen_has(self, ref: CrawlRecord, kind: str, fps: Sequence[bytes]
                 ) -> list[bool]:  # fmt: skip
        u = self._s.unit()
        wheres = [self._seen_at(ref, kind, fp) for fp in fps]
        grouped: dict[bytes, list[bytes]] = {}
        for key, field in wheres:
            grouped.setdefault(key, []).append(field)
        if kind == "set":
            known: dict[tuple[bytes, bytes], bool] = {}
            for key, members in grouped.items():
                known.update(((key, m), found) for m, found in
                             zip(members, u.smembers_known(key, members), strict=True))  # fmt: skip
            return [known[where] for where in wheres]
        if len(grouped) > 1:
            self._s.prefetch_fields(grouped)
        return [u.hget(key, field) is not None for key, field in wheres]

    def seen_add(self, ref: CrawlRecord, kind: str, fps: Sequence[bytes]) -> int:
        u, unique = self._s.unit(), list(dict.fromkeys(fps))
        new = [fp for fp, known in zip(unique, self.seen_has(ref, kind, unique), strict=True)
               if not known]  # fmt: skip
        for fp in new:
            key, field = self._seen_at(ref, kind, fp)
            if kind == "set":
                u.sadd(key, field)
            else:
                u.hset(key, field, b"")
        return len(new)

    def seen_all(self, ref: CrawlRecord, kind: str) -> Iterator[bytes]:
        u, out = self._s.unit(), []
        for bucket in range(self._s.buckets):
            tag = self._s.bucket_tag(ref, bucket)
            if kind == "set":
                out.extend(u.read([("SMEMBERS", tag + SEEN)])[0])
                continue
            # The leading bytes the bucket decides for all its fingerprints (a packed entry
            # keeps the rest).
            lead = ((bucket << self._s.shift) & 0xFFFF).to_bytes(2, "big")[: self._s.fp_skip]
            keys = [tag + b":sp:%d" % part for part in range(PARTS)]
            for fields in u.read([("HKEYS", key) for key in keys]):
                out.extend(lead + f for f in fields)
        return iter(sorted(out))

    # -- the Bloom filter -----------------------------------------------------------------------

    def bloom_parts(self, bits: int) -> int:
        parts = self._s.buckets
        while parts > 1 and bits / parts < _BLOOM_PART:
            parts //= 2
        return parts

    def bloom_part(self, fp: bytes, parts: int) -> int:
        spread = self._s.buckets // parts  # buckets a part stands for: it lives in the first
        return self._s.fp_index(fp) // spread * spread

    def _bloom_key(self, ref: CrawlRecord, part: int) -> bytes:
        return self._s.bucket_tag(ref, part) + BLOOM

    def bloom_params(self, ref: CrawlRecord) -> tuple[Any, ...] | None:
        raw = self._s.unit().hget(self._s.crawl_tag(ref) + TOTALS, BLOOM_PARAMS)
        return None if raw is None else tuple(msgpack.unpackb(raw))

    def bloom_create(self, ref: CrawlRecord, params: tuple[Any, ...], parts: int,
                     part_bits: int) -> None:  # fmt: skip
        u = self._s.unit()
        u.hset(self._s.crawl_tag(ref) + TOTALS, BLOOM_PARAMS, msgpack.packb(list(params)))
        for part in range(0, self._s.buckets, self._s.buckets // parts):
            u.allocate(self._bloom_key(ref, part), (part_bits + 7) // 8)

    def bloom_get(self, ref: CrawlRecord, part: int, positions: Sequence[int]
                  ) -> list[bool]:  # fmt: skip
        key = self._bloom_key(ref, part)
        return [bool(b) for b in self._s.unit().getbits(key, list(positions))]

    def bloom_set(self, ref: CrawlRecord, part: int, positions: Sequence[int]
                  ) -> None:  # fmt: skip
        self._s.unit().setbits(self._bloom_key(ref, part), list(positions))

    def bloom_chunks(self, ref: CrawlRecord) -> Iterator[tuple[int, bytes]]:
        raise InvalidArgument(
            f"crawl {ref.name!r} keeps a Bloom seen set on Redis, which an export does not carry "
            "(its bits are laid out per bucket); export a crawl with an exact seen set"
        )

    def load_bloom(self, ref: CrawlRecord, params: tuple[Any, ...], count: int) -> None:
        self.put_bloom_chunk(ref, 0, b"")

    def put_bloom_chunk(self, ref: CrawlRecord, chunk: int, bits: bytes) -> None:
        raise InvalidSnapshot(
            "the export holds a Bloom seen set, which a store on Redis cannot take over (its "
            "bits are laid out per bucket): export the crawl with an exact seen set"
        )

    # -- validators -----------------------------------------------------------------------------

    def validator(self, ref: CrawlRecord, fp: bytes) -> list[Any] | None:
        raw = self._s.unit().hget(self._s.fp_bucket(ref, fp) + VALIDATORS, fp)
        return None if raw is None else list(msgpack.unpackb(raw, raw=False))

    def put_validator(self, ref: CrawlRecord, fp: bytes, record: list[Any] | None
                      ) -> bool:  # fmt: skip
        u, key = self._s.unit(), self._s.fp_bucket(ref, fp) + VALIDATORS
        existed = u.hget(key, fp) is not None
        u.hset(key, fp, None if record is None else msgpack.packb(record))
        return existed

    def validators_all(self, ref: CrawlRecord) -> Iterator[tuple[bytes, list[Any]]]:
        for bucket in range(self._s.buckets):
            records = self._s.unit().hgetall(self._s.bucket_tag(ref, bucket) + VALIDATORS)
            for fp in sorted(records):
                yield fp, list(msgpack.unpackb(records[fp], raw=False))
