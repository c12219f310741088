"""The URL Frontier service: the API's 19 calls as adapters over the store's frontier core
(queues, URLs, leases with a per-call length, ``Seed.meta``), every write through one group
commit. The service keeps no frontier state of its own: all of it is in the store file."""

from __future__ import annotations

import functools
import itertools
import logging
import math
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc

from ..errors import CrawlstoreError, InvalidArgument, PolicyConflict, ReadOnlyStore, StoreFull
from ..frontier import QueueInfo, Ready
from ..frontier.core import CoreFrontier
from ..store import Store
from . import urlfrontier_pb2 as pb
from . import urlfrontier_pb2_grpc as pb_grpc
from .committer import Committer
from .convert import Unacceptable, api_crawl, host_key, info_of, item_of, seed_of, store_crawl
from .metrics import Metrics
from .streams import put_discovered, put_urls

__all__ = ["FrontierService"]

log = logging.getLogger("crawlstore.urlfrontier")
_T = TypeVar("_T")

#: ``delay_requestable`` 0: a URL handed out is in transit this long (seconds).
DEFAULT_LEASE = 30.0
#: The most URLs one GetURLs call hands out, whatever its limits (0 included: no limit).
MAX_GET = 10_000
#: ``size`` 0 in ListQueues and ListURLs.
DEFAULT_SIZE = 100
#: What a page of a listing reads at once.
_PAGE = 1000

_LEVELS = {
    pb.LogLevelParams.TRACE: 5,
    pb.LogLevelParams.DEBUG: logging.DEBUG,
    pb.LogLevelParams.INFO: logging.INFO,
    pb.LogLevelParams.WARN: logging.WARNING,
    pb.LogLevelParams.ERROR: logging.ERROR,
}


def _status_of(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, (Unacceptable, InvalidArgument, PolicyConflict, TypeError)):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, StoreFull):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)
    if isinstance(exc, ReadOnlyStore):
        return grpc.StatusCode.FAILED_PRECONDITION, str(exc)
    if isinstance(exc, CrawlstoreError):
        return grpc.StatusCode.UNAVAILABLE, f"{type(exc).__name__}: {exc}"
    return grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}"


def _every_queue(view: CoreFrontier) -> Iterator[QueueInfo]:
    """The crawl's queues in key order, read a page at a time."""
    after: str | None = None
    while True:
        page = view.queues(after=after, limit=_PAGE)
        yield from page
        if len(page) < _PAGE:
            return
        after = page[-1].key


def _holds(q: QueueInfo) -> bool:
    """Whether a queue holds URLs not completed (queued, in transit or scheduled)."""
    return q.queued + q.in_flight + q.scheduled > 0


def _filter_of(request: pb.ListUrlParams | pb.CountUrlParams) -> tuple[str | None, bool]:
    """A listing's filter (None: none, as a blank one is) and whether it ignores case."""
    text = request.filter if request.HasField("filter") and request.filter.strip() else None
    return text, request.ignoreCase


def _rpc(method: Callable[..., _T]) -> Callable[..., _T]:
    """A unary call whose errors become a gRPC status with a message that names them."""

    @functools.wraps(method)
    def call(self: FrontierService, request: Any, context: grpc.ServicerContext) -> _T:
        try:
            return method(self, request, context)
        except CrawlstoreError as exc:
            code, message = _status_of(exc)
            log.warning("%s: %s", method.__name__, message)
            context.abort(code, message)
        raise AssertionError("unreachable")  # pragma: no cover

    return call


class FrontierService(pb_grpc.URLFrontierServicer):
    """``urlfrontier.URLFrontier`` over ``store``. ``node``: what ``ListNodes`` answers;
    ``window`` and ``batches``: how many items (and ``PutDiscovered`` batches) one stream may
    have waiting for their acks before the service stops reading it."""

    def __init__(
        self,
        store: Store,
        *,
        node: str = "localhost:7071",
        window: int = 1024,
        batches: int = 16,
        group: int = 512,
        metrics: Metrics | None = None,
    ) -> None:
        self.store = store
        self.node = node
        self.window = window
        self.batches = batches
        self.metrics = metrics or Metrics()
        self.committer = Committer(store.transaction, group=group)
        self._writers: dict[str, CoreFrontier] = {}
        self._readers: dict[str, CoreFrontier] = {}
        self._turn = itertools.count()
        self.closing = False

    def close(self) -> None:
        """Stop: calls still open get FAIL or an empty answer; what was submitted commits."""
        self.closing = True
        self.committer.close()

    # -- crawls ---------------------------------------------------------------------------------

    def writer(self, name: str) -> CoreFrontier:
        """The crawl's frontier for writes (on the committer's thread): a crawl the service
        creates is fifo, with the queue each URL names (``Seed.meta["queue"]``)."""
        view = self._writers.get(name)
        if view is None:
            try:
                view = self.store.frontier("fifo", crawl=name, queues="meta")
            except PolicyConflict:  # made by someone else: its own policy holds
                view = self.store.frontier(crawl=name)
            self._writers[name] = view
        return view

    def reader(self, name: str) -> CoreFrontier:
        view = self._readers.get(name)
        if view is None:
            view = self._readers[name] = self.store.frontier(crawl=name)
        return view

    # -- putting URLs ---------------------------------------------------------------------------

    def PutURLs(self, request_iterator: Iterator[pb.URLItem], context: grpc.ServicerContext
                ) -> Iterator[pb.AckMessage]:  # fmt: skip
        self.metrics.put_calls.inc()
        return put_urls(self, request_iterator, context)

    def PutDiscovered(self, request_iterator: Iterator[pb.DiscoveredBatch],
                      context: grpc.ServicerContext) -> Iterator[pb.BatchAck]:  # fmt: skip
        self.metrics.discovered_calls.inc()
        return put_discovered(self, request_iterator, context)

    # -- getting URLs ---------------------------------------------------------------------------

    def GetURLs(self, request: pb.GetParams, context: grpc.ServicerContext
                ) -> Iterator[pb.URLInfo]:  # fmt: skip
        self.metrics.get_calls.inc()
        started = time.perf_counter()
        which = request.WhichOneof("item")
        if which == "crawlID":
            try:
                names = [store_crawl(request.crawlID)]
            except Unacceptable as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        elif request.key:
            log.error("GetURLs for the queue %r needs a crawl ID", request.key)
            return
        else:
            names = None
        if self.closing:
            return
        try:
            popped = self.committer.call(lambda: self._pop(names, request))
        except CrawlstoreError as exc:
            context.abort(*_status_of(exc))
        self.metrics.got.inc(len(popped))
        self.metrics.get_latency.observe(time.perf_counter() - started)
        for ready, crawl_id in popped:
            yield info_of(ready.seed, crawl_id)

    def _pop(self, names: list[str] | None, request: pb.GetParams) -> list[tuple[Ready, str]]:
        """Hand out what GetURLs asks for: round robin over the crawls (each call starts at
        the next one) and, in each, the core's round robin over its queues."""
        known = self.store.crawls()
        if names is None:
            names = known
            if names:
                turn = next(self._turn) % len(names)
                names = names[turn:] + names[:turn]
        else:
            names = [name for name in names if name in known]
        per = request.max_urls_per_queue or None
        queues = request.max_queues or None
        limit = min(MAX_GET, (per or MAX_GET) * (queues or MAX_GET))
        lease = float(request.delay_requestable or DEFAULT_LEASE)
        out: list[tuple[Ready, str]] = []
        served = 0
        for name in names:
            if len(out) >= limit or (queues is not None and served >= queues):
                break
            ready = self.writer(name).pop_many(
                limit - len(out),
                per_queue=per or limit,
                queues=None if queues is None else queues - served,
                queue=request.key or None,
                lease_time=lease,
                max_in_flight=per,
                remote=True,
            )
            served += len({r.seed.meta.get("queue") or host_key(r.seed.url) for r in ready})
            crawl_id = api_crawl(name)
            out.extend((r, crawl_id) for r in ready)
        return out

    # -- crawls and queues ----------------------------------------------------------------------

    @_rpc
    def ListNodes(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.StringList:
        return pb.StringList(values=[self.node])

    @_rpc
    def ListCrawls(self, request: pb.Local, context: grpc.ServicerContext) -> pb.StringList:
        """The crawls that have a queue (a crawl whose last queue was deleted is not one)."""
        names = [name for name in self.store.crawls() if self.reader(name).queues(limit=1)]
        return pb.StringList(values=sorted(api_crawl(name) for name in names))

    @_rpc
    def DeleteCrawl(self, request: pb.DeleteCrawlMessage, context: grpc.ServicerContext
                    ) -> pb.Long:  # fmt: skip
        name = store_crawl(request.value)
        return pb.Long(value=self.committer.call(lambda: self.writer(name).delete_crawl()))

    @_rpc
    def DeleteQueue(self, request: pb.QueueWithinCrawlParams, context: grpc.ServicerContext
                    ) -> pb.Long:  # fmt: skip
        name = store_crawl(request.crawlID)
        if name not in self.store.crawls():
            return pb.Long(value=0)
        return pb.Long(value=self.committer.call(
            lambda: self.writer(name).delete_queue(request.key)))  # fmt: skip

    @_rpc
    def ListQueues(self, request: pb.Pagination, context: grpc.ServicerContext) -> pb.QueueList:
        name = store_crawl(request.crawlID)
        size = request.size or DEFAULT_SIZE
        view = self.reader(name)
        now = self.store.clock()
        matching = 0
        values: list[str] = []
        for q in _every_queue(view):
            if request.include_inactive or (q.blocked_until < now and _holds(q)):
                if request.start <= matching < request.start + size:
                    values.append(q.key)
                matching += 1
        return pb.QueueList(values=values, total=matching, start=request.start, size=len(values),
                            crawlID=api_crawl(name))  # fmt: skip

    @_rpc
    def GetStats(self, request: pb.QueueWithinCrawlParams, context: grpc.ServicerContext
                 ) -> pb.Stats:  # fmt: skip
        name = store_crawl(request.crawlID)
        view = self.reader(name)
        crawl_id = api_crawl(name)
        if view.stats().in_flight:  # inProcess counts leases that have not expired
            self.committer.call(lambda: self.writer(name).reap())
        if request.key:
            q = view.queue(request.key)
            if q is None:
                return pb.Stats(crawlID=crawl_id, counts={"completed": 0, "active_queues": 0})
            size = q.queued + q.in_flight + q.scheduled
            completed = sum(view.count(queue=request.key, state=s)
                            for s in ("done", "failed", "skipped"))  # fmt: skip
            return pb.Stats(
                size=size,
                inProcess=q.in_flight,
                numberOfQueues=1,
                crawlID=crawl_id,
                counts={"completed": completed, "active_queues": int(size > 0)},
            )
        stats = view.stats()
        completed = sum(view.count(state=s) for s in ("done", "failed", "skipped"))
        queues = active = 0
        for q in _every_queue(view):  # the queue records only, never a URL
            queues += 1
            active += _holds(q)
        return pb.Stats(size=stats.queued + stats.in_flight + stats.scheduled,
                        inProcess=stats.in_flight, numberOfQueues=queues, crawlID=crawl_id,
                        counts={"completed": completed, "active_queues": active})  # fmt: skip

    # -- control --------------------------------------------------------------------------------

    def _set_queue(self, crawl_id: str, key: str, **changes: Any) -> None:
        name = store_crawl(crawl_id)
        self.committer.call(lambda: self.writer(name).set_queue(key, **changes))

    @_rpc
    def BlockQueueUntil(self, request: pb.BlockQueueParams, context: grpc.ServicerContext
                        ) -> pb.Empty:  # fmt: skip
        if request.key:
            self._set_queue(request.crawlID, request.key, blocked_until=float(request.time))
        return pb.Empty()

    @_rpc
    def SetDelay(self, request: pb.QueueDelayParams, context: grpc.ServicerContext) -> pb.Empty:
        delay = float(request.delay_requestable)
        if request.key:
            self._set_queue(request.crawlID, request.key, delay=delay)
        else:  # every queue of every crawl that sets no delay of its own
            self.committer.call(lambda: self.store.set_defaults(delay=delay))
        return pb.Empty()

    @_rpc
    def SetCrawlLimit(self, request: pb.CrawlLimitParams, context: grpc.ServicerContext
                      ) -> pb.Empty:  # fmt: skip
        if not request.key:
            raise InvalidArgument("SetCrawlLimit needs the key of a queue")
        self._set_queue(request.crawlID, request.key, limit=request.limit or None)
        return pb.Empty()

    @_rpc
    def SetActive(self, request: pb.Active, context: grpc.ServicerContext) -> pb.Empty:
        self.committer.call(lambda: self.store.set_defaults(active=request.state))
        return pb.Empty()

    @_rpc
    def GetActive(self, request: pb.Local, context: grpc.ServicerContext) -> pb.Boolean:
        return pb.Boolean(state=self.store.defaults().active)

    @_rpc
    def SetLogLevel(self, request: pb.LogLevelParams, context: grpc.ServicerContext) -> pb.Empty:
        logging.getLogger(request.package or None).setLevel(_LEVELS.get(request.level, 20))
        return pb.Empty()

    # -- URLs -----------------------------------------------------------------------------------

    @_rpc
    def GetURLStatus(self, request: pb.URLStatusRequest, context: grpc.ServicerContext
                     ) -> pb.URLItem:  # fmt: skip
        name = store_crawl(request.crawlID)
        try:
            seed = seed_of(pb.URLInfo(url=request.url, key=request.key))
        except Unacceptable as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        status = self.reader(name).url(seed.url)
        if status.state == "unknown" or status.queue != seed.meta["queue"]:
            context.abort(grpc.StatusCode.NOT_FOUND,
                          f"no URL {request.url!r} in queue {seed.meta['queue']!r} of crawl "
                          f"{api_crawl(name)!r}")  # fmt: skip
        return item_of(status, api_crawl(name))

    def _matching(self, name: str, key: str, text: str | None, fold: bool) -> Iterator[Any]:
        """The URLs of a crawl (of one queue), those whose URL holds ``text`` (in any case
        with ``fold``), in fingerprint order: a scan."""
        view = self.reader(name)
        needle = text.lower() if text and fold else text
        after: bytes | None = None
        while True:
            page = view.urls(queue=key or None, after=after, limit=_PAGE)
            for status in page:
                if needle:
                    url = str(status.meta.get("url", status.url))
                    if needle not in (url.lower() if fold else url):
                        continue
                yield status
            if len(page) < _PAGE:
                return
            after = page[-1].fingerprint

    def ListURLs(self, request: pb.ListUrlParams, context: grpc.ServicerContext
                 ) -> Iterator[pb.URLItem]:  # fmt: skip
        try:
            name = store_crawl(request.crawlID)
        except Unacceptable as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        size = request.size or DEFAULT_SIZE
        text, fold = _filter_of(request)
        crawl_id = api_crawl(name)
        found = self._matching(name, request.key, text, fold)
        for status in itertools.islice(found, request.start, request.start + size):
            yield item_of(status, crawl_id)

    @_rpc
    def CountURLs(self, request: pb.CountUrlParams, context: grpc.ServicerContext) -> pb.Long:
        name = store_crawl(request.crawlID)
        text, fold = _filter_of(request)
        if text is None:  # counters, no scan
            return pb.Long(value=self.reader(name).count(queue=request.key or None))
        return pb.Long(value=sum(1 for _ in self._matching(name, request.key, text, fold)))

    @_rpc
    def PurgeURLs(self, request: pb.PurgeUrlParams, context: grpc.ServicerContext) -> pb.Long:
        name = store_crawl(request.crawlID)
        if name not in self.store.crawls():
            return pb.Long(value=0)
        before = math.nextafter(self.store.clock(), math.inf) - request.days * 86400.0
        return pb.Long(
            value=self.committer.call(
                lambda: self.writer(name).purge(before=before, queue=request.key or None)
            )
        )
