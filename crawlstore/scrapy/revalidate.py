"""``RevalidateMiddleware``: conditional requests in a Scrapy crawl, from the validators the
crawlstore scheduler records (``DOWNLOADER_MIDDLEWARES = {"crawlstore.scrapy.
RevalidateMiddleware": 950}``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest, NotConfigured

from .scheduler import NOT_MODIFIED, REVALIDATED, scheduler_of
from .settings import CrawlstoreSettings

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["RevalidateMiddleware"]

#: ``request.meta[CALLBACK_304] = True``: call this request's callback with a 304.
CALLBACK_304 = "crawlstore_304_callback"


class RevalidateMiddleware:
    """A GET or HEAD of a page crawled before goes out with ``If-None-Match`` and
    ``If-Modified-Since`` from its stored validators. A 304 counts in
    ``crawlstore/unchanged``, and its callback is skipped (the request ends as ``Done``,
    unchanged) unless ``CRAWLSTORE_304_CALLBACK`` or ``request.meta["crawlstore_304_callback"]``
    asks for it. The scheduler records a page's validators once its callback is through."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.callback_304 = CrawlstoreSettings.read(crawler.settings).callback_304

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RevalidateMiddleware:
        scheduler = crawler.settings.get("SCHEDULER")
        if scheduler != "crawlstore.scrapy.Scheduler" and getattr(scheduler, "__name__", "") != (
            "Scheduler"
        ):
            raise NotConfigured("RevalidateMiddleware needs SCHEDULER = "
                                "'crawlstore.scrapy.Scheduler'")  # fmt: skip
        return cls(crawler)

    def process_request(self, request: Request, spider: Any = None) -> None:
        """Add the headers from the validators the scheduler read with the request's lease
        (this runs on the reactor thread, which never waits for the store)."""
        scheduler = scheduler_of(self.crawler)
        if scheduler is None or request.method not in ("GET", "HEAD"):
            return
        headers = scheduler.conditional_headers(request)
        if headers is None:
            return  # not a request the scheduler leased: nothing is known of it
        for name, value in headers.items():
            if name not in request.headers:
                request.headers[name] = value
        request.meta[REVALIDATED] = True

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Any:
        if response.status != 304 or not request.meta.get(REVALIDATED):
            return response
        if self.callback_304 or request.meta.get(CALLBACK_304):
            return response
        request.meta[NOT_MODIFIED] = response
        raise IgnoreRequest(f"not modified: {request.url}")
