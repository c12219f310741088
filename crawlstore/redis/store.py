"""``RedisStore``: a store on Redis or a Redis Cluster, with the file store's views."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, overload

from ..clock import Clock, system_clock
from ..errors import OlderFormat, StoreError
from ..frontier.refingerprint import carry_over, refingerprint
from ..store import Store
from ..store.engine import Durability
from ..store.frontier import StoreFrontier
from ..url import FINGERPRINT_VERSION
from .exchange import crawl_holds, export_crawl, load_crawl
from .server import Address, Server
from .storage import RedisStorage
from .views import RedisBloomSeen, RedisSeen, RedisValidators

__all__ = ["RedisStore"]


class RedisStore(Store):
    """A crawl-state store on Redis (``redis://host:port/db?ns=name``) or a Redis Cluster
    (``redis+cluster://host:port/?ns=name``): the same frontier, seen sets and validators as
    a file store, shared by processes on many machines. Open it with ``Store.open(url)``.

    Options in the URL: ``ns`` (the namespace: several stores may share a server),
    ``strict=1`` (each commit waits for a replica; the servers must fsync every write),
    ``lock_ttl`` (seconds before the store lock of a process that died is taken over, 10),
    ``buckets`` (per crawl, a power of 2, fixed when the store is created, 1024).
    """

    def __init__(self, storage: RedisStorage, clock: Clock) -> None:
        self._redis = storage
        self._storage = storage  # type: ignore[assignment]
        self.clock = clock
        self._closed = False

    @classmethod
    def open_url(cls, url: str, *, clock: Clock = system_clock, readonly: bool = False
                 ) -> RedisStore:  # fmt: skip
        """Connect to the store at ``url``, creating it when the namespace is empty
        (``readonly``: every write raises ``ReadOnlyStore``)."""
        if not callable(clock):
            raise TypeError(f"clock must be a callable returning epoch seconds: {clock!r}")
        server = Server(Address.parse(url))
        try:
            return cls(RedisStorage(server, readonly=readonly), clock)
        except OlderFormat:
            if readonly:
                server.close()
                raise
        older = int(RedisStorage(server, fingerprint=1).meta["fingerprint"])
        store = cls(RedisStorage(server, fingerprint=older), clock)
        store._migrate_fingerprints()
        return store

    def _migrate_fingerprints(self) -> None:
        """Move every crawl's URLs to this crawlstore's fingerprints, a crawl a unit (so a
        migration cut short is taken up by the next open), and record the version last."""
        for name in self.crawls():
            with self.transaction():
                moved = refingerprint(self.frontier(crawl=name).core)
                if moved:
                    kind, params = self._redis.seen_kind(name)
                    seen: RedisSeen | RedisBloomSeen | None = None
                    if kind == "bloom":
                        seen = self.seen(crawl=name, bloom=(params[0], params[1]))
                    elif kind:
                        seen = self.seen(crawl=name, kind=kind)
                    carry_over(moved, seen, self.validators(crawl=name))
        self._redis.set_fingerprint(FINGERPRINT_VERSION)

    # -- what a file has and a server does not --------------------------------------------------

    @property
    def url(self) -> str:
        """Where the store is, without its password."""
        return str(self._redis.server.address)

    @property
    def location(self) -> str:
        return self.url

    @property
    def path(self) -> Path:
        raise StoreError(f"{self.url} is a store on Redis: it has no path (see .url)")

    @property
    def readonly(self) -> bool:
        return self._redis.readonly

    @property
    def durability(self) -> Durability:
        return Durability.FULL if self._redis.server.address.strict else Durability.SAFE

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self._redis.meta)

    def file_size(self) -> int:
        raise StoreError(f"{self.url} is a store on Redis: see used_memory in INFO memory")

    def records_size(self) -> int:
        return self.file_size()

    def backup(self, path: Any, *, compact: bool = True) -> None:
        raise StoreError(f"{self.url} is a store on Redis: back it up with the server's RDB or "
                         "AOF files, or copy crawls with export()")  # fmt: skip

    def _export(self, frontier: StoreFrontier) -> Iterator[dict[str, Any]]:
        # Each record is read in a unit of its own: consistent per record, not one snapshot
        # (there is none across a cluster); a Bloom seen set is not exported.
        return export_crawl(self._redis, frontier)

    def _load(self, records: Iterable[dict[str, Any]], crawl: str | None) -> str:
        return load_crawl(self._redis, lambda name: self.frontier(crawl=name), records, crawl,
                          self.clock)  # fmt: skip

    def _holds(self, name: str) -> bool:
        return crawl_holds(self._redis, name)

    # -- views ----------------------------------------------------------------------------------

    @overload  # type: ignore[override]
    def seen(self, *, crawl: str = "default", bloom: None = None,
             kind: str = "packed") -> RedisSeen: ...  # fmt: skip

    @overload
    def seen(self, *, crawl: str = "default", bloom: tuple[int, float],
             kind: str = "packed") -> RedisBloomSeen: ...  # fmt: skip

    def seen(
        self, *, crawl: str = "default", bloom: tuple[int, float] | None = None,
        kind: str = "packed",
    ) -> RedisSeen | RedisBloomSeen:  # fmt: skip
        """The crawl's exact seen set (``kind``: ``"packed"``, about 22 bytes of RAM a URL, or
        ``"set"``, about 75), or with ``bloom=(expected, fp_rate)`` its Bloom filter."""
        self._check_open()
        name = self._check_name(crawl)
        if bloom is None:
            return RedisSeen(self._redis, name, self.clock, kind)
        expected, fp_rate = bloom
        return RedisBloomSeen(self._redis, name, self.clock, expected, fp_rate)

    def validators(self, *, crawl: str = "default") -> RedisValidators:  # type: ignore[override]
        """The crawl's validators (ETag, Last-Modified) by request fingerprint."""
        self._check_open()
        return RedisValidators(self._redis, self._check_name(crawl), self.clock)

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """Group operations of every view into one atomic commit; nested use joins, an
        exception rolls everything back."""
        self._check_open()
        return self._redis.transaction()

    # -- lifetime -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.url}: the store is closed")

    def close(self) -> None:
        if not self._closed:
            self._redis.server.close()
            self._closed = True

    def __repr__(self) -> str:
        return f"<RedisStore {self.url!r}{' closed' if self._closed else ''}>"
