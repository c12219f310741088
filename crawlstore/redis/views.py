"""Seen sets and validators of a store on Redis, each entry in the bucket of its fingerprint
(the bucket its URL lives in, so a report and its validators are one commit anyway).

Seen sets come in three kinds, fixed by how they are opened:

- ``packed`` (the default): exact; small hashes of the fingerprints (less the bits their
  bucket gives), about 22 bytes a URL on Redis 7;
- ``set``: exact; a set of 16-byte fingerprints per bucket, about 75 bytes a URL;
- Bloom: ``BITFIELD`` bits per bucket, about 1.2 bytes a URL at 1%.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import msgpack

from ..errors import InvalidArgument, StoreError
from ..frontier.policy import CrawlPolicy
from ..frontier.spi import CrawlRecord
from ..seen import bloom_positions, bloom_size
from ..url import Fingerprint
from ..validators import Validator

if TYPE_CHECKING:
    from ..clock import Clock
    from .storage import RedisStorage

__all__ = ["RedisBloomSeen", "RedisSeen", "RedisValidators"]

log = logging.getLogger("crawlstore.seen")
#: Hashes of the packed seen set per bucket (a fingerprint's third byte picks one).
PARTS = 64
SEEN_KINDS = ("packed", "set")


def _is_fp(fp: object) -> TypeGuard[bytes]:
    return isinstance(fp, bytes) and len(fp) == 16


def _check_fps(fps: Sequence[object]) -> None:
    for fp in fps:
        if not _is_fp(fp):
            raise TypeError(f"a fingerprint is 16 bytes: {fp!r:.100}")


class _View:
    """A view of one crawl: it never creates the crawl to read; its first write does."""

    def __init__(self, storage: RedisStorage, crawl: str, clock: Clock) -> None:
        self._storage, self._name, self._clock = storage, crawl, clock

    def _read(self) -> CrawlRecord | None:
        return self._storage.crawl(self._name)

    def _write(self) -> CrawlRecord:
        crawl = self._storage.crawl(self._name)
        if crawl is None:
            crawl = CrawlRecord(self._name, CrawlPolicy(), self._clock(), settled=False)
            self._storage.save_crawl(crawl)
        return crawl

    def _count(self, crawl: CrawlRecord, name: str, n: int) -> None:
        if n:
            self._storage.add_totals(crawl, {name: n})

    def _counter(self, name: str) -> int:
        def read() -> int:
            crawl = self._read()
            return 0 if crawl is None else self._storage.totals(crawl).get(name, 0)

        return self._storage.view(read)


class _Seen(_View):
    """What both kinds of seen set share: one insert is a batch of one."""

    def insert(self, fp: bytes) -> bool:
        """Record ``fp``; True when it was not seen before (a Bloom filter's false positive
        says False)."""
        return self.insert_many([fp]) == 1

    def insert_many(self, fps: Sequence[bytes]) -> int:
        """Record each fingerprint, in one write; how many were not seen before."""
        _check_fps(fps)
        return self._storage.run(lambda: self._insert(fps)) if fps else 0

    def _insert(self, fps: Sequence[bytes]) -> int:
        raise NotImplementedError


class RedisSeen(_Seen):
    """An exact seen set on Redis (``kind``: ``"packed"`` or ``"set"``, fixed by the crawl's
    first insert). Inside ``store.transaction()`` its updates join the push."""

    def __init__(self, storage: RedisStorage, crawl: str, clock: Clock, kind: str) -> None:
        if kind not in SEEN_KINDS:
            raise InvalidArgument(f"an exact seen set is one of {SEEN_KINDS}: {kind!r}")
        super().__init__(storage, crawl, clock)
        self.kind = kind

    def _check_kind(self, crawl: CrawlRecord, *, write: bool) -> None:
        key = self._storage._crawl_tag(crawl) + b":t"
        u = self._storage.u()
        stored = u.hget(key, b"~seen")
        if stored is None and write:
            u.hset(key, b"~seen", self.kind.encode())
        elif stored is not None and stored.decode() != self.kind:
            raise StoreError(
                f"crawl {self._name!r} keeps its seen set as {stored.decode()!r}; open it with "
                f"seen(kind={stored.decode()!r})"
            )

    def _where(self, crawl: CrawlRecord, fp: bytes) -> tuple[bytes, bytes]:
        bucket = self._storage.fp_bucket(crawl, fp)
        if self.kind == "set":
            return bucket + b":se", fp
        return bucket + b":sp:%d" % (fp[2] % PARTS), fp[self._storage.fp_skip :]

    def _has(self, crawl: CrawlRecord, fps: Sequence[bytes]) -> list[bool]:
        u = self._storage.u()
        if self.kind == "set":
            by_key: dict[bytes, list[bytes]] = {}
            for fp in fps:
                by_key.setdefault(self._where(crawl, fp)[0], []).append(fp)
            known: dict[bytes, bool] = {}
            for key, members in by_key.items():
                known.update(zip(members, u.smembers_known(key, members), strict=True))
            return [known[fp] for fp in fps]
        wheres = [self._where(crawl, fp) for fp in fps]
        grouped: dict[bytes, list[bytes]] = {}
        for key, field in wheres:
            grouped.setdefault(key, []).append(field)
        if len(grouped) > 1:
            self._storage.prefetch_fields(grouped)
        return [u.hget(key, field) is not None for key, field in wheres]

    def _insert(self, fps: Sequence[bytes]) -> int:
        crawl = self._write()
        self._check_kind(crawl, write=True)
        u, new = self._storage.u(), 0
        unique = list(dict.fromkeys(fps))
        for fp, seen in zip(unique, self._has(crawl, unique), strict=True):
            if not seen:
                key, field = self._where(crawl, fp)
                if self.kind == "set":
                    u.sadd(key, field)
                else:
                    u.hset(key, field, b"")
                new += 1
        self._count(crawl, "seen", new)
        return new

    def __contains__(self, fp: object) -> bool:
        return _is_fp(fp) and self.contains_many([fp])[0]

    def contains_many(self, fps: Sequence[object]) -> list[bool]:
        """Whether each fingerprint was seen, in one read."""

        def read() -> list[bool]:
            crawl = self._read()
            good = [fp for fp in fps if _is_fp(fp)]
            if crawl is None or not good:
                return [False] * len(fps)
            self._check_kind(crawl, write=False)
            found = dict(zip(good, self._has(crawl, good), strict=True))
            return [_is_fp(fp) and found[fp] for fp in fps]

        return self._storage.view(read)

    def __iter__(self) -> Iterator[Fingerprint]:
        """Every fingerprint, in byte order (read in one unit)."""

        def read() -> list[Fingerprint]:
            crawl = self._read()
            if crawl is None:
                return []
            self._check_kind(crawl, write=False)
            u, out = self._storage.u(), []
            for bucket in range(self._storage.buckets):
                tag = self._storage.bucket_tag(crawl, bucket)
                if self.kind == "set":
                    out.extend(u.read([("SMEMBERS", tag + b":se")])[0])
                    continue
                keys = [tag + b":sp:%d" % part for part in range(PARTS)]
                for hkeys in u.read([("HKEYS", key) for key in keys]):
                    out.extend(_prefix(bucket, self._storage) + f for f in hkeys)
            return sorted(Fingerprint(fp) for fp in out)

        return iter(self._storage.view(read))

    def __len__(self) -> int:
        return self._counter("seen")


def _prefix(bucket: int, storage: RedisStorage) -> bytes:
    """The leading bytes the bucket decides for all its fingerprints (a packed entry keeps the
    rest)."""
    return ((bucket << storage._shift) & 0xFFFF).to_bytes(2, "big")[: storage.fp_skip]


class RedisBloomSeen(_Seen):
    """A Bloom filter on Redis: strings of bits set with ``BITFIELD`` (one for a small filter,
    up to one a bucket for a large one), about 1.2 bytes a URL at 1%. Its parameters are fixed
    by the crawl filter's first insert."""

    def __init__(self, storage: RedisStorage, crawl: str, clock: Clock, expected: int,
                 fp_rate: float) -> None:  # fmt: skip
        super().__init__(storage, crawl, clock)
        self.bits, self.hashes = bloom_size(expected, fp_rate)
        self.expected, self.fp_rate = expected, fp_rate
        # Partitions of at least 64 Kibit each (one string in one bucket): fewer, larger
        # partitions for a small filter, whose false-positive rate would suffer from the
        # uneven number of fingerprints each of 1,024 tiny ones gets.
        parts = storage.buckets
        while parts > 1 and self.bits / parts < 65536:
            parts //= 2
        self._spread = storage.buckets // parts  # buckets a partition stands for
        self._part_bits = math.ceil(self.bits / parts)
        self._params = [expected, fp_rate, self.bits, self.hashes]
        storage.view(lambda: self._meta(write=False))

    def _meta(self, *, write: bool) -> CrawlRecord | None:
        crawl = self._write() if write else self._read()
        if crawl is None:
            return None
        key = self._storage._crawl_tag(crawl) + b":t"
        u = self._storage.u()
        raw = u.hget(key, b"~bloom")
        if raw is None:
            if write:
                u.hset(key, b"~bloom", msgpack.packb(self._params))
                for first in range(0, self._storage.buckets, self._spread):
                    u.allocate(self._storage.bucket_tag(crawl, first) + b":bl",
                               (self._part_bits + 7) // 8)  # fmt: skip
            return crawl
        stored = msgpack.unpackb(raw)
        if stored != self._params:
            raise StoreError(
                f"this crawl's Bloom filter was created with expected={stored[0]}, "
                f"fp_rate={stored[1]}; open it with those"
            )
        return crawl

    def _positions(self, crawl: CrawlRecord, fp: bytes) -> tuple[bytes, list[int]]:
        first = self._storage.fp_index(fp) // self._spread * self._spread
        key = self._storage.bucket_tag(crawl, first) + b":bl"
        return key, bloom_positions(fp, self._part_bits, self.hashes)

    def _bits(self, wanted: list[tuple[bytes, list[int]]]) -> list[bool]:
        u = self._storage.u()
        by_key: dict[bytes, list[int]] = {}
        for key, positions in wanted:
            by_key.setdefault(key, []).extend(positions)
        found: dict[tuple[bytes, int], int] = {}
        for key, positions in by_key.items():
            bits = u.getbits(key, positions)
            found.update(((key, p), b) for p, b in zip(positions, bits, strict=True))
        return [all(found[(key, p)] for p in positions) for key, positions in wanted]

    def _insert(self, fps: Sequence[bytes]) -> int:
        crawl = self._meta(write=True)
        assert crawl is not None
        u, new = self._storage.u(), 0
        wanted = [self._positions(crawl, fp) for fp in dict.fromkeys(fps)]
        for (key, positions), seen in zip(wanted, self._bits(wanted), strict=True):
            if not seen:
                u.setbits(key, positions)
                new += 1
        before = self._storage.totals(crawl).get("seen", 0)
        self._count(crawl, "seen", new)
        if before <= self.expected < before + new:
            log.warning("the store's Bloom filter holds %d fingerprints, past its expected "
                        "%d: false positives will exceed %.3g", before + new, self.expected,
                        self.fp_rate)  # fmt: skip
        return new

    def __contains__(self, fp: object) -> bool:
        return self.contains_many([fp])[0]

    def contains_many(self, fps: Sequence[object]) -> list[bool]:
        """Whether each fingerprint may have been seen (no false negatives), in one read."""

        def read() -> list[bool]:
            crawl = self._meta(write=False)
            good = [fp for fp in fps if _is_fp(fp)]
            if crawl is None or not good:
                return [False] * len(fps)
            bits = self._bits([self._positions(crawl, fp) for fp in good])
            found = dict(zip(good, bits, strict=True))
            return [_is_fp(fp) and found[fp] for fp in fps]

        return self._storage.view(read)

    def __len__(self) -> int:
        return self._counter("seen")


class RedisValidators(_View):
    """Validators keyed by request fingerprint, in the bucket of the URL: inside
    ``store.transaction()`` a ``put`` commits with the page's report."""

    @staticmethod
    def _check(fp: object) -> bytes:
        if not _is_fp(fp):
            raise TypeError(f"a fingerprint is 16 bytes: {fp!r:.100}")
        return fp

    def _record(self, fp: bytes) -> Any:
        def read() -> Any:
            crawl = self._read()
            if crawl is None:
                return None
            raw = self._storage.u().hget(self._storage.fp_bucket(crawl, fp) + b":v", fp)
            return msgpack.unpackb(raw, raw=False) if raw is not None else None

        return self._storage.view(read)

    def get(self, fp: bytes) -> Validator | None:
        """The validators stored for ``fp``, or None."""
        record = self._record(self._check(fp))
        if record is None:
            return None
        validator, _ = Validator.lenient(record[0], record[1])
        return validator or None

    def stored_at(self, fp: bytes) -> float | None:
        """When the validators of ``fp`` were recorded."""
        record = self._record(self._check(fp))
        return float(record[2]) if record is not None else None

    def _change(self, fp: bytes, value: bytes | None) -> None:
        crawl = self._write() if value is not None else self._read()
        if crawl is None:
            return
        u, key = self._storage.u(), self._storage.fp_bucket(crawl, fp) + b":v"
        existed = u.hget(key, fp) is not None
        u.hset(key, fp, value)
        self._count(crawl, "validators", (value is not None) - existed)

    def put(self, fp: bytes, validator: Validator) -> None:
        """Store ``validator``; an empty one deletes what was stored."""
        self._check(fp)
        if not isinstance(validator, Validator):
            raise TypeError(f"expected a Validator, not {type(validator).__name__}")
        value = (
            msgpack.packb([validator.etag, validator.last_modified, self._clock()])
            if validator
            else None
        )
        self._storage.run(lambda: self._change(fp, value))

    def delete(self, fp: bytes) -> None:
        """Forget the validators of ``fp``."""
        self._check(fp)
        self._storage.run(lambda: self._change(fp, None))

    def __len__(self) -> int:
        return self._counter("validators")
