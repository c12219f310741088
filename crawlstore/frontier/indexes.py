"""A crawl's bounded indexes of what happened, written with it and read in what they show:
its recent failures (a ring a partition, the newest kept) and its revisits by the minute they
fall due. ``crawlstore dashboard`` reads them (``CoreFrontier.recent_failures`` and
``revisits_due``); each storage keeps them in its own layout (``spi.Storage``)."""

from __future__ import annotations

from . import spi
from .spi import REVISIT, SCHEDULED, CrawlRecord, Failure, QueueRecord, UrlRecord

__all__ = ["FAILURES_MIN", "RECENT_FAILURES", "count_revisit", "failures_kept", "note_failure",
           "uncount_queue"]  # fmt: skip

#: Failures a crawl keeps, over its partitions: each keeps its share, and at least
#: ``FAILURES_MIN`` (a store on Redis of 1,024 buckets keeps 16 a bucket).
RECENT_FAILURES = 1000
FAILURES_MIN = 16


def failures_kept(partitions: int) -> int:
    """The failures each of a crawl's ``partitions`` keeps."""
    return max(FAILURES_MIN, RECENT_FAILURES // partitions)


def note_failure(storage: spi.Storage, crawl: CrawlRecord, q: QueueRecord, url: str,
                 visit: spi.Visit) -> None:  # fmt: skip
    """Keep a URL's visit that failed for good among its partition's recent failures."""
    failure = Failure(visit.at, q.key, url, visit.status, visit.reason)
    storage.note_failure(crawl, q, failure, failures_kept(storage.capabilities.partitions))


def count_revisit(storage: spi.Storage, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord,
                  n: int) -> None:  # fmt: skip
    """Count a URL scheduled for a revisit (``n`` 1: it was scheduled; -1: it leaves its
    schedule); any other URL is not counted."""
    if url.state == SCHEDULED and url.kind == REVISIT:
        storage.count_revisit(crawl, q, url.fp, url.slot.at, n)


def uncount_queue(storage: spi.Storage, crawl: CrawlRecord, q: QueueRecord) -> None:
    """Take the revisits of a queue about to be deleted out of the count."""
    if q.revisits:
        for url in storage.iter_urls(crawl, q):
            count_revisit(storage, crawl, q, url, -1)
