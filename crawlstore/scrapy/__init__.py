"""Scrapy on crawlstore (``pip install -e '.[scrapy]'``): a crash-safe scheduler
(``SCHEDULER = "crawlstore.scrapy.Scheduler"`` and ``CRAWLSTORE_PATH = "crawl.lmdb"``), a
dupefilter on disk for Scrapy's own scheduler, conditional revalidation, and the migration of
a JOBDIR (``crawlstore import PATH --from-jobdir DIR``)."""

from .dupefilter import DupeFilter
from .revalidate import RevalidateMiddleware
from .scheduler import Scheduler
from .settings import CrawlstoreSettings

__all__ = ["CrawlstoreSettings", "DupeFilter", "RevalidateMiddleware", "Scheduler"]
