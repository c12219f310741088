"""What a crawl is asked to do: ``CrawlOptions``, checked when made."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import InvalidArgument
from ..url import parse_http_url

__all__ = ["DEFAULT_USER_AGENT", "CrawlOptions"]

DEFAULT_USER_AGENT = "crawlstore (+https://pypi.org/project/crawlstore/)"


@dataclass(frozen=True, slots=True, kw_only=True)
class CrawlOptions:
    """A crawl's settings. Only ``seeds`` is required.

    - ``allow_hosts``: the hosts (and their subdomains) to crawl; None: the seeds' hosts.
    - ``tags``: ``(pattern, tag)`` pairs; a URL takes the tag of the first regular expression
      that matches it (``re.search``), so ``revisits`` (``(tag, seconds)`` pairs) have tags to
      act on. A tag without a revisit interval is crawled once.
    - ``delay``: seconds between two pages of one host; one page of a host is in flight at a
      time. ``concurrency``: pages in flight in all.
    - ``retries`` on timeouts, connection errors and 5xx, ``retry_delay`` apart at first
      (doubling); a 429 or 503 with ``Retry-After`` pauses the host until then.
    - ``idle``: the run ends once nothing is in flight and the next page is due more than
      ``idle`` seconds from now (revisits wait for a later run); ``max_pages`` and
      ``max_time`` end it sooner, cleanly.
    """

    seeds: tuple[str, ...]
    crawl: str = "default"
    allow_hosts: tuple[str, ...] | None = None
    max_depth: int | None = None
    concurrency: int = 16
    delay: float = 1.0
    tags: tuple[tuple[str, str], ...] = ()
    revisits: tuple[tuple[str, float], ...] = ()
    retries: int = 3
    retry_delay: float = 1.0
    timeout: float = 10.0
    max_bytes: int = 10_000_000
    user_agent: str = DEFAULT_USER_AGENT
    robots: bool = True
    trap_budget: int | None = None
    idle: float = 60.0
    max_pages: int | None = None
    max_time: float | None = None
    _patterns: tuple[tuple[re.Pattern[str], str], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.seeds:
            raise InvalidArgument("a crawl needs at least one seed URL")
        for url in self.seeds:
            parse_http_url(url)  # InvalidSeed names the URL
        for name in ("concurrency", "retries", "max_bytes"):
            if getattr(self, name) < (0 if name == "retries" else 1):
                raise InvalidArgument(f"{name} is too small: {getattr(self, name)}")
        for name in ("delay", "retry_delay", "timeout", "idle", "max_time"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise InvalidArgument(f"{name} must be 0 seconds or more: {value}")
        for name in ("max_depth", "max_pages", "trap_budget"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidArgument(f"{name} must be 0 or more: {value}")
        patterns = []
        for pattern, tag in self.tags:
            try:
                patterns.append((re.compile(pattern), tag))
            except re.error as exc:
                message = f"tag pattern {pattern!r} is no regular expression: {exc}"
                raise InvalidArgument(message) from None
        object.__setattr__(self, "_patterns", tuple(patterns))
        for tag, seconds in self.revisits:
            if not seconds > 0:
                raise InvalidArgument(f"the revisit interval of {tag!r} must be positive")

    def tag_of(self, url: str) -> str | None:
        """The tag of the first pattern matching ``url``; None when none does."""
        for pattern, tag in self._patterns:
            if pattern.search(url):
                return tag
        return None

    def hosts(self) -> tuple[str, ...]:
        """The hosts in scope: ``allow_hosts``, or the seeds' hosts."""
        if self.allow_hosts is not None:
            return self.allow_hosts
        return tuple(dict.fromkeys(parse_http_url(url).hostname for url in self.seeds))
