"""``Scheduler``: Scrapy's scheduler on a crawlstore store (``SCHEDULER =
"crawlstore.scrapy.Scheduler"`` and ``CRAWLSTORE_PATH``).

A request handed to the engine is leased in the store. Its lease ends, in one unit of a
group-commit worker, once its processing is over: its callback (or errback) returned, the
requests it produced were enqueued and its items went through the item pipelines. A request
that a downloader middleware replaces (a redirect, a retry) ends its lease in the unit that
queues the replacement. Every write is a unit of the worker, whose own thread commits them in
groups: the reactor thread never waits for a disk.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from twisted.python.failure import Failure

from ..errors import InvalidSeed
from ..frontier.facades import Facade
from ..frontier.protocol import (
    Admission,
    Cancelled,
    Done,
    Failed,
    Ready,
    Reason,
    Reschedule,
    Skipped,
)
from ..revalidate import Revalidate
from ..revisit import TagIntervals
from ..seed import Seed
from ..seen import contains_many, insert_many
from ..store import Store
from ..validators import Validator
from .dupefilter import log_duplicate
from .requests import FINGERPRINT_BYTES, RequestSeeds, claim_seen
from .settings import CrawlstoreSettings

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from ..frontier.base import Frontier
    from ..frontier.worker import Worker

__all__ = ["Scheduler", "scheduler_of"]

log = logging.getLogger("crawlstore.scrapy")

#: ``request.meta`` keys starting with this are the scheduler's, never stored.
PRIVATE = "_crawlstore"
#: The lease of a request handed to the engine (its token, hex).
LEASE = "_crawlstore_lease"
#: Set by ``RevalidateMiddleware``: the request was revalidated (record its validators).
REVALIDATED = "_crawlstore_revalidated"
#: Set by ``RevalidateMiddleware``: the 304 it answered, when the callback was skipped.
NOT_MODIFIED = "_crawlstore_304"
#: A request's tag, for ``CRAWLSTORE_REVISIT``.
TAG = "crawlstore_tag"

#: Seconds between the writer's looks at the frontier when it has nothing else to do: the
#: engine asks again only when woken, or at its heartbeat (5 s).
_POLL = 0.05

#: The reports that end a lease.
_Ending = Done | Failed | Skipped | Cancelled | Reschedule


_SCHEDULERS: weakref.WeakKeyDictionary[Crawler, Scheduler] = weakref.WeakKeyDictionary()


def scheduler_of(crawler: Crawler) -> Scheduler | None:
    """The crawlstore scheduler open for ``crawler``, if any."""
    return _SCHEDULERS.get(crawler)


#: A seed batched for a push, its key (None: none, not deduplicated), and whether to filter it
#: by the key (not for ``dont_filter``).
_Batched = tuple[Seed, bytes | None, bool]


class _ScrapyDedup(Facade):
    """Dedup by Scrapy's fingerprints, in the push's transaction: ``push_keyed`` takes each
    seed with its key and whether to filter it; a seed whose key the seen set holds is refused
    as a duplicate, and the keys of all those admitted are recorded."""

    def __init__(self, inner: Frontier, seen: Any) -> None:
        super().__init__(inner)
        self.seen = seen
        self.filtered = 0  # duplicates refused here, for the stats (read on the reactor)
        self.stored = 0  # seeds admitted here, for the stats

    def push(self, seed: Seed) -> Admission:
        return self.push_many([seed])[0]

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        return self.push_keyed([(seed, None, False) for seed in seeds])

    def push_keyed(self, batch: list[_Batched]) -> list[Admission]:
        def push() -> tuple[list[Admission | None], int, int]:
            checked = [key for _, key, check in batch if check and key is not None]
            known = {k for k, hit in zip(checked, contains_many(self.seen, checked),
                                         strict=True) if hit}  # fmt: skip
            fresh: list[int] = []
            for i, (_, key, check) in enumerate(batch):
                if check and key is not None:
                    if key in known:
                        continue
                    known.add(key)  # a repeat within the batch is a duplicate too
                fresh.append(i)
            results: list[Admission | None] = [None] * len(batch)
            admitted = self.inner.push_many([batch[i][0] for i in fresh]) if fresh else []
            for i, admission in zip(fresh, admitted, strict=True):
                results[i] = admission
            duplicates = [i for i, result in enumerate(results) if result is None]
            refused = self.core.refuse_many([Reason.DUPLICATE] * len(duplicates))
            for i, admission in zip(duplicates, refused, strict=True):
                results[i] = admission
            recorded = [key for i in fresh  # dont_filter ones too: seen from now
                        if results[i] and (key := batch[i][1]) is not None]  # fmt: skip
            insert_many(self.seen, recorded)
            return results, len(duplicates), sum(1 for admission in admitted if admission)

        results, filtered, stored = self.inner.atomic(push)
        self.filtered += filtered
        self.stored += stored
        return [result for result in results if result is not None]


class _InProgress(set[Any]):
    """The engine's set of requests in progress, telling the scheduler of each it removes."""

    def __init__(self, items: set[Any], gone: Any) -> None:
        super().__init__(items)
        self._gone = gone

    def remove(self, item: Any) -> None:
        super().remove(item)
        try:
            self._gone(item)
        except Exception:  # never into the engine's own bookkeeping
            log.exception("crawlstore: ending the lease of %r failed", item)


@dataclass
class _Held:
    """A request handed to the engine: ``downloading`` until its download ends, then
    ``scraping`` until its callback's output is through."""

    ready: Ready
    state: str = "downloading"
    #: Its page's validators as stored when it was leased (read on the writer's thread).
    validator: Validator | None = None


class Scheduler:
    """Scrapy's scheduler contract over a crawl of a store: see the module's docstring and
    the Scrapy page of the docs for the settings."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.settings = CrawlstoreSettings.read(crawler.settings)
        self.stats = crawler.stats
        self.fingerprinter = crawler.request_fingerprinter
        self.debug = crawler.settings.getbool("DUPEFILTER_DEBUG")
        self._memory: deque[Request] = deque()  # requests no seed can hold, as Scrapy does
        self._held: dict[str, _Held] = {}
        self._pending: set[bytes] = set()  # keys pushed, not yet committed
        self._lock = threading.Lock()
        self._batch: list[_Batched] = []  # seeds enqueued, for the next push unit
        self._flushing = False  # a push unit is queued that will take the batch
        self._changes = 0  # units queued that change the crawl's counts (pushes, reports)
        self._covered = 0  # of them, those the last snapshot counted
        self._snapping = False  # a snapshot unit is queued
        self._closing = False
        self._counts = (0, 0)  # queued, scheduled: the crawl's counters at the last snapshot
        self._reported = (0, 0)  # the dedup facade's counts already in the stats
        self._warned = False  # an unserializable request was logged
        self._shown = False  # a duplicate was logged (all are, with DUPEFILTER_DEBUG)
        self.worker: Worker | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Scheduler:
        return cls(crawler)

    # -- the contract ---------------------------------------------------------------------------

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.requests = RequestSeeds(spider)
        settings = self.settings
        name = settings.crawl or spider.name
        self.store = Store.open(settings.path, durability=settings.durability)
        policy: dict[str, Any] = {"max_in_flight": settings.max_per_host,
                                  "lease_time": settings.lease_time}  # fmt: skip
        if name not in self.store.crawls():  # new: its queues are per host, by priority
            policy |= {"order": "priority", "queues": "host"}
        base = self.store.frontier(crawl=name, **policy)
        self.seen = self.store.seen(crawl=name)
        claim_seen(base, self.seen)
        reclaimed = base.reap()
        chain = base.revisit(TagIntervals(dict(settings.revisit))) if settings.revisit else base
        self.frontier = _ScrapyDedup(chain, self.seen)
        self._snapshot(base.stats())
        self.revalidate = Revalidate(self.store.validators(crawl=name))
        self.worker = self.frontier.worker(prefetch=settings.prefetch,
                                           lease_time=settings.lease_time, poll=_POLL,
                                           validators=self.revalidate.validators,
                                           notify=self._wake_soon)  # fmt: skip
        self._hook_scraper()
        _SCHEDULERS[self.crawler] = self
        self._inc("crawlstore/reclaimed", reclaimed)
        if (queued := len(self)) > 0:
            log.info("Resuming crawl (%d requests scheduled) from %s, crawl %r", queued,
                     settings.path, name)  # fmt: skip

    def close(self, reason: str) -> None:
        worker = self.worker
        if worker is None:
            return
        self._count_filtered()
        with self._lock:
            self._closing = True  # no more snapshots: the counts are read once, below
        for held in self._held.values():  # the engine stopped with them in flight
            worker.finish(Cancelled(held.ready.seed))
        self._held.clear()
        worker.close()  # commits what is queued, gives back what was leased ahead
        self._count_filtered()
        if self.stats is not None:  # what the next run has waiting: revisits, retries
            self.stats.set_value("crawlstore/scheduled", self.frontier.stats().scheduled)
        self.store.close()

    def has_pending_requests(self) -> bool:
        return len(self) > 0

    def __len__(self) -> int:
        """Requests queued or scheduled in the crawl (as the writer last counted them, so
        that the reactor never reads the store), leased ahead, held in memory, or being
        written."""
        self._count_filtered()
        if self.worker is None:
            return len(self._memory)
        queued, scheduled = self._counts
        unsettled = len(self._batch) + self._changes - self._covered  # not in the counts yet
        return queued + scheduled + self.worker.ahead + len(self._memory) + unsettled

    def enqueue_request(self, request: Request) -> bool:
        held = self._held_of(request)
        if held is not None and held.state == "downloading":
            return self._replace(held, request)  # a redirect or a retry of a leased request
        request.meta.pop(LEASE, None)  # a request the callback made, with its meta
        key = self._key(request)
        if not request.dont_filter and key in self._pending:  # one not yet written
            self._filtered(request)
            return False
        if request.meta.get("is_start_request") and self._known(request):
            self._inc("crawlstore/start_known")  # crawled before: its revisit brings it back
            return False
        seed = self._seed(request)
        if seed is None:
            return True
        self._push(seed, key, not request.dont_filter)  # counted once stored
        return True

    def next_request(self) -> Request | None:
        if self._memory:
            self._inc("scheduler/dequeued/memory")
            self._inc("scheduler/dequeued")
            return self._memory.popleft()
        assert self.worker is not None, "the scheduler is not open"
        while (ready := self.worker.try_next()) is not None:
            try:
                request = self.requests.request(ready.seed)
            except Exception as exc:  # its callback is gone from the spider, say
                log.error("crawlstore: cannot make a request of %s: %r", ready.seed.url, exc)
                self.worker.finish(Failed(ready.seed, reason=f"not a request: {exc!r:.200}"))
                continue
            assert ready.lease is not None
            token = ready.lease.token.hex()
            request.meta[LEASE] = token
            self._held[token] = _Held(ready, validator=self.worker.stored_validator(ready))
            self._inc("scheduler/dequeued/disk")
            self._inc("scheduler/dequeued")
            self._inc("crawlstore/leased")
            return request
        return None

    def _wake_soon(self) -> None:
        """On the worker's thread: seeds are leased ahead; the engine, which may have been
        told "nothing now", asks again at once instead of at its next heartbeat."""
        from twisted.internet import reactor

        reactor.callFromThread(self._wake)

    def _wake(self) -> None:
        slot = getattr(self.crawler.engine, "_slot", None)  # Scrapy's engine loop
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None:
            nextcall.schedule()

    # -- requests and seeds ---------------------------------------------------------------------

    def _key(self, request: Request) -> bytes:
        fingerprint: bytes = self.fingerprinter.fingerprint(request)
        return fingerprint[:FINGERPRINT_BYTES]

    def _known(self, request: Request) -> bool:
        try:
            fp = Seed(request.method, request.url, body=request.body).fingerprint
        except (InvalidSeed, ValueError):
            return False
        return self.frontier.url(fp).state != "unknown"

    def _seed(self, request: Request) -> Seed | None:
        """The seed of a request; None when no seed can hold it (it waits in memory)."""
        try:
            meta = {k: v for k, v in request.meta.items() if not k.startswith(PRIVATE)}
            seed = self.requests.seed(request, meta)
        except (ValueError, InvalidSeed) as exc:
            if not self._warned:
                self._warned = True
                log.warning("Unable to serialize request: %(request)s - reason: %(reason)s - "
                            "no more unserializable requests will be logged (stats being "
                            "collected)", {"request": request, "reason": exc})  # fmt: skip
            self._inc("scheduler/unserializable")
            self._inc("scheduler/enqueued/memory")
            self._inc("scheduler/enqueued")
            self._memory.append(request)
            return None
        tag = meta.get(TAG)
        return seed.with_tag(tag) if isinstance(tag, str) and tag else seed

    def _push(self, seed: Seed, key: bytes, check: bool) -> None:
        """Batch ``seed`` for the next push unit, which takes every seed batched until it
        runs: one ``push_many`` a group, deduplicated against the seen set in its
        transaction (``check``), so the reactor thread never reads the store."""
        assert self.worker is not None
        if check:
            self._pending.add(key)
        with self._lock:
            self._batch.append((seed, key, check))
            start, self._flushing = not self._flushing, True
        if start:
            taken: list[_Batched] = []  # the batch the unit took, failed or not
            unit = self.worker.submit(partial(self._flush, taken))
            unit.add_done_callback(partial(self._flushed, taken))
            self._changed()

    def _flush(self, taken: list[_Batched]) -> None:
        """On the worker's thread, in a group's transaction: push the batch."""
        with self._lock:
            batch, self._batch, self._flushing = self._batch, [], False
        taken.extend(batch)
        self.frontier.push_keyed(batch)

    def _flushed(self, taken: list[_Batched], future: Any) -> None:
        """On the worker's thread, once the batch is committed, or failed: then nothing of it
        was written, and its requests are no longer on their way (one made again is pushed
        again, not filtered as pending)."""
        exc = future.exception()
        if exc is not None:  # the store refused the group
            log.error("crawlstore: a batch of requests could not be stored: %r", exc)
        for _, key, _ in taken:
            if key is not None:
                self._pending.discard(key)

    def _changed(self) -> None:
        """A unit that changes the crawl's counts was queued: a snapshot unit queued after it
        counts them again, on the writer's thread (the reactor never reads the store), and
        ``__len__`` counts the change as pending until then."""
        with self._lock:
            self._changes += 1
            start = not (self._snapping or self._closing)
            self._snapping = self._snapping or start
        if start:
            self._queue_snapshot()

    def _queue_snapshot(self) -> None:
        assert self.worker is not None
        with self._lock:
            covers = self._changes  # every change queued so far runs before the snapshot
        future = self.worker.submit(self.frontier.stats)
        future.add_done_callback(partial(self._snapshot_taken, covers))

    def _snapshot_taken(self, covers: int, future: Any) -> None:
        if future.exception() is None:
            self._snapshot(future.result())
            self._covered = max(self._covered, covers)
        with self._lock:
            again = self._changes > covers and not self._closing
            self._snapping = again
        if again:
            self._queue_snapshot()
        else:
            self._wake_soon()  # the engine may be waiting to see the crawl is over

    def _snapshot(self, stats: Any) -> None:
        self._counts = (stats.queued, stats.scheduled)

    def _count_filtered(self) -> None:
        """Put what the dedup facade counted on the worker's thread (duplicates refused,
        requests stored) in the stats, on the reactor thread."""
        facade = getattr(self, "frontier", None)
        if facade is None:
            return
        filtered, stored = facade.filtered, facade.stored
        self._inc("dupefilter/filtered", filtered - self._reported[0])
        self._inc("scheduler/enqueued/disk", stored - self._reported[1])
        self._inc("scheduler/enqueued", stored - self._reported[1])
        self._reported = (filtered, stored)

    def _filtered(self, request: Request) -> None:
        self._shown = log_duplicate(request, debug=self.debug, shown=self._shown)
        self._inc("dupefilter/filtered")

    # -- leases ---------------------------------------------------------------------------------

    def conditional_headers(self, request: Request) -> dict[str, str] | None:
        """The conditional headers of a request this scheduler handed out, from the validators
        read with its lease (the reactor thread never reads the store); None for a request it
        did not hand out."""
        held = self._held_of(request)
        if held is None or held.state != "downloading":
            return None
        return self.revalidate.headers_of(held.ready.seed, held.validator)

    def _held_of(self, request: Request) -> _Held | None:
        token = request.meta.get(LEASE)
        return self._held.get(token) if isinstance(token, str) else None

    def _replace(self, held: _Held, request: Request) -> bool:
        """A downloader middleware replaced a leased request: a retry (the same URL) takes
        its place in the store; a redirect's target is pushed as the parent is done."""
        assert self.worker is not None
        parent = held.ready.seed
        del self._held[request.meta.pop(LEASE)]
        seed = self._seed(request)
        if seed is None:  # the replacement waits in memory; the parent is done
            self._finish(Done(parent))
            return True
        if seed.fingerprint == parent.fingerprint:  # a retry: the same request, once more
            self._finish(Reschedule(seed.with_lease(parent.lease), self.frontier.clock(),
                                    retried=True, kind="retry"))  # fmt: skip
            self._inc("scheduler/enqueued/disk")
            self._inc("scheduler/enqueued")
            return True
        key = self._key(request)
        if not request.dont_filter and key in self._pending:  # a redirect to one on its way
            self._finish(Done(parent))
            self._filtered(request)
            return False
        self._push(seed, key, not request.dont_filter)  # a unit queued before the parent's
        self._finish(Done(parent))
        return True

    def _hook_scraper(self) -> None:
        """Learn when a request's processing is over: the scraper's ``enqueue_scrape`` returns
        a Deferred that fires once the callback's output went through (requests enqueued,
        items through the pipelines), after the errback for a failure."""
        engine = self.crawler.engine
        assert engine is not None, "the scheduler opens with the engine"
        scraper = engine.scraper
        original = scraper.enqueue_scrape

        def enqueue_scrape(result: Response | Failure, request: Request) -> Any:
            held = self._held_of(request)
            if held is not None:
                held.state = "scraping"
            done = original(result, request)
            if held is not None:
                done.addBoth(self._scraped, held, result, request)
            return done

        scraper.enqueue_scrape = enqueue_scrape  # type: ignore[method-assign]
        slot = getattr(engine, "_slot", None)  # the requests the engine has in progress
        if slot is not None and isinstance(getattr(slot, "inprogress", None), set):
            slot.inprogress = _InProgress(slot.inprogress, self._gone)

    def _gone(self, request: Request) -> None:
        """The engine forgot a request. One still leased here was neither scraped nor
        replaced: a downloader middleware replaced it with a request that was never enqueued
        (a redirect off the site, vetoed by the offsite middleware): it is done."""
        held = self._held_of(request)
        if held is not None and held.state == "downloading":
            del self._held[request.meta.pop(LEASE)]
            self._finish(Done(held.ready.seed))

    def _scraped(self, out: Any, held: _Held, result: Response | Failure, request: Request) -> Any:
        token = request.meta.get(LEASE)
        if not isinstance(token, str) or self._held.pop(token, None) is None:
            return out
        if self.worker is None:
            return out
        self._finish(*self._report(held.ready.seed, result, request))
        return out

    def _finish(self, report: _Ending, validator: Validator | None = None) -> None:
        """End a lease: queue the unit of its report (and validator)."""
        assert self.worker is not None
        future = self.worker.finish(report, validator=validator)
        future.add_done_callback(partial(self._acked, report.seed))
        self._changed()

    def _acked(self, seed: Seed, future: Any) -> None:
        if future.exception() is not None:
            log.error("crawlstore: the report of %s failed: %r", seed.url, future.exception())
        else:
            self._inc("crawlstore/acked")

    def _report(
        self, seed: Seed, result: Response | Failure, request: Request
    ) -> tuple[_Ending, Validator | None]:
        """What the end of a request's processing means for its seed."""
        if isinstance(result, Response):
            if result.status >= 400:
                return Failed(seed, reason="http", status=result.status), None
            if request.meta.get(REVALIDATED):
                self._inc("crawlstore/unchanged", result.status == 304)
                return self.revalidate.outcome(seed, result.status, _validators(result))
            return Done(seed, status=result.status), None
        not_modified = request.meta.get(NOT_MODIFIED)
        if isinstance(not_modified, Response):  # a 304 whose callback was skipped
            self._inc("crawlstore/unchanged")
            return self.revalidate.outcome(seed, 304, _validators(not_modified))
        exc = result.value
        response = getattr(exc, "response", None)
        if isinstance(response, Response):  # HttpError: a status the spider does not handle
            return Failed(seed, reason="http", status=response.status), None
        if isinstance(exc, IgnoreRequest):
            return Skipped(seed, reason=f"{type(exc).__name__}: {exc}"[:200]), None
        return Failed(seed, reason=f"{type(exc).__name__}: {exc}"[:200]), None

    def _inc(self, key: str, count: int = 1) -> None:
        if self.stats is not None and count:
            self.stats.inc_value(key, count)


def _validators(response: Response) -> dict[str, str]:
    """A response's ETag and Last-Modified, as text."""
    found = {}
    for name in ("ETag", "Last-Modified"):
        value = response.headers.get(name)
        if value:
            found[name] = value.decode("latin-1")
    return found
