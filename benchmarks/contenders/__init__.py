"""The contenders of ``python -m benchmarks``: one class per implementation, one interface.

A contender is made fresh for each timed run (``make()``), then driven as
``open(dir)`` -> ``seed(urls)`` (untimed) -> ``crawl(pages, links_of)`` (timed) -> ``close()``.
``push`` and ``pop_report`` serve the push-only and pop+report-only workloads; ``recover``
serves the crash probe (it runs in a fresh process, on the directory a killed child left).

Registering a contender is a line in ``_registry`` (or in ``GROUP_COMMIT_CONTENDERS``, the
place kept for the group-commit API: ``frontier.worker()`` with pages in flight).

The hand-written frontiers the contenders drive are here too, their one copy in the
benchmarks: ``floor.LmdbFloor`` and ``floor.FloorSeen`` (raw py-lmdb) and
``sqlite_.SqliteFrontier`` (one FIFO queue) and ``sqlite_hosts.SqliteHosts`` (host queues);
``benchmarks.store`` and the suite's workloads import them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass

#: links_of(page_index) -> the page's 10 link URLs
LinksOf = Callable[[int], Sequence[str]]


class Probe:
    """What a crawl loop tells the crash probe: a seed popped, a page's commit returned. The
    timed runs use this no-op one."""

    def popped(self, url: str, page: int | None = None) -> None:
        """A seed handed out (for page ``page``, when pages run out of order)."""

    def acked(self, page: int, url: str) -> None:
        pass


NULL_PROBE = Probe()


@dataclass
class Recovered:
    """A contender's state reopened after a kill: the queued URLs (in-flight seeds of the
    dead process given back where the contender can), and whether a URL is known at all
    (queued, in flight, done or in its seen set)."""

    queued: set[str]
    known: Callable[[str], bool]


class Contender:
    """One implementation of the crawl loop. Subclasses set the class attributes."""

    key: str = ""  # short id, used on the command line of the crash child and in results.json
    label: str = ""  # the row's name in the tables
    requires: tuple[str, ...] = ()  # modules it needs; missing: the row is skipped with a note
    memory: bool = False  # nothing persisted: the crash column says so without a kill
    syncs: bool = False  # an fsync per commit: it runs fewer pages
    #: Pages of the calibration run, and the fewest a run takes (0: the workload's defaults);
    #: contenders with many pages in flight need enough for their start to be amortised.
    trial_pages: int = 0
    grouping: bool = True  # can group operations into one commit (push/pop workloads)
    loop_only: bool = False  # a way to run the crawl loop only: not in the push/pop workloads
    note: str = ""  # what the row does, for the tables

    def open(self, path: str) -> None:
        raise NotImplementedError

    def seed(self, urls: Sequence[str]) -> None:
        raise NotImplementedError

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        raise NotImplementedError

    def push(self, urls: Sequence[str], batch: int) -> None:
        """Push each URL through dedup, ``batch`` to a commit (1: a commit each)."""
        raise NotImplementedError

    def pop_report(self, k: int, batch: int) -> None:
        """Pop ``k`` seeds and report each done, ``batch`` pages to a commit."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def recover(self, path: str) -> Recovered:
        raise NotImplementedError(f"{self.key}: no recovery")

    @classmethod
    def missing(cls) -> list[str]:
        """The modules it needs that are not installed."""
        return [name for name in cls.requires if importlib.util.find_spec(name) is None]


def _registry() -> list[type[Contender]]:
    from . import crawlstore_, floor, others, scrapy_, sqlite_, sqlite_hosts

    return [
        scrapy_.ScrapyJobdir,  # the baseline of the crawl loop
        scrapy_.ScrapyJobdirSqlite,
        scrapy_.ScrapyMemory,
        sqlite_.SqliteNormal,
        sqlite_.SqliteFull,
        sqlite_hosts.SqliteHostsNormal,
        sqlite_hosts.SqliteHostsFull,
        others.PersistQueue,
        others.Queuelib,
        others.DiskcacheCrawler,
        floor.LmdbFloorSafe,
        floor.LmdbFloorNosync,
        floor.LmdbFloorBatched,
        crawlstore_.InMemory,
        crawlstore_.StoreSafe,
        crawlstore_.StoreNosync,
        crawlstore_.StoreByHand,
        *crawlstore_.GROUP_COMMIT_CONTENDERS,
    ]


def crawl_contenders() -> list[type[Contender]]:
    """Every registered crawl-loop contender, in table order."""
    return _registry()


def by_key(key: str) -> type[Contender]:
    for cls in _registry():
        if cls.key == key:
            return cls
    raise KeyError(key)
