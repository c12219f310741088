"""Moving a store on Redis from format 1 (every unit under one store-wide lock) to format 3
(units that commit bucket by bucket), in its own namespace: the steps over the server that
``crawlstore migrate redis://...`` (``admin/redis_move.py``) takes around the crawls' exports.
A store of format 2 (bucket by bucket, without the crawls' bounded indexes) migrates in place
instead: ``begin_indexing``, the indexes written through ``indexing()``, ``finish_indexing``.

1. ``begin``: the move takes the store lock of format 1 and never gives it back (a key
   without a ttl): a client of format 1 still connected waits at its next unit and fails; its
   writes never reach the store again. ``META`` gets ``moving``, where the exports go: a
   client that opens the store from then on is refused, naming the command.
2. ``reading()``: format 1, read under that lock, for the exports.
3. ``switch``: ``META`` says format 3; every other key of the namespace goes, but the lock
   and the fences (they only grow: a write of format 1 paused in flight stays refused).
4. ``writing()``: format 3, for the loads; ``finish``: ``META`` loses ``moving``.

A move that stops half way (a kill, a lost server) is finished by running it again: from step
1 while ``META`` says format 1, from step 3 (the exports complete) once it says format 3.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import msgpack

from ...errors import NotAStore, StoreError
from .keys import BLOOM, BLOOM_PARAMS, FENCE, FENCES, INDEXING, LOCK, META, TOTALS
from .partitioned import INDEXLESS_FORMAT, PARTITIONED_FORMAT, PartitionedRedisStorage
from .server import Address, Server
from .storage import RedisStorage
from .unit import Unit
from .viewdata import RedisViewData

if TYPE_CHECKING:
    from ...frontier.spi import CrawlRecord

__all__ = ["FormatMove"]

#: The value of the format-1 lock the move holds for good.
_HELD = b"moved to format 2 by crawlstore migrate"
_MOVING = b"moving"


class _Held(Unit):
    """A unit of format 1 that reads under the lock the move holds: it takes and extends no
    lock, and writes nothing."""

    def begin(self) -> None:
        self.started = time.monotonic()

    def read(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        return self.server.read(commands)

    def commit(self) -> None:
        if self.writes:
            raise StoreError(f"{self.server.address}: the move to format 2 writes nothing")

    def abort(self) -> None:
        self._drop()


class _BitsApart(RedisViewData):
    """An export's view of format 1 that leaves Bloom filters out: the move carries their
    bits as they lie (``FormatMove.bloom``)."""

    def bloom_params(self, ref: CrawlRecord) -> tuple[Any, ...] | None:
        return None


class _Reading(RedisStorage):
    """Format 1, read under the move's lock."""

    def __init__(self, server: Server) -> None:
        super().__init__(server, readonly=True, moving=True)
        self.view_data = _BitsApart(self)

    def _store_unit(self) -> Unit:
        return _Held(self.server, self._cache, self.tag)


class FormatMove:
    """The server side of a move to format 2 (see the module)."""

    def __init__(self, url: str) -> None:
        self.address = Address.parse(url)
        self.server = Server(self.address)
        self.tag = b"{" + self.address.ns.encode() + b"}"

    def close(self) -> None:
        self.server.close()

    def state(self) -> tuple[int, str | None, int]:
        """The store's format, where its move keeps the exports (None: no move began), and
        the fingerprint version its records hold."""
        read = [("HMGET", self.tag + META, b"app", b"format", _MOVING, b"fingerprint")]
        (app, version, moving, fingerprint) = self.server.read(read)[0]
        if app != b"crawlstore":
            raise NotAStore(f"{self.address}: the namespace holds no crawlstore store")
        return int(version), None if moving is None else moving.decode(), int(fingerprint)

    def begin(self, kept: str) -> None:
        """Take the lock of format 1 for good; say the move began, keeping exports in
        ``kept``."""
        lock = self.tag + LOCK
        taken, held = self.server.read([("SET", lock, _HELD, "NX"), ("GET", lock)])
        if not taken and held != _HELD:
            raise StoreError(
                f"{self.address}: a client holds the store lock: stop every client of the "
                f"store, then run the move again (the lock of a client that died lasts "
                f"{self.address.lock_ttl:g} s)"
            )
        self.server.read([("HSET", self.tag + META, _MOVING, kept)])

    def abandon(self) -> None:
        """Undo ``begin`` (a move that failed before it changed anything): the lock goes,
        ``META`` loses ``moving``."""
        if self.server.read([("GET", self.tag + LOCK)])[0] == _HELD:
            self.server.read([("DEL", self.tag + LOCK)])
        self.server.read([("HDEL", self.tag + META, _MOVING)])

    def reading(self) -> RedisStorage:
        """The store in format 1, read under the move's lock."""
        return _Reading(self.server)

    def switch(self) -> None:
        """Say format 2; delete every key but ``META``, the lock and the fences."""
        self.server.read([("HSET", self.tag + META, b"format", b"%d" % PARTITIONED_FORMAT)])
        tag = self.tag
        kept = {tag + META, tag + LOCK, tag + FENCES}
        keys = [key for pattern in (tag + b"*", tag[:-1] + b":*")
                for key in self.server.scan_keys(pattern)
                if key not in kept and not key.endswith(b"}" + FENCE)]  # fmt: skip
        for start in range(0, len(keys), 1000):
            self.server.read([("DEL", key) for key in keys[start : start + 1000]])

    def bloom(self, storage: RedisStorage, crawl: str) -> bytes | None:
        """The crawl's Bloom filter as it lies (its parameters, count, and each part's bits, in
        msgpack), None when it keeps none."""

        def read() -> bytes | None:
            ref = storage.view_data.crawl_ref(crawl)
            raw = None if ref is None else storage.unit().hget(storage.crawl_tag(ref) + TOTALS,
                                                               BLOOM_PARAMS)  # fmt: skip
            if ref is None or raw is None:
                return None
            params = msgpack.unpackb(raw)
            bits = storage.unit().read([("GET", key) for key in _parts(storage, ref, params)])
            count = storage.totals(ref).get("seen", 0)
            packed: bytes = msgpack.packb({"params": params, "count": count, "bits": bits})
            return packed

        return storage.view(read)

    def put_bloom(self, storage: RedisStorage, crawl: str, packed: bytes) -> None:
        """Give the crawl (loaded, with no seen set) the Bloom filter ``bloom`` read."""
        record = msgpack.unpackb(packed)
        params, bits = tuple(record["params"]), record["bits"]

        def create() -> list[bytes]:
            ref = storage.view_data.crawl_ref(crawl)
            assert ref is not None
            keys = _parts(storage, ref, params)
            storage.view_data.bloom_create(ref, params, len(keys), math.ceil(params[2] / len(keys)))
            storage.view_data.add_view_count(ref, "bloom", int(record["count"]))
            return keys

        keys = storage.run(create)
        if len(keys) != len(bits):
            raise StoreError(f"{self.address}: crawl {crawl!r}: the Bloom filter's parts differ")
        self.server.read([("SET", key, part) for key, part in zip(keys, bits, strict=True) if part])

    def writing(self) -> RedisStorage:
        """The store in format 2, for the loads."""
        return PartitionedRedisStorage(self.server, moving=True)

    def finish(self) -> None:
        self.server.read([("HDEL", self.tag + META, _MOVING)])

    # -- format 2 to 3, in place -----------------------------------------------------------------

    def begin_indexing(self) -> None:
        """Say a migration in place began: an open is refused until ``finish_indexing``."""
        self.server.read([("HSET", self.tag + META, _MOVING, INDEXING.encode())])

    def indexing(self, fingerprint: int) -> RedisStorage:
        """The store of format 2 as format 3, for its indexes to be written (at the
        fingerprint version its records hold)."""
        return PartitionedRedisStorage(self.server, moving=True, older=INDEXLESS_FORMAT,
                                       fingerprint=fingerprint)  # fmt: skip

    def finish_indexing(self) -> None:
        self.server.read([("HSET", self.tag + META, b"format", b"%d" % PARTITIONED_FORMAT),
                          ("HDEL", self.tag + META, _MOVING)])  # fmt: skip


def _parts(storage: RedisStorage, ref: CrawlRecord, params: Any) -> list[bytes]:
    """The keys of a Bloom filter's parts (``viewdata.py``)."""
    parts = storage.view_data.bloom_parts(int(params[2]))
    step = storage.buckets // parts
    return [storage.bucket_tag(ref, part) + BLOOM for part in range(0, storage.buckets, step)]
