"""The ``CRAWLSTORE_*`` settings of a Scrapy project, read once and checked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from ..revisit import parse_interval

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

__all__ = ["CrawlstoreSettings"]


@dataclass(frozen=True, slots=True)
class CrawlstoreSettings:
    """
    - ``CRAWLSTORE_PATH``: the store file; without it, ``JOBDIR/crawlstore.lmdb`` when
      ``JOBDIR`` is set.
    - ``CRAWLSTORE_CRAWL``: the crawl's name in the store (default: the spider's name).
    - ``CRAWLSTORE_DURABILITY``: what a power loss may cost: ``"safe"`` (default: the last
      group commit), ``"full"`` (nothing), ``"nosync"`` (about a second, and the file may be
      damaged). A killed process loses nothing committed in every mode.
    - ``CRAWLSTORE_REVISIT``: ``{tag: interval}`` (``"1h"``, ``"1d"``, or seconds); a request
      takes its tag from ``request.meta["crawlstore_tag"]``.
    - ``CRAWLSTORE_LEASE_TIME``: seconds a request handed to the engine stays leased before
      it goes back to its queue (default 3600; a process that is gone loses its leases
      sooner, on the next open).
    - ``CRAWLSTORE_MAX_PER_HOST``: requests of one host handed out at once (default
      ``CONCURRENT_REQUESTS_PER_DOMAIN``), so the downloader does not hoard requests.
    - ``CRAWLSTORE_PREFETCH``: requests leased ahead (default ``CONCURRENT_REQUESTS``).
    - ``CRAWLSTORE_304_CALLBACK``: call the callback of a request answered 304 (default
      False: the revalidation middleware skips it).
    """

    path: Path
    crawl: str | None
    durability: str
    revisit: tuple[tuple[str, float], ...]
    lease_time: float
    max_per_host: int
    prefetch: int
    callback_304: bool

    @classmethod
    def read(cls, settings: BaseSettings) -> CrawlstoreSettings:
        path = settings.get("CRAWLSTORE_PATH")
        if not path:
            jobdir = settings.get("JOBDIR")
            if not jobdir:
                raise NotConfigured("crawlstore needs CRAWLSTORE_PATH (the store file) or JOBDIR")
            path = Path(jobdir) / "crawlstore.lmdb"
            Path(jobdir).mkdir(parents=True, exist_ok=True)
        revisit = settings.getdict("CRAWLSTORE_REVISIT")
        return cls(
            path=Path(path),
            crawl=settings.get("CRAWLSTORE_CRAWL") or None,
            durability=settings.get("CRAWLSTORE_DURABILITY", "safe"),
            revisit=tuple((str(tag), _seconds(tag, value)) for tag, value in revisit.items()),
            lease_time=settings.getfloat("CRAWLSTORE_LEASE_TIME", 3600.0),
            max_per_host=settings.getint("CRAWLSTORE_MAX_PER_HOST",
                                         settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN", 8)),
            prefetch=settings.getint("CRAWLSTORE_PREFETCH",
                                     settings.getint("CONCURRENT_REQUESTS", 16)),
            callback_304=settings.getbool("CRAWLSTORE_304_CALLBACK", False),
        )  # fmt: skip


def _seconds(tag: Any, value: Any) -> float:
    """An interval as ``"1h"`` or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value > 0:
            return float(value)
        raise ValueError(f"CRAWLSTORE_REVISIT[{tag!r}] must be positive: {value!r}")
    return parse_interval(value)
