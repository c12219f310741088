"""crawlstore's Scrapy scheduler when the store refuses a batch of requests: nothing of it was
written, so a request made again is pushed again, not filtered as one still on its way."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from crawlstore import Store
from crawlstore.errors import StoreError
from crawlstore.scrapy import Scheduler

#: Seconds a batch may take to be written (or refused) on a busy machine.
WAIT = 60.0


class _Spider(Spider):
    name = "s"


def _scheduler(path: Path) -> Scheduler:
    crawler = get_crawler(_Spider, {"SCHEDULER": "crawlstore.scrapy.Scheduler",
                                    "CRAWLSTORE_PATH": str(path)})  # fmt: skip
    crawler.spider = _Spider.from_crawler(crawler)
    crawler.engine = SimpleNamespace(scraper=SimpleNamespace(enqueue_scrape=None))
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler


def test_a_request_of_a_refused_batch_is_pushed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.lmdb"
    scheduler = _scheduler(path)
    flushed = threading.Semaphore(0)
    settle = scheduler._flushed

    def counted(*args: Any) -> None:
        settle(*args)
        flushed.release()

    monkeypatch.setattr(scheduler, "_flushed", counted)
    push = scheduler.frontier.push_keyed
    refusals = iter([StoreError("the disk said no")])

    def refuse_once(batch: Any) -> Any:
        for exc in refusals:
            raise exc
        return push(batch)

    monkeypatch.setattr(scheduler.frontier, "push_keyed", refuse_once)
    try:
        assert scheduler.enqueue_request(Request("https://a.test/page"))
        assert flushed.acquire(timeout=WAIT)  # refused: nothing of it was written
        assert scheduler.enqueue_request(Request("https://a.test/page"))  # not "pending"
        assert flushed.acquire(timeout=WAIT)
    finally:
        scheduler.close("finished")
    with Store.open(path, readonly=True) as store:
        assert [u.url for u in store.frontier(crawl="s").urls(limit=10)] == ["https://a.test/page"]
