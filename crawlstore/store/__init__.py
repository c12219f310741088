"""``Store``: one LMDB file holding crawls: their frontier, seen set and validators."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, overload

import lmdb

from ..clock import Clock, system_clock
from ..errors import InvalidArgument, StoreError
from ..frontier.core import set_defaults
from ..frontier.policy import Defaults
from ..frontier.protocol import _UNSET, QueueInfo, check_time
from .backup import copy_compacted
from .engine import DATABASES, FORMAT_VERSION, Durability, Engine
from .exchange import crawl_holds, export_store, load_store, new_crawl
from .frontier import StoreFrontier
from .seen import StoreBloomSeen, StoreSeen
from .storage import LmdbStorage
from .validators import StoreValidators
from .verify import verify

__all__ = [
    "FORMAT_VERSION",
    "Durability",
    "QueueInfo",
    "Store",
    "StoreBloomSeen",
    "StoreFrontier",
    "StoreSeen",
    "StoreValidators",
    "verify",
]

_DEFAULT_MAX_MAP = 2**40 if sys.maxsize > 2**32 else 2**30
#: URL schemes of stores on a Redis server or cluster (``crawlstore.redis``).
_REDIS_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")
#: The longest crawl name, in UTF-8 bytes (names are keys).
MAX_CRAWL_NAME = 200


def _durability(value: Durability | str) -> Durability:
    if value == "group":
        raise InvalidArgument(
            'durability="group" is now "nosync", named for what it risks: it may corrupt the '
            "file on power loss. For batch speed at the default durability, commit in groups "
            "with frontier.worker()"
        )
    try:
        return Durability(value)
    except ValueError:
        choices = ", ".join(repr(mode.value) for mode in Durability)
        raise InvalidArgument(f"durability is one of {choices}: {value!r:.100}") from None


class Store:
    """A crawl-state store in one file (plus LMDB's ``-lock`` file beside it).

    Open it with ``Store.open(path)``; it is a context manager. Several processes may open one
    file at once; within a process, every ``Store`` on a file shares one LMDB environment.
    """

    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._storage = LmdbStorage(engine)
        self.clock = clock
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: Durability | str = Durability.SAFE,
        clock: Clock = system_clock,
        readonly: bool = False,
        map_size: int = 64 * 2**20,
        max_map_size: int = _DEFAULT_MAX_MAP,
        flush_interval: float = 1.0,
    ) -> Store:
        """Open (or create) the store at ``path``; a URL ``redis://host:port/?ns=name`` or
        ``redis+cluster://host:port/?ns=name`` opens a store on Redis (``RedisStore``).

        ``durability``: ``"safe"`` (default: a power loss may lose the last commit, never
        corrupts), ``"full"`` or ``"nosync"`` (may corrupt on power loss), see ``Durability``.
        Group commit, which gives "safe" batch speed, is ``frontier.worker()``.
        ``map_size`` is where the memory map starts; it grows by itself up to ``max_map_size``,
        past which writes raise ``StoreFull``. ``readonly=True`` inspects a store while a crawl
        writes to it. Raises ``NotAStore`` or ``IncompatibleStore`` without touching the file.
        """
        if isinstance(path, str) and path.partition("://")[0] in _REDIS_SCHEMES:
            from ..redis import RedisStore

            if durability != Durability.SAFE:
                raise InvalidArgument(
                    "a store on Redis takes its durability from its servers: add strict=1 to "
                    "the URL for commits that a replica has too (see the Redis guide)"
                )
            return RedisStore.open_url(path, clock=clock, readonly=readonly)
        mode = _durability(durability)
        if not callable(clock):
            raise TypeError(f"clock must be a callable returning epoch seconds: {clock!r}")
        if map_size <= 0 or max_map_size <= 0:
            raise InvalidArgument(f"map sizes must be positive: {map_size}, {max_map_size}")
        if check_time("flush_interval", flush_interval, minimum=0) == 0:
            raise InvalidArgument("flush_interval must be more than 0 seconds")
        engine = Engine.acquire(
            path,
            durability=mode,
            readonly=readonly,
            map_size=min(map_size, max_map_size),
            max_map_size=max_map_size,
            flush_interval=flush_interval,
        )
        return cls(engine, clock)

    # -- properties -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._engine.path

    @property
    def location(self) -> str:
        """Where the store is: its file's path, or the URL of its server (no password)."""
        return str(self.path)

    @property
    def readonly(self) -> bool:
        return self._engine.readonly

    @property
    def durability(self) -> Durability:
        return self._engine.durability

    @property
    def meta(self) -> dict[str, Any]:
        """Format version, fingerprint version and creation time of the file."""
        return dict(self._engine.meta)

    def file_size(self) -> int:
        """Bytes the data file uses (LMDB never shrinks it; see ``backup``)."""
        return self._engine.used_bytes()

    def records_size(self) -> int:
        """Bytes of the file's pages that hold its records now: about what a compacted
        ``backup`` takes. The rest of ``file_size()`` is free pages, which LMDB reuses before
        it grows the file."""
        self._check_open()
        return self._engine.record_bytes()

    # -- crawls ---------------------------------------------------------------------------------

    @staticmethod
    def _check_name(name: object) -> str:
        if not isinstance(name, str) or not 0 < len(name.encode("utf-8")) <= MAX_CRAWL_NAME:
            raise InvalidArgument(
                f"a crawl name is a str of 1 to {MAX_CRAWL_NAME} bytes: {name!r:.100}"
            )
        return name

    def export(self, *, crawl: str = "default") -> Iterator[dict[str, Any]]:
        """The crawl as a stream of versioned records: its frontier (queues, URLs in every
        state, facade state, counters), seen set and validators, read from one snapshot while
        crawls go on writing. Nothing for a crawl that does not exist."""
        self._check_open()
        return self._export(self.frontier(crawl=self._check_name(crawl)))

    def _export(self, frontier: StoreFrontier) -> Iterator[dict[str, Any]]:
        return export_store(self._storage, frontier)

    def load(self, records: Iterable[dict[str, Any]], *, crawl: str | None = None) -> str:
        """Load an export into a crawl that holds nothing yet (the export's name unless
        ``crawl``), a thousand records a transaction; the crawl's name."""
        self._check_open()
        if crawl is not None:
            self._check_name(crawl)
        return self._load(records, crawl)

    def _load(self, records: Iterable[dict[str, Any]], crawl: str | None) -> str:
        return load_store(self._storage, lambda name: self.frontier(crawl=name), records, crawl)

    def new_crawl(self, name: str) -> contextlib.AbstractContextManager[StoreFrontier]:
        """Fill a crawl that holds nothing yet from another source (``load`` for anything but
        an export): the block gets the crawl's frontier and writes its seeds, seen set and
        facade state, as many transactions as it likes. A crawl that holds something raises
        ``InvalidArgument``; when the block raises, the crawl is removed again, so a fill that
        fails leaves no trace."""
        self._check_open()
        return new_crawl(self._holds, self.frontier(crawl=self._check_name(name)))

    def _holds(self, name: str) -> bool:
        """Whether the crawl holds anything (a frontier, seen set or validators)."""
        return crawl_holds(self._storage, name)

    def defaults(self) -> Defaults:
        """The store-wide policy every crawl inherits where it sets no value of its own."""
        self._check_open()
        return self._storage.view(self._storage.defaults)

    def set_defaults(
        self,
        *,
        delay: float = _UNSET,
        max_in_flight: int | Literal["auto"] | None = _UNSET,
        lease_time: float = _UNSET,
        active: bool = _UNSET,
    ) -> Defaults:
        """Change the store-wide policy (the URL Frontier's SetDelay with an empty key): each
        value given applies to every crawl and queue that does not set its own; ``active``
        False hands out nothing from any crawl until it is True again (the URL Frontier's
        SetActive). The new defaults."""
        self._check_open()
        changes = {name: value for name, value in (("delay", delay),
                   ("max_in_flight", max_in_flight), ("lease_time", lease_time),
                   ("active", active)) if value is not _UNSET}  # fmt: skip
        return set_defaults(self._storage, **changes)

    def crawls(self) -> list[str]:
        """The names of the crawls in this file."""
        self._check_open()
        return self._storage.view(self._storage.crawls)

    def delete_crawl(self, name: str) -> int:
        """Remove a crawl with everything it holds; how many URLs it knew (0: no such crawl)."""
        self._check_open()
        return self.frontier(crawl=self._check_name(name)).delete_crawl()

    # -- views ----------------------------------------------------------------------------------

    def frontier(
        self,
        order: str | None = None,
        *,
        crawl: str = "default",
        queues: str | None = None,
        delay: float | None = _UNSET,
        max_in_flight: int | Literal["auto"] | None = _UNSET,
        lease_time: float | None = _UNSET,
        reap_interval: float = 10.0,
    ) -> StoreFrontier:
        """The crawl's persistent frontier; every facade wraps it.

        ``order``: ``"priority"`` (the default), ``"fifo"`` or ``"lifo"``, and ``queues``:
        ``"single"`` (the default: one queue), ``"host"`` (one per host, one seed of each in
        flight by default) or a mode registered with ``register_queue_key``, are fixed when
        the crawl is created. ``delay`` (seconds between pops from one queue),
        ``max_in_flight`` (seeds of one queue in flight at once; ``None``: no cap; ``"auto"``:
        1 for host queues, no cap otherwise) and ``lease_time`` (seconds before a seed whose
        report never came goes back to its queue), when given, become the crawl's policy;
        left out, the crawl's stored policy applies. Leases of a process that is gone go back
        sooner, checked every ``reap_interval`` seconds.
        """
        self._check_open()
        return StoreFrontier(
            self._storage,
            crawl=self._check_name(crawl),
            clock=self.clock,
            order=order,
            queues=queues,
            delay=delay,  # left out (_UNSET): the crawl's stored value
            max_in_flight=max_in_flight,
            lease_time=lease_time,
            reap_interval=reap_interval,
        )

    @overload
    def seen(self, *, crawl: str = "default", bloom: None = None) -> StoreSeen: ...

    @overload
    def seen(self, *, crawl: str = "default", bloom: tuple[int, float]) -> StoreBloomSeen: ...

    def seen(
        self, *, crawl: str = "default", bloom: tuple[int, float] | None = None
    ) -> StoreSeen | StoreBloomSeen:
        """The crawl's exact seen set, or with ``bloom=(expected, fp_rate)`` its Bloom filter."""
        self._check_open()
        name = self._check_name(crawl)
        if bloom is None:
            return StoreSeen(self._storage, name, self.clock)
        expected, fp_rate = bloom
        return StoreBloomSeen(self._storage, name, self.clock, expected, fp_rate)

    def validators(self, *, crawl: str = "default") -> StoreValidators:
        """The crawl's validators (ETag, Last-Modified) by request fingerprint."""
        self._check_open()
        return StoreValidators(self._storage, self._check_name(crawl), self.clock)

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """Group operations of every view into one atomic commit; nested use joins, an
        exception rolls everything back."""
        self._check_open()
        return self._engine.transaction()

    def backup(self, path: str | os.PathLike[str], *, compact: bool = True) -> None:
        """Write a consistent copy of what is committed (one read snapshot) to ``path`` while
        crawls go on writing. ``compact``: only the records, in full pages (the file at rest);
        without it, LMDB's page-for-page copy, free pages included."""
        target = Path(path)
        if target.exists():
            raise StoreError(f"{target} exists: a backup never overwrites a file")
        self._check_open()
        engine = self._engine
        if not compact:
            try:
                engine.env.copy(str(target))
            except lmdb.Error as exc:
                raise StoreError(f"backup to {target} failed: {exc}") from None
            return
        tables = {
            name: (engine.dbs[name], flags)
            for name, flags in DATABASES.items()
            if name in engine.dbs  # a table an older file lacks is created when opened
        }

        def copy(txn: lmdb.Transaction) -> None:
            try:
                copy_compacted(txn, tables, target, engine.used_bytes())
            except lmdb.Error as exc:  # the copy's own errors, not the store's
                raise StoreError(f"backup to {target} failed: {exc}") from None

        engine.read_committed(copy)  # never the caller's uncommitted transaction

    # -- lifetime -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.path}: the store is closed")

    def close(self) -> None:
        """Close the store (the end of ``with``); its views raise ``StoreError`` afterwards."""
        if not self._closed:
            self._engine.release()
            self._closed = True

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.durability.value
        return f"<Store {str(self.path)!r} {state}{' readonly' if self.readonly else ''}>"
