"""``Store``: crawls (their frontier, seen set and validators) in one file, or on a Redis server
or cluster: one façade over whichever storage the target names."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, overload

from .clock import Clock, SyncedClock, system_clock
from .errors import InvalidArgument, StoreError
from .exchange import export_crawl, load_crawl, new_crawl
from .frontier.core import CoreFrontier, set_defaults
from .frontier.policy import Defaults
from .frontier.protocol import UNSET, QueueInfo, check_time
from .frontier.refingerprint import carry_over, refingerprint
from .frontier.reindex import reindex
from .frontier.spi import Capabilities, Durability, StoreStorage
from .storages import FORMAT_VERSION, open_store, verify
from .storages import migrate_file as migrate
from .url import FINGERPRINT_VERSION
from .views import StoreBloomSeen, StoreSeen, StoreValidators, seen_kind

__all__ = [
    "FORMAT_VERSION",
    "Durability",
    "QueueInfo",
    "Store",
    "StoreBloomSeen",
    "StoreSeen",
    "StoreValidators",
    "migrate",
    "verify",
]

#: The longest crawl name, in UTF-8 bytes (names are keys).
MAX_CRAWL_NAME = 200


def __getattr__(name: str) -> Any:
    if name == "StoreFrontier":
        warnings.warn("StoreFrontier is CoreFrontier, what store.frontier() returns; the name "
                      "goes in the next release", DeprecationWarning, stacklevel=2)  # fmt: skip
        return CoreFrontier
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    """A crawl-state store: in one file (plus LMDB's ``-lock`` file beside it), or on a Redis
    server or cluster.

    Open it with ``Store.open(path)`` or ``Store.open(url)``; it is a context manager. Several
    processes may open one store at once; within a process, every ``Store`` on a file shares
    one LMDB environment.
    """

    def __init__(self, storage: StoreStorage, clock: Clock) -> None:
        self._storage = storage
        self.clock = clock
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        durability: Durability | str = Durability.SAFE,
        clock: Clock | None = None,
        readonly: bool = False,
        map_size: int | None = None,
        max_map_size: int | None = None,
        flush_interval: float | None = None,
    ) -> Store:
        """Open (or create) the store at ``path``, a file; or at a URL
        ``redis://host:port/?ns=name`` (``rediss://`` with TLS) or
        ``redis+cluster://host:port/?ns=name`` (``rediss+cluster://``), a store on Redis.

        ``durability``: ``"safe"`` (default: a power loss may lose the last commit, never
        corrupts), ``"full"`` or ``"nosync"`` (may corrupt on power loss), see ``Durability``.
        Group commit, which gives "safe" batch speed, is ``frontier.worker()``.
        A file's memory map starts at ``map_size`` (64 MiB) and grows by itself up to
        ``max_map_size`` (1 TiB), past which writes raise ``StoreFull``; ``flush_interval``
        (1 second) is how often a "nosync" file is flushed to disk. These three apply to a
        file only: given for a store on Redis, they raise ``InvalidArgument``.
        ``readonly=True`` inspects a store while a crawl writes to it. ``clock`` (epoch seconds)
        is the store's time; by default this machine's, or for a store on Redis the server's
        (a ``SyncedClock``). Raises ``NotAStore`` or ``IncompatibleStore`` without touching
        the store.
        """
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be a callable returning epoch seconds: {clock!r}")
        mode = _durability(durability)
        options = {name: value for name, value in (("map_size", map_size),
                   ("max_map_size", max_map_size), ("flush_interval", flush_interval))
                   if value is not None}  # fmt: skip
        if (
            flush_interval is not None
            and check_time("flush_interval", flush_interval, minimum=0) == 0
        ):
            raise InvalidArgument("flush_interval must be more than 0 seconds")
        storage = open_store(path, durability=mode, readonly=readonly, options=options)
        if clock is None:  # on a server, clients on several machines agree on its time
            shared = storage.server_clock()
            clock = system_clock if shared is None else SyncedClock(shared)
        store = cls(storage, clock)
        if not readonly and not storage.indexed:
            index_crawls(store)  # (before the fingerprints move: it counts by them)
            storage.set_indexed()
        if storage.fingerprint < FINGERPRINT_VERSION:
            migrate_fingerprints(store)
        return store

    # -- properties -----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        """The store's file (a store on Redis raises ``StoreError``: see ``location``)."""
        return self._storage.file.path

    @property
    def location(self) -> str:
        """Where the store is: its file's path, or the URL of its server (no password)."""
        return self._storage.location

    @property
    def url(self) -> str:
        """Where the store is (``location``): the name a store on Redis had."""
        return self._storage.location

    @property
    def readonly(self) -> bool:
        return self._storage.readonly

    @property
    def capabilities(self) -> Capabilities:
        """What the store's storage offers (``Capabilities``): whether it survives the
        process, what a commit promises, whether leases end by time only, what a unit spans."""
        return self._storage.capabilities

    @property
    def durability(self) -> Durability:
        return self._storage.durability

    @property
    def meta(self) -> dict[str, Any]:
        """Format version, fingerprint version and creation time of the store."""
        return dict(self._storage.meta)

    def file_size(self) -> int:
        """Bytes the data file uses (LMDB never shrinks it; see ``backup``). A store on Redis
        raises ``StoreError``."""
        return self._storage.file.size()

    def records_size(self) -> int:
        """Bytes of the file's pages that hold its records now: about what a compacted
        ``backup`` takes. The rest of ``file_size()`` is free pages, which LMDB reuses before
        it grows the file."""
        self._check_open()
        return self._storage.file.records_size()

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

    def _export(self, frontier: CoreFrontier) -> Iterator[dict[str, Any]]:
        return export_crawl(self._storage, frontier)

    def load(self, records: Iterable[dict[str, Any]], *, crawl: str | None = None) -> str:
        """Load an export into a crawl that holds nothing yet (the export's name unless
        ``crawl``), a thousand records a transaction; the crawl's name."""
        self._check_open()
        if crawl is not None:
            self._check_name(crawl)
        return self._load(records, crawl)

    def _load(self, records: Iterable[dict[str, Any]], crawl: str | None) -> str:
        return load_crawl(self._storage, lambda name: self.frontier(crawl=name), records, crawl,
                          self.clock)  # fmt: skip

    def new_crawl(self, name: str) -> contextlib.AbstractContextManager[CoreFrontier]:
        """Fill a crawl that holds nothing yet from another source (``load`` for anything but
        an export): the block gets the crawl's frontier and writes its seeds, seen set and
        facade state, as many transactions as it likes. A crawl that holds something raises
        ``InvalidArgument``; when the block raises, the crawl is removed again, so a fill that
        fails leaves no trace."""
        self._check_open()
        return new_crawl(self._storage, self.frontier(crawl=self._check_name(name)))

    def defaults(self) -> Defaults:
        """The store-wide policy every crawl inherits where it sets no value of its own."""
        self._check_open()
        return self._storage.view(self._storage.defaults)

    def set_defaults(
        self,
        *,
        delay: float = UNSET,
        max_in_flight: int | Literal["auto"] | None = UNSET,
        lease_time: float = UNSET,
        active: bool = UNSET,
    ) -> Defaults:
        """Change the store-wide policy (the URL Frontier's SetDelay with an empty key): each
        value given applies to every crawl and queue that does not set its own; ``active``
        False hands out nothing from any crawl until it is True again (the URL Frontier's
        SetActive). The new defaults."""
        self._check_open()
        changes = {name: value for name, value in (("delay", delay),
                   ("max_in_flight", max_in_flight), ("lease_time", lease_time),
                   ("active", active)) if value is not UNSET}  # fmt: skip
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
        delay: float | None = UNSET,
        max_in_flight: int | Literal["auto"] | None = UNSET,
        lease_time: float | None = UNSET,
        reap_interval: float = 10.0,
    ) -> CoreFrontier:
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
        return CoreFrontier(
            self._storage,
            crawl=self._check_name(crawl),
            clock=self.clock,
            order=order,
            queues=queues,
            delay=delay,  # left out (UNSET): the crawl's stored value
            max_in_flight=max_in_flight,
            lease_time=lease_time,
            reap_interval=reap_interval,
        )

    @overload
    def seen(self, *, crawl: str = "default", bloom: None = None,
             kind: str | None = None) -> StoreSeen: ...  # fmt: skip

    @overload
    def seen(self, *, crawl: str = "default", bloom: tuple[int, float],
             kind: None = None) -> StoreBloomSeen: ...  # fmt: skip

    def seen(
        self, *, crawl: str = "default", bloom: tuple[int, float] | None = None,
        kind: str | None = None,
    ) -> StoreSeen | StoreBloomSeen:  # fmt: skip
        r"""The crawl's exact seen set, or with ``bloom=(expected, fp_rate)`` its Bloom filter.
        A store on Redis keeps an exact one of two ``kind``\ s: ``"packed"`` (the default, about
        22 bytes of RAM a URL) or ``"set"`` (about 75); a file keeps one kind, ``"exact"``."""
        self._check_open()
        name = self._check_name(crawl)
        if bloom is None:
            return StoreSeen(self._storage, name, self.clock, kind)
        if kind is not None:
            raise InvalidArgument("kind names an exact seen set: a Bloom filter takes none")
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
        return self._storage.transaction()

    def backup(self, path: str | os.PathLike[str], *, compact: bool = True) -> None:
        """Write a consistent copy of what is committed (one read snapshot) to ``path`` while
        crawls go on writing. ``compact``: only the records, in full pages (the file at rest);
        without it, LMDB's page-for-page copy, free pages included. A store on Redis raises
        ``StoreError``: it is backed up by its servers."""
        target = Path(path)
        if target.exists():
            raise StoreError(f"{target} exists: a backup never overwrites a file")
        self._check_open()
        self._storage.file.backup(target, compact=compact)

    # -- lifetime -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self.location}: the store is closed")

    def close(self) -> None:
        """Close the store (the end of ``with``); its views raise ``StoreError`` afterwards."""
        if not self._closed:
            self._storage.close()
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
        return f"<Store {self.location!r} {state}{' readonly' if self.readonly else ''}>"


def index_crawls(store: Store) -> list[str]:
    """Write every crawl's bounded indexes from its records (a store of a format that kept
    none), a crawl at a time; the crawls."""
    names = store.crawls()
    for name in names:
        reindex(store.frontier(crawl=name).core)
    return names


def migrate_fingerprints(store: Store) -> list[str]:
    """Move every crawl's URLs to this crawlstore's fingerprints, with their seen set and
    validators, a crawl a unit (so a migration cut short is taken up by the next open); record
    the version last. The crawls."""
    storage = store._storage
    names = store.crawls()
    for name in names:
        with store.transaction():
            moved = refingerprint(store.frontier(crawl=name).core)
            carry_fingerprints(store, name, moved)
    storage.set_fingerprint(FINGERPRINT_VERSION)
    return names


def carry_fingerprints(store: Store, crawl: str, moved: dict[bytes, bytes]) -> None:
    """The new fingerprints of ``moved`` beside the old ones in the crawl's seen set (of the
    kind it has) and validators."""
    if moved:
        kind, bloom = seen_kind(store._storage, crawl)
        seen: StoreSeen | StoreBloomSeen | None = None
        if bloom is not None:
            seen = store.seen(crawl=crawl, bloom=bloom)
        elif kind:
            seen = store.seen(crawl=crawl, kind=kind)
        carry_over(moved, seen, store.validators(crawl=crawl))
