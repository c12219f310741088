"""The reference crawler (``crawlstore crawl``): asyncio + httpx on crawlstore's public API and
its group-commit worker, with per-host politeness, robots.txt, retries, pauses on 429 and 503,
redirects through the frontier, trap avoidance, conditional revalidation and revisits by tag.

Needs the ``crawl`` extra (``pip install -e '.[crawl]'``: httpx, protego, selectolax).
"""

from .options import DEFAULT_USER_AGENT, CrawlOptions
from .progress import Counts, Progress
from .run import CrawlResult, build_frontier, crawl

__all__ = [
           "DEFAULT_USER_AGENT",
           "Counts",
           "CrawlOptions",
           "CrawlResult",
           "Progress",
           "build_frontier",
           "crawl",
]  # fmt: skip
