"""A client of the URL Frontier API (any server of API 2.6: ``crawlstore serve`` or the
reference service): one method a call, keyword arguments, plain values back."""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from ..errors import CrawlstoreError
from ..textfiles import open_text
from . import urlfrontier_pb2 as pb
from . import urlfrontier_pb2_grpc as pb_grpc
from .items import URL, dump_line

__all__ = ["Acks", "Client", "FrontierError", "FrontierStats", "QueueList"]

_T = TypeVar("_T")
_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")


class FrontierError(CrawlstoreError):
    """A call the server refused or could not answer: ``code`` is the gRPC status's name
    (``UNAVAILABLE`` when the server cannot be reached), ``details`` its message."""

    def __init__(self, call: str, code: str, details: str) -> None:
        super().__init__(f"{call}: {code}: {details}" if details else f"{call}: {code}")
        self.call = call
        self.code = code
        self.details = details


@dataclass(frozen=True, slots=True)
class Acks:
    """What the server answered to the URLs put: ``ok`` added or updated, ``skipped`` not worth
    sending again (known already, malformed), ``failed`` to send again later (their IDs,
    which are their URLs, in ``resend``)."""

    ok: int
    skipped: int
    failed: int
    resend: tuple[str, ...] = ()

    def __add__(self, other: Acks) -> Acks:
        return Acks(self.ok + other.ok, self.skipped + other.skipped,
                    self.failed + other.failed, self.resend + other.resend)  # fmt: skip


def _tally(statuses: Iterable[tuple[str, int]]) -> Acks:
    """The acks of (ID, status) pairs."""
    ok = skipped = 0
    resend: list[str] = []
    for ack_id, status in statuses:
        if status == pb.AckMessage.OK:
            ok += 1
        elif status == pb.AckMessage.SKIPPED:
            skipped += 1
        else:
            resend.append(ack_id)
    return Acks(ok, skipped, len(resend), tuple(resend))


@dataclass(frozen=True, slots=True)
class FrontierStats:
    """A crawl's (or a queue's) counts: ``size`` URLs not completed (in process and scheduled
    included), ``in_process`` handed out and not reported, ``queues`` the number of queues,
    ``counts`` the rest (``completed``, ``active_queues``)."""

    crawl: str
    size: int
    in_process: int
    queues: int
    counts: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class QueueList:
    """A page of a crawl's queue keys, from offset ``start``; ``total`` queues match (0 when the
    server does not tell)."""

    crawl: str
    keys: tuple[str, ...]
    start: int
    total: int


def _crawl_item(crawl: str | None) -> dict[str, Any]:
    return {"anyCrawlID": pb.AnyCrawlID()} if crawl is None else {"crawlID": crawl}


class Client:
    """A connection to the service at ``address`` (``host:port``), or at ``host`` and ``port``.
    ``timeout``: seconds a call other than a stream may take. Close it, or use it as a context
    manager."""

    def __init__(self, address: str | None = None, *, host: str = "127.0.0.1", port: int = 7071,
                 timeout: float = 60.0) -> None:  # fmt: skip
        self.address = address or f"{host}:{port}"
        self.timeout = timeout
        self._channel = grpc.insecure_channel(self.address)
        self._stub = pb_grpc.URLFrontierStub(self._channel)  # type: ignore[no-untyped-call]

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _call(self, name: str, request: Any) -> Any:
        try:
            return getattr(self._stub, name)(request, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._error(name, exc) from None

    def _error(self, name: str, exc: grpc.RpcError) -> FrontierError:
        code = exc.code()
        details = exc.details() or ""
        return FrontierError(f"{name} at {self.address}", code.name, details)

    def _stream(self, name: str, make: Callable[[], Iterable[_T]]) -> Iterator[_T]:
        try:
            yield from make()
        except grpc.RpcError as exc:
            raise self._error(name, exc) from None

    # -- putting URLs ---------------------------------------------------------------------------

    def put_urls(self, urls: Iterable[str | URL], *, crawl: str = "DEFAULT",
                 known: int | None = None, window: int = 10_000) -> Acks:  # fmt: skip
        """Add or update URLs through one ``PutURLs`` stream, at most ``window`` waiting for
        their acks. A ``str`` is a URL of ``crawl``, discovered (added if new) or, with
        ``known``, known with that next fetch date (epoch seconds; 0: completed)."""

        def items() -> Iterator[pb.URLItem]:
            for url in urls:
                if isinstance(url, str):
                    url = URL(url, crawl=crawl, refetchable_from=known)
                yield url.item()

        def count(acks: Iterator[pb.AckMessage]) -> Acks:
            return _tally((ack.ID, ack.status) for ack in acks)

        return self._windowed("PutURLs", items(), window, count)

    def put_discovered(self, urls: Iterable[str | URL], *, crawl: str = "DEFAULT",
                       batch: int = 256, window: int = 16) -> Acks:  # fmt: skip
        """Add the URLs that are new, in batches of ``batch`` through one ``PutDiscovered``
        stream (``window`` batches waiting for their acks); through ``PutURLs`` on a server
        without ``PutDiscovered``. A ``str`` is a URL of ``crawl``."""
        infos = (URL(u, crawl=crawl) if isinstance(u, str) else u for u in urls)
        try:  # an empty batch first: does the server have PutDiscovered?
            list(self._stub.PutDiscovered(iter([pb.DiscoveredBatch(ID="probe")])))
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                return self.put_urls(infos, window=window * batch)
            raise self._error("PutDiscovered", exc) from None
        sent: dict[str, tuple[URL, ...]] = {}

        def batches() -> Iterator[pb.DiscoveredBatch]:
            for n in itertools.count():
                chunk = tuple(itertools.islice(infos, batch))
                if not chunk:
                    return
                sent[f"batch-{n}"] = chunk
                yield pb.DiscoveredBatch(ID=f"batch-{n}", items=[u.info() for u in chunk])

        def count(acks: Iterator[pb.BatchAck]) -> Acks:
            return _tally(
                (url.url, status)
                for ack in acks
                for url, status in zip(sent.pop(ack.ID), ack.statuses, strict=True)
            )

        return self._windowed("PutDiscovered", batches(), window, count)

    def _windowed(self, name: str, requests: Iterator[Any], window: int,
                  count: Callable[[Iterator[Any]], Acks]) -> Acks:  # fmt: skip
        """A bidirectional stream of ``requests``, one answer each, at most ``window`` of them
        unanswered; an error raised reading ``requests`` is raised here, not lost in gRPC."""
        room = threading.Semaphore(window)
        over = threading.Event()
        raised: list[BaseException] = []

        def send() -> Iterator[Any]:
            try:
                for request in requests:
                    while not room.acquire(timeout=0.2):
                        if over.is_set():
                            return
                    yield request
            except Exception as exc:
                raised.append(exc)

        def answers(call: Iterator[Any]) -> Iterator[Any]:
            for answer in call:
                room.release()
                yield answer

        try:
            acks = count(answers(getattr(self._stub, name)(send())))
        except grpc.RpcError as exc:
            raise raised[0] if raised else self._error(name, exc) from None
        finally:
            over.set()
        if raised:
            raise raised[0]
        return acks

    # -- getting URLs ---------------------------------------------------------------------------

    def get_urls(self, *, max_urls_per_queue: int = 0, max_queues: int = 0, key: str = "",
                 crawl: str | None = None, delay_requestable: int = 0) -> list[URL]:  # fmt: skip
        """URLs due for fetching, each now in process for ``delay_requestable`` seconds (0: the
        server's default, 30 s); of ``crawl`` or, when ``None``, of any crawl; of the queue
        ``key`` only (which needs a crawl). Limits of 0 are the server's."""
        request = pb.GetParams(max_urls_per_queue=max_urls_per_queue, max_queues=max_queues,
                               key=key, delay_requestable=delay_requestable,
                               **_crawl_item(crawl))  # fmt: skip
        return list(self._stream("GetURLs", lambda: map(URL.of_info, self._stub.GetURLs(request))))

    # -- crawls and queues ----------------------------------------------------------------------

    def list_nodes(self) -> list[str]:
        return list(self._call("ListNodes", pb.Empty()).values)

    def list_crawls(self) -> list[str]:
        return list(self._call("ListCrawls", pb.Local()).values)

    def list_queues(self, *, crawl: str = "DEFAULT", start: int = 0, size: int = 100,
                    include_inactive: bool = False) -> QueueList:  # fmt: skip
        """A page of the crawl's queues: those with URLs to hand out and not blocked, or all
        with ``include_inactive``."""
        answer = self._call("ListQueues", pb.Pagination(
            start=start, size=size, include_inactive=include_inactive, crawlID=crawl))  # fmt: skip
        return QueueList(answer.crawlID, tuple(answer.values), answer.start, answer.total)

    def stats(self, *, crawl: str = "DEFAULT", key: str = "") -> FrontierStats:
        """The crawl's counts, or those of its queue ``key``."""
        s = self._call("GetStats", pb.QueueWithinCrawlParams(key=key, crawlID=crawl))
        return FrontierStats(s.crawlID, s.size, s.inProcess, s.numberOfQueues, dict(s.counts))

    def delete_queue(self, key: str, *, crawl: str = "DEFAULT") -> int:
        """Remove a queue with its URLs; how many URLs went."""
        request = pb.QueueWithinCrawlParams(key=key, crawlID=crawl)
        return int(self._call("DeleteQueue", request).value)

    def delete_crawl(self, crawl: str) -> int:
        """Remove a crawl with its queues and URLs; how many URLs went."""
        return int(self._call("DeleteCrawl", pb.DeleteCrawlMessage(value=crawl)).value)

    # -- control --------------------------------------------------------------------------------

    def block_queue_until(self, key: str, until: float, *, crawl: str = "DEFAULT") -> None:
        """Hand out nothing of the queue before ``until`` (epoch seconds; 0 unblocks)."""
        self._call("BlockQueueUntil", pb.BlockQueueParams(key=key, time=int(until), crawlID=crawl))

    def set_delay(self, delay: int, *, key: str = "", crawl: str = "DEFAULT") -> None:
        """Seconds between two URLs of the queue ``key``; of every queue of every crawl (the
        default) with an empty ``key``."""
        request = pb.QueueDelayParams(key=key, delay_requestable=delay, crawlID=crawl)
        self._call("SetDelay", request)

    def set_crawl_limit(self, key: str, limit: int, *, crawl: str = "DEFAULT") -> None:
        """Hand out nothing more of the queue once ``limit`` of its URLs completed (0: no
        limit)."""
        self._call("SetCrawlLimit", pb.CrawlLimitParams(key=key, limit=limit, crawlID=crawl))

    def set_active(self, active: bool) -> None:
        """Whether the server hands out URLs at all (puts work either way)."""
        self._call("SetActive", pb.Active(state=active))

    def get_active(self) -> bool:
        return bool(self._call("GetActive", pb.Local()).state)

    def set_log_level(self, level: str = "INFO", *, package: str = "") -> None:
        """The server's log level (``TRACE``, ``DEBUG``, ``INFO``, ``WARN``, ``ERROR``) of the
        logger ``package`` (the root logger when empty)."""
        if level.upper() not in _LEVELS:
            raise ValueError(f"a log level is one of {', '.join(_LEVELS)}, not {level!r}")
        request = pb.LogLevelParams(package=package, level=level.upper())
        self._call("SetLogLevel", request)

    # -- URLs -----------------------------------------------------------------------------------

    def url_status(self, url: str, *, key: str = "", crawl: str = "DEFAULT") -> URL | None:
        """Where the URL stands (known: its ``refetchable_from`` is 0 once completed), or
        ``None`` when the crawl (the queue ``key``, the host's when empty) does not hold it."""
        try:
            item = self._stub.GetURLStatus(pb.URLStatusRequest(url=url, key=key, crawlID=crawl),
                                           timeout=self.timeout)  # fmt: skip
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise self._error("GetURLStatus", exc) from None
        return URL.of_item(item)

    def list_urls(self, *, crawl: str = "DEFAULT", key: str = "", filter: str | None = None,
                  ignore_case: bool = False, start: int = 0, page: int = 1000
                  ) -> Iterator[URL]:  # fmt: skip
        """The crawl's (the queue's) URLs from offset ``start``, known (see ``url_status``),
        those containing ``filter`` only when set; asked for ``page`` at a time."""
        return map(URL.of_item, self._items(crawl, key, filter, ignore_case, start, page))

    def _items(self, crawl: str, key: str, filter: str | None, ignore_case: bool, start: int,
               page: int) -> Iterator[pb.URLItem]:  # fmt: skip
        while True:
            request = pb.ListUrlParams(start=start, size=page, key=key, crawlID=crawl,
                                       filter=filter, ignoreCase=ignore_case)  # fmt: skip
            items = list(self._stream("ListURLs", functools.partial(self._stub.ListURLs, request)))
            yield from items
            if len(items) < page:
                return
            start += page

    def count_urls(self, *, crawl: str = "DEFAULT", key: str = "", filter: str | None = None,
                   ignore_case: bool = False) -> int:  # fmt: skip
        """How many URLs the crawl (the queue) holds, completed ones included; those
        containing ``filter`` only when set."""
        request = pb.CountUrlParams(key=key, crawlID=crawl, filter=filter, ignoreCase=ignore_case)
        return int(self._call("CountURLs", request).value)

    def purge_urls(self, *, crawl: str = "DEFAULT", key: str = "", days: int = 0) -> int:
        """Remove the crawl's (the queue's) URLs created more than ``days`` days ago (0: all
        created until now); how many went."""
        request = pb.PurgeUrlParams(key=key, crawlID=crawl, days=days)
        return int(self._call("PurgeURLs", request).value)

    # -- dump files -----------------------------------------------------------------------------

    def dump(self, path: str | os.PathLike[str], *, crawl: str | None = None) -> int:
        """Write every URL of ``crawl`` (of every crawl when ``None``) to ``path`` (gzip for a
        name ending in ``.gz``; ``-`` for stdout), one JSON ``URLItem`` a line; how many.
        ``put_urls(read_urls(path))`` puts them back."""
        crawls = self.list_crawls() if crawl is None else [crawl]
        n = 0
        with open_text(path, "w") as file:
            for name in crawls:
                for item in self._items(name, "", None, False, 0, 1000):
                    file.write(dump_line(item) + "\n")
                    n += 1
        return n
