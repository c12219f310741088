"""A Scrapy crawl of a demo site for the ``scrapy`` workload, run as its own process:

    python -m benchmarks.scrapy_spider START_URL ITEMS RESULT SETTINGS_JSON

It follows every link of every page (but the calendar's and /private/), writes one JSON line an
item, and once the crawl is over writes Scrapy's stats to RESULT (JSON). SETTINGS_JSON holds the
contender's settings (its SCHEDULER, JOBDIR, ...) on top of the common ones below.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess

START, ITEMS, RESULT = sys.argv[1], sys.argv[2], sys.argv[3]
EXTRA: dict[str, Any] = json.loads(sys.argv[4])


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
        for href in response.css("a::attr(href)").getall():
            if "/calendar/" not in href and "/private/" not in href:
                yield response.follow(href, callback=self.parse)


if __name__ == "__main__":
    settings = {
        "LOG_LEVEL": "INFO",
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "CONCURRENT_REQUESTS": 16,
        "ITEM_PIPELINES": {"__main__.Lines": 100},
        **EXTRA,
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(Site)
    process.crawl(crawler)
    process.start()
    with open(RESULT, "w") as out:
        json.dump(crawler.stats.get_stats(), out, default=str)
