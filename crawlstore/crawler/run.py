"""The crawl loop: asyncio + httpx over a store, through a group-commit worker.

Every page is one unit of the worker (its report, its validator and its links), committed
with the pages of other tasks in one transaction; a page's JSON line is written only once
its unit is committed, so the lines of a killed run are all in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any

import httpx

from ..errors import InvalidSeed
from ..frontier.base import Frontier
from ..frontier.facades import RetryPolicy
from ..frontier.protocol import Cancelled, Report, Retry, Skipped
from ..frontier.traps import AvoidTraps, BlockedPrefix, TrapPolicy
from ..integrations.httpx import Outcome, build_request, plan_response
from ..revalidate import Revalidate
from ..revisit import TagIntervals
from ..seed import Seed
from ..store import Store
from ..validators import Validator
from .links import extract_links
from .options import CrawlOptions
from .progress import Counts, Progress
from .robots import Robots, RobotsUnavailable

__all__ = ["CrawlResult", "build_frontier", "crawl"]

Page = dict[str, Any]


@dataclass(frozen=True, slots=True)
class CrawlResult:
    """How a run of ``crawl`` went: its counts, why it ended ("idle": nothing due within
    ``idle``; "max_pages", "max_time", "stopped"), and the trap prefixes blocked so far."""

    counts: Counts
    ended: str
    blocked: tuple[BlockedPrefix, ...]
    seconds: float


@dataclass(frozen=True, slots=True)
class _Unit:
    """What a fetch leads to: the worker unit to commit and the page's JSON line."""

    report: Report
    page: Page
    links: tuple[Seed, ...] = ()
    validator: Validator | None = None
    pause_until: float | None = None
    outcome: Outcome | None = None


def build_frontier(store: Store, options: CrawlOptions) -> tuple[Frontier, AvoidTraps]:
    """The crawl's frontier: per-host queues (``delay`` apart, one page of a host in flight),
    revisits by tag, retries, trap avoidance, dedup against the crawl's seen set, the depth
    limit and the hosts in scope; and its trap facade, to read what it blocked."""
    frontier: Frontier = store.frontier("fifo", crawl=options.crawl, queues="host",
                                        delay=options.delay)  # fmt: skip
    if options.revisits:
        frontier = frontier.revisit(TagIntervals(dict(options.revisits)))
    frontier = frontier.retry_with(RetryPolicy(options.retries, base_delay=options.retry_delay))
    policy = TrapPolicy()
    if options.trap_budget is not None:
        policy = policy.with_max_urls(options.trap_budget).with_max_fanout(options.trap_budget)
    traps = frontier.avoid_traps_with(policy)
    frontier = traps.dedup_with(store.seen(crawl=options.crawl))
    if options.max_depth is not None:
        frontier = frontier.max_depth(options.max_depth)
    return frontier.allow_hosts(options.hosts()), traps


async def crawl(
    store: Store,
    options: CrawlOptions,
    *,
    on_page: Callable[[Page], None] | None = None,
    progress: Progress | None = None,
    stop: asyncio.Event | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> CrawlResult:
    """Crawl until the run ends (see ``CrawlOptions``) or ``stop`` is set; ``on_page`` gets
    each page's JSON-able record once its unit is committed. Pages in flight when the run
    stops are reported ``Cancelled``: the next run crawls them first."""
    run = _Run(store, options, on_page or (lambda page: None), progress)
    async with httpx.AsyncClient(
        timeout=options.timeout, headers={"User-Agent": options.user_agent},
        transport=transport, limits=httpx.Limits(max_connections=options.concurrency * 2),
    ) as client:  # fmt: skip
        return await run.run(client, stop or asyncio.Event())


class _Run:
    def __init__(
        self,
        store: Store,
        options: CrawlOptions,
        on_page: Callable[[Page], None],
        progress: Progress | None,
    ) -> None:
        self.options = options
        self.frontier, self.traps = build_frontier(store, options)
        self.validators = store.validators(crawl=options.crawl)
        self.revalidate = Revalidate(self.validators)
        self.on_page = on_page
        self.progress = progress
        self.counts = Counts()
        self.begun = 0
        self.ended = "idle"
        self.paced: set[str] = set()  # queues whose robots.txt Crawl-delay was applied

    async def run(self, client: httpx.AsyncClient, stop: asyncio.Event) -> CrawlResult:
        self.client = client
        self.robots = Robots(client, self.options.user_agent) if self.options.robots else None
        options = self.options
        seeds = [self._seed(url, depth=0) for url in options.seeds]
        async with self.frontier.async_worker(
            prefetch=options.concurrency, idle=options.idle, poll=0.5,
            validators=self.validators,
        ) as worker:  # fmt: skip
            self.worker = worker
            await worker.submit(partial(self.frontier.push_many, [s for s in seeds if s]))
            fetchers = [asyncio.create_task(self._fetcher()) for _ in range(options.concurrency)]
            watcher = asyncio.create_task(self._watch(stop, fetchers))
            try:
                await asyncio.wait(fetchers)
            finally:
                watcher.cancel()
                for task in fetchers:
                    task.cancel()
                await asyncio.gather(*fetchers, watcher, return_exceptions=True)
            for task in fetchers:
                if not task.cancelled() and (exc := task.exception()) is not None:
                    raise exc
        stats = self.frontier.stats()
        if self.progress is not None:
            self.progress.close(self.counts, stats.queued, stats.in_flight)
        return CrawlResult(self.counts, self.ended, tuple(self.traps.blocked()),
                           time.monotonic() - self.counts.started)  # fmt: skip

    async def _watch(self, stop: asyncio.Event, fetchers: list[asyncio.Task[None]]) -> None:
        """Show progress; on ``stop`` or at ``max_time``, cancel the fetchers."""
        deadline = (
            None if self.options.max_time is None else time.monotonic() + self.options.max_time
        )
        while not stop.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                self.ended = "max_time"
                break
            if self.progress is not None:
                stats = self.frontier.stats()
                self.progress.show(self.counts, stats.queued, stats.in_flight)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.25)
        else:
            self.ended = "stopped"
        for task in fetchers:
            task.cancel()

    async def _fetcher(self) -> None:
        while (ready := await self.worker.next()) is not None:
            seed = ready.seed
            if self.options.max_pages is not None and self.begun >= self.options.max_pages:
                self.ended = "max_pages"
                await self.worker.finish(Cancelled(seed))  # back to the front of its queue
                return
            self.begun += 1
            try:
                unit = await self._fetch(seed, self.worker.stored_validator(ready))
            except asyncio.CancelledError:
                await self.worker.finish(Cancelled(seed))
                self.counts.cancelled += 1
                raise
            commit = asyncio.ensure_future(self._commit(seed, unit))
            try:
                await asyncio.shield(commit)
            except asyncio.CancelledError:
                await commit  # the page's unit is queued: see it committed, then stop
                raise

    async def _fetch(self, seed: Seed, stored: Validator | None) -> _Unit:
        """Fetch ``seed``, conditionally on ``stored`` (its validators, read with its lease:
        the event loop never reads the store)."""
        at = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        page: Page = {"url": seed.url, "depth": seed.depth, "at": at}
        if self.robots is not None:
            try:
                if not await self.robots.allowed(seed.url):
                    return _Unit(Skipped(seed, reason="robots.txt"), {**page, "outcome": "robots"})
                await self._pace(seed)
            except RobotsUnavailable as exc:
                return _Unit(Retry(seed), {**page, "outcome": "retry", "error": str(exc)})
        started = time.perf_counter()
        try:
            request = build_request(self.client, seed)
            request.headers.update(self.revalidate.headers_of(seed, stored))
            response = await self.client.send(request, stream=True)
            try:
                body, truncated = await _read(response, self.options.max_bytes)
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            seconds = round(time.perf_counter() - started, 4)
            page.update(outcome="retry", error=type(exc).__name__, seconds=seconds)
            return _Unit(Retry(seed), page)
        status = response.status_code
        digest = hashlib.sha256(body).hexdigest() if 200 <= status < 300 else None
        found = []
        if 200 <= status < 300 and "html" in response.headers.get("content-type", ""):
            found = extract_links(body, str(response.url))
        links = [s for url in found if (s := self._seed(url, depth=seed.depth + 1))]
        plan = plan_response(seed, response, now=self.frontier.clock(), links=links,
                             revalidate=self.revalidate, content_hash=digest)  # fmt: skip
        page.update(status=status, outcome=plan.outcome.value, size=len(body), sha256=digest,
                    links=len(found), unchanged=plan.outcome is Outcome.UNCHANGED,
                    seconds=round(time.perf_counter() - started, 4))  # fmt: skip
        if truncated:
            page["truncated"] = True
        return _Unit(plan.report, page, plan.links, plan.validator, plan.pause_until, plan.outcome)

    async def _pace(self, seed: Seed) -> None:
        """A robots.txt ``Crawl-delay`` longer than the crawl's delay becomes its queue's."""
        assert self.robots is not None
        key = self.frontier.queue_for(seed)
        if key in self.paced:
            return
        self.paced.add(key)
        delay = await self.robots.crawl_delay(seed.url)
        if delay is not None and delay > self.options.delay:
            await self.worker.submit(partial(self.frontier.set_queue, key, delay=delay))

    async def _commit(self, seed: Seed, unit: _Unit) -> None:
        if unit.pause_until is not None:
            await self.worker.submit(partial(self.frontier.pause_queue, seed, unit.pause_until))
        admissions = await self.worker.finish(unit.report, unit.links, validator=unit.validator)
        self._count(unit)
        page = unit.page
        if unit.links:
            page["new"] = sum(1 for a in admissions if a)
        self.counts.fetched += "status" in page  # a response came
        self.on_page(page)

    def _count(self, unit: _Unit) -> None:
        counts, outcome = self.counts, unit.page.get("outcome")
        if outcome == "robots":
            counts.robots += 1
        elif "error" in unit.page:
            counts.errors += 1
            counts.retries += 1
        elif outcome == Outcome.RETRY.value:
            counts.retries += 1
        elif outcome == Outcome.FAILED.value:
            counts.failed += 1
        elif outcome == Outcome.REDIRECT.value:
            counts.redirects += 1
        else:
            counts.done += 1
            counts.unchanged += outcome == Outcome.UNCHANGED.value

    def _seed(self, url: str, *, depth: int) -> Seed | None:
        """The seed of a URL found on a page (None: not an http(s) URL we can crawl)."""
        try:
            seed = Seed.get(url).with_depth(depth)
        except (InvalidSeed, ValueError):
            return None
        tag = self.options.tag_of(seed.url)
        return seed.with_tag(tag) if tag is not None else seed


async def _read(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body, up to ``limit`` bytes; whether it was cut there."""
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False
