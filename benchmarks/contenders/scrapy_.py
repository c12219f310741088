"""Scrapy's own scheduler, driven directly through a stub engine: memory queues, and JOBDIR
(disk queues + RFPDupeFilter), with the default disk queue and with Scrapy's SQLite one. The
priority queue is Scrapy's default ``DownloaderAwarePriorityQueue`` (one queue per host
slot), the order Scrapy's default (LIFO, depth first). Scrapy has no "done" report: a page
is done when it is taken from the scheduler; the dupefilter remembers it."""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered

JOBDIR = "jobdir"


def crawler_for(jobdir: str | None, settings: dict[str, Any], **engine: Any) -> Any:
    """A Scrapy crawler for a scheduler driven without Scrapy's engine: its spider set, and a
    stand-in engine holding Scrapy's Downloader (the default priority queue asks it for its
    slots) and the attributes ``engine`` names."""
    logging.disable(logging.CRITICAL)  # Downloader(crawler) logs tracebacks about handlers
    warnings.filterwarnings("ignore")
    from scrapy import Spider
    from scrapy.core.downloader import Downloader
    from scrapy.utils.test import get_crawler

    class S(Spider):
        name = "s"

    crawler = get_crawler(S, {**settings, "JOBDIR": jobdir} if jobdir else dict(settings))
    crawler.spider = S.from_crawler(crawler)  # the dupefilter logs through spider.crawler
    crawler.engine = SimpleNamespace(**engine)
    crawler.engine.downloader = Downloader(crawler)
    return crawler


def _scheduler(jobdir: str | None, settings: dict[str, Any]) -> tuple[Any, Any]:
    from scrapy.core.scheduler import Scheduler

    crawler = crawler_for(jobdir, settings)
    sched = Scheduler.from_crawler(crawler)
    sched.open(crawler.spider)
    return crawler, sched


class ScrapyMemory(Contender):
    key = "scrapy-memory"
    label = "Scrapy 2.19 scheduler, memory queues"
    requires = ("scrapy",)
    memory = True
    grouping = False
    settings: dict[str, Any] = {}  # noqa: RUF012
    persistent = False
    note = "next_request, enqueue_request(Request(url)) x10"

    def open(self, path: str) -> None:
        from scrapy import Request

        self.Request = Request
        jobdir = os.path.join(path, JOBDIR) if self.persistent else None
        self.crawler, self.sched = _scheduler(jobdir, self.settings)

    def seed(self, urls: Sequence[str]) -> None:
        enqueue, request = self.sched.enqueue_request, self.Request
        for u in urls:
            enqueue(request(u))

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        enqueue, next_request, request = (
            self.sched.enqueue_request, self.sched.next_request, self.Request)  # fmt: skip
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            r = next_request()
            if r is None:
                raise RuntimeError("scrapy: the scheduler is empty")
            popped(r.url)
            for u in links_of(i):
                enqueue(request(u))
            acked(i, r.url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        self.seed(urls)

    def pop_report(self, k: int, batch: int) -> None:
        next_request = self.sched.next_request
        for _ in range(k):
            if next_request() is None:
                raise RuntimeError("scrapy: the scheduler is empty")

    def close(self) -> None:
        self.sched.close("finished")

    def recover(self, path: str) -> Recovered:
        from scrapy import Request

        _, sched = _scheduler(os.path.join(path, JOBDIR), self.settings)
        queued = set()
        while (r := sched.next_request()) is not None:
            queued.add(r.url)
        df = sched.df

        def known(url: str) -> bool:
            return url in queued or df._fingerprint(Request(url)) in df._fingerprints

        return Recovered(queued, known)


class ScrapyJobdir(ScrapyMemory):
    key = "scrapy-jobdir"
    label = "Scrapy 2.19 scheduler, JOBDIR (disk queues + RFPDupeFilter)"
    memory = False
    persistent = True


class ScrapyJobdirSqlite(ScrapyJobdir):
    key = "scrapy-jobdir-sqlite"
    label = "Scrapy 2.19 scheduler, JOBDIR, SCHEDULER_DISK_QUEUE PickleLifoSQLiteQueue"
    settings = {"SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleLifoSQLiteQueue"}  # noqa: RUF012
    syncs = True  # sqlite3's defaults: a rollback journal, fsync at every commit

    @classmethod
    def missing(cls) -> list[str]:
        gone = super().missing()
        if not gone:
            import scrapy.squeues

            if not hasattr(scrapy.squeues, "PickleLifoSQLiteQueue"):
                gone.append("scrapy.squeues.PickleLifoSQLiteQueue (not in this Scrapy)")
        return gone
