"""robots.txt, fetched once per origin and obeyed, with protego (the ``crawl`` extra).

RFC 9309: a robots.txt answered with a 4xx means no rules; one that cannot be fetched (a 5xx,
no connection) means the whole origin is off limits until it can be: its pages are retried.
"""

from __future__ import annotations

import asyncio
import time

import httpx
from protego import Protego

from ..url import parse_http_url

__all__ = ["Robots", "RobotsUnavailable"]

#: Seconds before a robots.txt that could not be fetched is asked for again.
RETRY_AFTER = 30.0
_MAX_BYTES = 500_000  # RFC 9309: parse at least 500 KiB


class RobotsUnavailable(Exception):
    """The origin's robots.txt could not be fetched: its pages wait."""


class Robots:
    """The robots.txt rules of each origin a crawl visits, for one user agent."""

    def __init__(self, client: httpx.AsyncClient, user_agent: str) -> None:
        self.client = client
        self.user_agent = user_agent
        self._rules: dict[str, asyncio.Task[Protego | None]] = {}
        self._failed: dict[str, float] = {}  # origin -> when it failed

    async def allowed(self, url: str) -> bool:
        """Whether ``url`` may be fetched; ``RobotsUnavailable`` while its robots.txt can't be."""
        rules = await self._of(parse_http_url(url).origin)
        return rules is None or bool(rules.can_fetch(url, self.user_agent))

    async def crawl_delay(self, url: str) -> float | None:
        """The ``Crawl-delay`` the origin asks of this user agent, if any."""
        rules = await self._of(parse_http_url(url).origin)
        delay = rules.crawl_delay(self.user_agent) if rules is not None else None
        return float(delay) if delay is not None else None

    async def _of(self, origin: str) -> Protego | None:
        task = self._rules.get(origin)
        if task is None or (task.done() and origin in self._failed
                            and time.monotonic() - self._failed[origin] > RETRY_AFTER):  # fmt: skip
            self._failed.pop(origin, None)
            task = self._rules[origin] = asyncio.ensure_future(self._fetch(origin))
        try:
            return await asyncio.shield(task)
        except RobotsUnavailable:
            self._failed.setdefault(origin, time.monotonic())
            raise

    async def _fetch(self, origin: str) -> Protego | None:
        try:
            response = await self.client.get(f"{origin}/robots.txt", follow_redirects=True)
        except httpx.HTTPError as exc:
            raise RobotsUnavailable(f"{origin}/robots.txt: {type(exc).__name__}") from None
        if response.status_code >= 500 or response.status_code == 429:
            raise RobotsUnavailable(f"{origin}/robots.txt: {response.status_code}")
        if response.status_code >= 400:
            return None  # no robots.txt: no rules
        return Protego.parse(response.content[:_MAX_BYTES].decode("utf-8", "replace"))
