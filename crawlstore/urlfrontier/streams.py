"""``PutURLs`` and ``PutDiscovered``: each stream is read on a thread of its own, its items
written through the service's group commit, and acknowledged once committed. At most a window
of items (of batches) waits for its acks: then the stream is not read, and HTTP/2 flow
control holds the client back."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from ..frontier import Admission
from . import urlfrontier_pb2 as pb
from .convert import Unacceptable, seed_of, store_crawl

if TYPE_CHECKING:
    from ..seed import Seed
    from .service import FrontierService

__all__ = ["put_discovered", "put_url", "put_urls"]

log = logging.getLogger("crawlstore.urlfrontier")
_M = TypeVar("_M")
_I = TypeVar("_I")
OK, SKIPPED, FAIL = pb.AckMessage.OK, pb.AckMessage.SKIPPED, pb.AckMessage.FAIL


class _End:
    __slots__ = ("items",)

    def __init__(self, items: int) -> None:
        self.items = items


def _stream(
    request_iterator: Iterator[_I],
    context: grpc.ServicerContext,
    window: int,
    handle: Callable[[_I, Callable[[_M], None]], None],
) -> Iterator[_M]:
    """Answers to every item of a stream, read on its own thread: ``handle(item, answer)``
    submits the item; ``answer`` is called (on any thread) once it committed."""
    answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
    room = threading.Semaphore(window)

    def read() -> None:
        items = 0
        try:
            for item in request_iterator:
                while not room.acquire(timeout=0.5):
                    if not context.is_active():
                        return
                items += 1
                handle(item, answers.put)
        except grpc.RpcError:
            pass  # the client went away (cancelled after its first ack, say): nothing to say
        except Exception:
            log.exception("reading a stream failed")
        finally:
            answers.put(_End(items))

    threading.Thread(target=read, name="urlfrontier-stream", daemon=True).start()
    sent = 0
    expected: int | None = None
    while expected is None or sent < expected:
        answer = answers.get()
        if isinstance(answer, _End):
            expected = answer.items
            continue
        sent += 1
        room.release()
        yield answer


def _accept(service: FrontierService, info: pb.URLInfo, call: str) -> tuple[str, Seed] | None:
    """The store crawl and the seed of a URL; None (logged, counted) when it is SKIPPED."""
    try:
        return store_crawl(info.crawlID), seed_of(info)
    except Unacceptable as exc:
        log.info("%s: SKIPPED %r: %s", call, info.url[:200], exc)
        service.metrics.ignored.inc()
        return None


def put_url(service: FrontierService, item: pb.URLItem,
            answer: Callable[[pb.AckMessage], None]) -> None:  # fmt: skip
    """Submits one ``PutURLs`` item to the group commit; ``answer`` gets its ack (on any
    thread), after the commit that holds its URL returned."""
    metrics = service.metrics
    metrics.put.inc()
    which = item.WhichOneof("item")
    if which is None:
        answer(pb.AckMessage(ID=item.ID, status=SKIPPED))
        return
    discovered = which == "discovered"
    info = item.discovered.info if discovered else item.known.info
    ack_id = item.ID or info.url
    if service.closing:
        answer(pb.AckMessage(ID=ack_id, status=FAIL))
        return
    accepted = _accept(service, info, "PutURLs")
    if accepted is None:
        answer(pb.AckMessage(ID=ack_id, status=SKIPPED))
        return
    name, seed = accepted
    if discovered:
        metrics.discovered.labels("true").inc()

        def run() -> Any:
            return service.writer(name).push_many([seed], new_only=True)[0]
    else:
        metrics.discovered.labels("false").inc()
        date = item.known.refetchable_from_date
        if date == 0:
            metrics.completed.inc()

        def run() -> Any:
            service.writer(name).overwrite_many([(seed, float(date) if date else None)])
            return None

    def done(result: Admission | None, error: BaseException | None) -> None:
        if error is not None:
            log.warning("PutURLs: FAIL %r: %s", info.url[:200], error)
            status = FAIL
        elif result is not None and not result:
            status = SKIPPED
        else:
            status = OK
        answer(pb.AckMessage(ID=ack_id, status=status))

    service.committer.submit(run, done)


def put_urls(service: FrontierService, request_iterator: Iterator[pb.URLItem],
             context: grpc.ServicerContext) -> Iterator[pb.AckMessage]:  # fmt: skip
    return _stream(request_iterator, context, service.window,
                   lambda item, answer: put_url(service, item, answer))  # fmt: skip


def put_discovered(service: FrontierService, request_iterator: Iterator[pb.DiscoveredBatch],
                   context: grpc.ServicerContext) -> Iterator[pb.BatchAck]:  # fmt: skip
    metrics = service.metrics

    def handle(batch: pb.DiscoveredBatch, answer: Callable[[pb.BatchAck], None]) -> None:
        n = len(batch.items)
        metrics.put.inc(n)
        metrics.discovered.labels("true").inc(n)
        statuses = [OK] * n
        if service.closing:
            answer(pb.BatchAck(ID=batch.ID, statuses=[FAIL] * n))
            return
        by_crawl: dict[str, tuple[list[int], list[Seed]]] = {}
        for i, info in enumerate(batch.items):
            accepted = _accept(service, info, "PutDiscovered")
            if accepted is None:
                statuses[i] = SKIPPED
                continue
            name, seed = accepted
            where, seeds = by_crawl.setdefault(name, ([], []))
            where.append(i)
            seeds.append(seed)

        def run() -> list[tuple[list[int], list[Admission]]]:
            return [(where, service.writer(name).push_many(seeds, new_only=True))
                    for name, (where, seeds) in by_crawl.items()]  # fmt: skip

        def done(result: Any, error: BaseException | None) -> None:
            if error is not None:
                log.warning("PutDiscovered: FAIL batch %r: %s", batch.ID, error)
                answer(pb.BatchAck(ID=batch.ID, statuses=[FAIL] * n))
                return
            for where, admissions in result:
                for i, admission in zip(where, admissions, strict=True):
                    if not admission:
                        statuses[i] = SKIPPED
            answer(pb.BatchAck(ID=batch.ID, statuses=statuses))

        if by_crawl:
            service.committer.submit(run, done)
        else:
            answer(pb.BatchAck(ID=batch.ID, statuses=statuses))

    return _stream(request_iterator, context, service.batches, handle)
