"""The ``scrapy`` workload's first table: Scrapy schedulers driven directly, with no engine and
no network. A request: ``next_request()``, then the end of its processing as Scrapy's engine
would do it, through a stand-in scraper: ``enqueue_scrape(response, request)`` runs the page's
callback at once (10 new links through ``enqueue_request``) and returns a fired Deferred, as
Scrapy's scraper does once a callback's output went through. crawlstore's scheduler wraps that
method, as under Scrapy's engine, to end the request's lease there; Scrapy's schedulers do
nothing then."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from .contenders import NULL_PROBE, Contender, LinksOf, Probe
from .contenders.scrapy_ import JOBDIR, ScrapyJobdirSqlite, crawler_for
from .links import HOSTS, LINKS, START, Links, start_urls, url
from .suite import Plan, Progress, Row, Scratch, Table

#: Seconds crawlstore's scheduler may take to lease a request once asked.
TIMEOUT = 60.0


class NewLinks(Links):
    """``links_of(i)``: request ``i``'s 10 links, URLs no request pushed before (200 hosts),
    built before the timed loop."""

    def __init__(self, pages: int) -> None:
        self.pages = [[url(START + LINKS * i + k) for k in range(LINKS)] for i in range(pages)]


class _Scraper:
    """Scrapy's scraper, as the scheduler sees it: the callback's requests are enqueued, then
    the Deferred fires."""

    def __init__(self) -> None:
        from scrapy import Request
        from twisted.internet.defer import succeed

        self.Request, self.succeed = Request, succeed
        self.links: Sequence[str] = ()
        self.enqueue: Any = None

    def enqueue_scrape(self, result: Any, request: Any) -> Any:
        enqueue, make = self.enqueue, self.Request
        for u in self.links:
            enqueue(make(u))
        return self.succeed(None)


class DirectJobdir(Contender):
    """A scheduler (``SCHEDULER`` in its settings, Scrapy's by default) with ``JOBDIR`` set,
    opened on a crawler with the stand-in engine."""

    key = "scrapy-jobdir"
    label = "Scrapy 2.19 scheduler, JOBDIR (PickleLifoDiskQueue + RFPDupeFilter)"
    requires = ("scrapy",)
    settings: dict[str, Any] = {}  # noqa: RUF012
    note = "nothing ends a request: it left the scheduler when it was taken"

    def open(self, path: str) -> None:
        from scrapy.utils.misc import load_object

        self.scraper = _Scraper()
        self.crawler = crawler_for(os.path.join(path, JOBDIR), self.settings, scraper=self.scraper)
        self.sched = load_object(self.crawler.settings["SCHEDULER"]).from_crawler(self.crawler)
        self.prepare()
        self.sched.open(self.crawler.spider)
        self.scraper.enqueue = self.sched.enqueue_request

    def prepare(self) -> None:
        """Before the scheduler opens."""

    def seed(self, urls: Sequence[str]) -> None:
        from scrapy import Request

        for u in urls:
            self.sched.enqueue_request(Request(u))
        self.settle()

    def settle(self) -> None:
        """Return once what the scheduler was given is written as it writes it."""

    def next(self) -> Any:
        request = self.sched.next_request()
        if request is None:
            raise RuntimeError("scrapy: the scheduler is empty")
        return request

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        from scrapy.http import Response

        scraper, next_request = self.scraper, self.next
        enqueue_scrape = self.crawler.engine.scraper.enqueue_scrape  # crawlstore's: wrapped
        for i in range(pages):
            request = next_request()
            scraper.links = links_of(i)
            enqueue_scrape(Response(request.url, request=request), request)
        self.settle()

    def close(self) -> None:
        self.sched.close("finished")


class DirectJobdirSqlite(DirectJobdir):
    key = "scrapy-jobdir-sqlite"
    label = "Scrapy 2.19 scheduler, JOBDIR, SCHEDULER_DISK_QUEUE PickleLifoSQLiteQueue"
    settings = ScrapyJobdirSqlite.settings
    syncs = True

    @classmethod
    def missing(cls) -> list[str]:
        return ScrapyJobdirSqlite.missing()


class DirectCrawlstore(DirectJobdir):
    """crawlstore's scheduler at its default durability. Scrapy's engine, told "nothing now"
    by ``next_request``, asks again when the scheduler wakes it: here, an event."""

    key = "crawlstore"
    label = 'crawlstore.scrapy.Scheduler, durability "safe" (group commit)'
    settings = {"SCHEDULER": "crawlstore.scrapy.Scheduler"}  # noqa: RUF012
    note = "the lease of each request ended (Done) once its links were enqueued"

    def prepare(self) -> None:
        self.woken = threading.Event()
        self.sched._wake_soon = self.woken.set  # the engine's wake-up, without a reactor

    def next(self) -> Any:
        while True:
            self.woken.clear()
            request = self.sched.next_request()
            if request is not None:
                return request
            if not self.woken.wait(TIMEOUT):
                raise RuntimeError("crawlstore: no request leased")

    def settle(self) -> None:
        self.sched.worker.submit(lambda: None).result(TIMEOUT)  # after every unit before it


CONTENDERS: list[type[DirectJobdir]] = [DirectJobdir, DirectJobdirSqlite, DirectCrawlstore]


def direct_table(plan: Plan, scratch: Scratch, progress: Progress, crash: dict[str, str]) -> Table:
    from .workloads import calibrated_rounds

    table = Table(
        "scrapy-scheduler",
        "Scrapy schedulers driven directly: next_request, then the request's processing ended "
        "with 10 new links enqueued, no engine, no network",
        "request",
        DirectJobdir.key,
        columns=["requests a run"],
    )
    for cls in CONTENDERS:
        gone = ", ".join(cls.missing())
        skipped = f"skipped: {gone} not installed" if gone else ""
        table.rows.append(Row(cls.key, cls.label, note=cls.note, crash=crash.get(cls.key, ""),
                              skipped=skipped))  # fmt: skip
    live = [row for row in table.rows if not row.skipped]
    progress.start("scrapy: schedulers driven directly", len(live) * (plan.rounds + 1))
    by_key: dict[str, type[Contender]] = {cls.key: cls for cls in CONTENDERS}
    calibrated_rounds(table, by_key, plan, NewLinks(plan.max_pages), scratch, progress,
                      start_urls(HOSTS))  # fmt: skip
    table.notes += [
        f"{HOSTS} start URLs (one a host) enqueued before the timed loop; each request's 10 "
        "links are URLs never seen before, so the queue grows by 9 a request, and every "
        "contender builds the `Request` objects of its links and the `Response` of the page "
        "inside the loop. Requests a run: calibrated per contender by a trial run to about "
        f"{plan.run_seconds:g} s, between {plan.min_pages:,} and {plan.max_pages:,}.",
        "The stand-in engine: Scrapy's `get_crawler`, its `Downloader` (the default "
        "`DownloaderAwarePriorityQueue` asks it for its slots), and a scraper whose "
        "`enqueue_scrape(response, request)` enqueues the page's links and returns a fired "
        "Deferred. crawlstore's scheduler wraps that method, as under Scrapy's engine, and "
        "ends the request's lease there (a `Done` report, in the writer thread's next group "
        "commit); its `next_request` returns what its writer leased ahead, and when it has "
        "none the loop waits for the scheduler's wake-up of the engine.",
        "What is timed differs in kind: Scrapy's schedulers do nothing when a request's "
        "processing ends (it left the scheduler when it was taken) and write their JOBDIR "
        "state at `close()`; crawlstore records each request's end, commits its pushes and "
        "reports with an fsync a group, and the timed loop ends once all of them are "
        "committed. That work is part of what is measured. The crash column is the "
        "kill-and-resume table's (a real crawl).",
    ]
    return table
