"""A Scrapy crawl of a demo site for the Scrapy tests, run as its own process:

    python tests/scrapy_spider.py STORE ITEMS START_URL [SETTINGS_JSON]

It crawls every page it finds (but the calendar and /private/), tags them "page", writes one
JSON line an item, and takes its settings from SETTINGS_JSON on top of crawlstore's two.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess

STORE, ITEMS, START = sys.argv[1], sys.argv[2], sys.argv[3]
EXTRA: dict[str, Any] = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}


class Lines:
    def open_spider(self, spider: Any = None) -> None:
        self.file = open(ITEMS, "a")  # noqa: SIM115

    def process_item(self, item: Any, spider: Any = None) -> Any:
        self.file.write(json.dumps(dict(item)) + "\n")
        self.file.flush()
        return item

    def close_spider(self, spider: Any = None) -> None:
        self.file.close()


class Site(scrapy.Spider):
    name = "site"
    start_urls = [START]  # noqa: RUF012

    def parse(self, response: Any) -> Any:
        yield {"url": response.url, "status": response.status}
        if self.settings.getbool("TEST_UNSERIALIZABLE") and response.url.endswith("/docs/0"):
            # a callback that is no method of the spider: no seed can hold it
            yield response.follow("/docs/1?kept=memory", callback=lambda r: None)
        for href in response.css("a::attr(href)").getall():
            if "/calendar/" not in href and "/private/" not in href:
                yield response.follow(href, callback=self.parse, meta={"crawlstore_tag": "page"})


if EXTRA.get("TEST_ALLOWED"):  # the offsite middleware on: only the site's hosts
    Site.allowed_domains = EXTRA.pop("TEST_ALLOWED")

if __name__ == "__main__":
    settings = {
        "SCHEDULER": "crawlstore.scrapy.Scheduler",
        "CRAWLSTORE_PATH": STORE,
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS": 8,
        "ITEM_PIPELINES": {"__main__.Lines": 100},
        "DOWNLOADER_MIDDLEWARES": {"crawlstore.scrapy.RevalidateMiddleware": 950},
        **EXTRA,
    }
    process = CrawlerProcess(settings)
    process.crawl(Site)
    process.start()
