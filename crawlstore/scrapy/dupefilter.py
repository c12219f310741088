"""``DupeFilter``: Scrapy's own scheduler, with its seen fingerprints in a store instead of in
the process's memory (``DUPEFILTER_CLASS = "crawlstore.scrapy.DupeFilter"``)."""

from __future__ import annotations

import logging
import threading
from functools import partial
from typing import TYPE_CHECKING, Any

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.request import referer_str

from ..store import Store
from .requests import FINGERPRINT_BYTES, claim_seen
from .settings import CrawlstoreSettings

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from ..frontier.worker import Worker

__all__ = ["DupeFilter"]

log = logging.getLogger("crawlstore.scrapy")


class DupeFilter(BaseDupeFilter):
    """A request is seen when the first 16 bytes of its fingerprint (from the project's
    ``REQUEST_FINGERPRINTER_CLASS``) are in the crawl's seen set. New fingerprints are
    written by a group-commit worker, so ``request_seen`` never waits for a disk: a kill
    loses none that was committed, and one not yet committed only lets its request be
    fetched once more."""

    def __init__(self, settings: CrawlstoreSettings, crawl: str, fingerprinter: Any,
                 *, debug: bool = False, stats: Any = None) -> None:  # fmt: skip
        self.settings, self.crawl, self.fingerprinter = settings, crawl, fingerprinter
        self.debug, self.stats = debug, stats
        self._pending: set[bytes] = set()
        self._lock = threading.Lock()
        self._logged = False
        self._store: Store | None = None
        self._worker: Worker | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DupeFilter:
        settings = CrawlstoreSettings.read(crawler.settings)
        spider = getattr(crawler, "spider", None)
        crawl = settings.crawl or (spider.name if spider is not None else "default")
        debug = crawler.settings.getbool("DUPEFILTER_DEBUG")
        return cls(settings, crawl, crawler.request_fingerprinter, debug=debug,
                   stats=crawler.stats)  # fmt: skip

    def open(self) -> None:
        self._store = Store.open(self.settings.path, durability=self.settings.durability)
        frontier = self._store.frontier(crawl=self.crawl)
        self._seen = self._store.seen(crawl=self.crawl)
        claim_seen(frontier, self._seen)
        self._worker = frontier.worker()

    def request_seen(self, request: Request) -> bool:
        assert self._worker is not None, "the dupefilter is not open"
        fp = self.fingerprinter.fingerprint(request)[:FINGERPRINT_BYTES]
        with self._lock:
            if fp in self._pending:
                return True
            if fp in self._seen:
                return True
            self._pending.add(fp)
        done = self._worker.submit(partial(self._seen.insert, fp))
        done.add_done_callback(lambda _: self._forget(fp))
        return False

    def _forget(self, fp: bytes) -> None:
        with self._lock:
            self._pending.discard(fp)

    def close(self, reason: str) -> None:
        if self._worker is not None:
            self._worker.close()  # what is queued is committed
        if self._store is not None:
            self._store.close()

    def log(self, request: Request, spider: Spider) -> None:
        self._logged = log_duplicate(request, debug=self.debug, shown=self._logged)
        if self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")


def log_duplicate(request: Request, *, debug: bool, shown: bool) -> bool:
    """Log a filtered duplicate as Scrapy's dupefilter does: each one with ``DUPEFILTER_DEBUG``,
    else the first only (``shown``: one was); whether one is shown now."""
    if debug:
        log.debug("Filtered duplicate request: %(request)s (referer: %(referer)s)",
                  {"request": request, "referer": referer_str(request)})  # fmt: skip
    elif not shown:
        log.debug("Filtered duplicate request: %(request)s - no more duplicates will be shown "
                  "(see DUPEFILTER_DEBUG to show all duplicates)",
                  {"request": request})  # fmt: skip
    return True
