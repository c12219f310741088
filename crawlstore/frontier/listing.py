"""The queue and URL operations of the frontier core: listing, reading and setting queues,
deleting a queue or the crawl, the status of a URL, listing, counting and purging URLs. Each
reads or writes only the queue or crawl it names; counts come from counters, unless they filter
on what only each URL's record says (its URL, its last outcome).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidArgument
from ..seed import Seed
from ..url import Fingerprint
from . import indexes, spi
from .policy import check_cap, check_delay
from .protocol import (
    OUTCOMES,
    STATES,
    UNSET,
    LastOutcome,
    QueueInfo,
    URLStatus,
    check_limit,
    check_time,
)
from .spi import IN_FLIGHT, SCHEDULED, CrawlRecord, QueueRecord, UrlRecord

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = ["count", "delete_crawl", "delete_queue", "purge", "queue", "queues", "scan",
           "set_queue", "url", "urls"]  # fmt: skip


# -- queues ---------------------------------------------------------------------------------


def _info(q: QueueRecord) -> QueueInfo:
    counts = {name: n for name, n in q.counts.items() if name in spi.COUNTS}
    return QueueInfo(q.key, q.queued, q.in_flight, q.scheduled, q.last, q.blocked, q.delay,
                     q.cap, q.limit, q.created, counts)  # fmt: skip


def queue(core: CoreFrontier, key: str) -> QueueInfo | None:
    if not isinstance(key, str):
        raise TypeError(f"a queue key is a str, not {type(key).__name__}: {key!r:.100}")

    def _read() -> QueueInfo | None:
        crawl = core.existing_crawl()
        q = core.storage.queue(crawl, key) if crawl is not None else None
        return _info(q) if q is not None else None

    return core._view(_read)


def queues(core: CoreFrontier, *, after: str | None = None, limit: int = 100) -> list[QueueInfo]:
    check_limit(limit)

    def _read() -> list[QueueInfo]:
        crawl = core.existing_crawl()
        if crawl is None:
            return []
        return [_info(q) for q in core.storage.queues(crawl, after, limit)]

    return core._view(_read)


def set_queue(
    core: CoreFrontier,
    key: str,
    *,
    delay: float | None = UNSET,
    max_in_flight: int | None = UNSET,
    blocked_until: float = UNSET,
    limit: int | None = UNSET,
) -> QueueInfo:
    if not isinstance(key, str):
        raise TypeError(f"a queue key is a str, not {type(key).__name__}: {key!r:.100}")
    if delay is not UNSET:
        check_delay("delay", delay)
    if max_in_flight is not UNSET:
        check_cap(max_in_flight)
    if blocked_until is not UNSET:
        check_time("blocked_until", blocked_until)
    if limit is not UNSET and limit is not None:
        check_limit(limit)

    def _write() -> QueueInfo:
        crawl = core.crawl_for_write()
        now = core.clock()
        q = core.unit(crawl).queue(key, now)
        if delay is not UNSET:
            q.delay = delay
        if max_in_flight is not UNSET:
            q.cap = max_in_flight
        if blocked_until is not UNSET:
            q.blocked = blocked_until
        if limit is not UNSET:
            q.limit = limit
        core.unit(crawl).place(q, now, rotate=True)
        return _info(q)

    return core.run_on(_write, key=key)


def delete_queue(core: CoreFrontier, key: str) -> int:
    def _write() -> int:
        crawl = core.existing_crawl()
        q = core.storage.queue(crawl, key) if crawl is not None else None
        if crawl is None or q is None:
            return 0
        finished = {name: -q.counts.get(name, 0) for name in spi.FINISHED.values()}
        core.unit(crawl).count(None, queued=-q.queued, in_flight=-q.in_flight,
                    scheduled=-q.scheduled, revisits=-q.revisits, **finished)  # fmt: skip
        indexes.uncount_queue(core.storage, crawl, q)
        return core.storage.delete_queue(crawl, q)

    return core.run_on(_write, key=key, create=False)


def delete_crawl(core: CoreFrontier) -> int:
    """Remove the crawl and everything it holds; how many URLs it knew."""

    def _write() -> int:
        crawl = core.existing_crawl()
        if crawl is None:
            return 0
        removed = core.storage.delete_crawl(crawl)
        core.forget_crawl(crawl)
        return removed

    return core.storage.run(_write)


# -- URLs -----------------------------------------------------------------------------------


def _status(core: CoreFrontier, url: UrlRecord, crawl: CrawlRecord) -> URLStatus:
    at = None
    if url.state == IN_FLIGHT:
        lease = core.storage.get_lease(crawl, url.token)
        at = lease.expires if lease is not None else None
    elif url.state == SCHEDULED:
        at = url.slot.at
    outcome = None
    if url.outcome is not None:
        when, status, reason, finished = url.outcome
        outcome = LastOutcome(when, finished, status, reason)
    return URLStatus(url.seed.url, Fingerprint(url.fp), url.state, url.queue, at, url.kind,
                     url.created, outcome, url.seed)  # fmt: skip


def url(core: CoreFrontier, url: str | bytes) -> URLStatus:
    if isinstance(url, str):
        seed = Seed.get(url)
        fp, shown = seed.fingerprint, seed.url
    elif isinstance(url, bytes) and len(url) == 16:
        fp, shown = Fingerprint(url), ""
    else:
        raise TypeError(f"a URL (str) or a fingerprint (16 bytes): {url!r:.100}")

    def _read() -> URLStatus:
        crawl = core.existing_crawl()
        record = core.storage.url(crawl, fp) if crawl is not None else None
        if record is None:
            return URLStatus(shown, fp, "unknown")
        return _status(core, record, crawl)  # type: ignore[arg-type]

    return core._view(_read)


def scan(
    core: CoreFrontier, crawl: CrawlRecord, queue: str | None, after: bytes | None
) -> Iterator[UrlRecord]:
    q = None
    if queue is not None:
        q = core.storage.queue(crawl, queue)
        if q is None:
            return
    if after is None:
        yield from core.storage.iter_urls(crawl, q)
        return
    while True:
        page = core.storage.urls(crawl, q, after, 256)
        yield from page
        if len(page) < 256:
            return
        after = page[-1].fp


@dataclass(frozen=True, slots=True)
class _Filter:
    """Which URLs a listing or count keeps: of a state, whose URL contains a string, whose last
    outcome is of a final state, with an HTTP status, with a reason (None: any)."""

    state: str | None = None
    contains: str | None = None
    outcome: str | None = None
    http_status: int | None = None
    reason: str | None = None

    @property
    def scans(self) -> bool:
        """Whether it needs each URL's record (the gauges answer a state alone)."""
        return any(x is not None for x in (self.contains, self.outcome, self.http_status,
                                           self.reason))  # fmt: skip

    def keeps(self, url: UrlRecord) -> bool:
        if self.state is not None and url.state != self.state:
            return False
        if self.contains is not None and self.contains not in url.seed.url:
            return False
        if self.outcome is None and self.http_status is None and self.reason is None:
            return True
        if url.outcome is None:
            return False
        _, status, reason, finished = url.outcome
        return ((self.outcome is None or finished == self.outcome)
                and (self.http_status is None or status == self.http_status)
                and (self.reason is None or reason == self.reason))  # fmt: skip


def _filter(
    state: str | None,
    contains: str | None,
    outcome: str | None,
    http_status: int | None,
    reason: str | None,
) -> _Filter:
    """The filter of these arguments, each checked: ``InvalidArgument`` names a bad one."""
    if state is not None and (not isinstance(state, str) or state not in STATES):
        raise InvalidArgument(f"no URL state {state!r:.100}: one of {', '.join(STATES)}")
    if contains is not None and not isinstance(contains, str):
        raise InvalidArgument(f"contains is a str: {contains!r:.100}")
    if outcome is not None and (not isinstance(outcome, str) or outcome not in OUTCOMES):
        raise InvalidArgument(f"no outcome {outcome!r:.100}: one of {', '.join(OUTCOMES)}")
    if http_status is not None and (
        isinstance(http_status, bool) or not isinstance(http_status, int)
        or not 100 <= http_status <= 599
    ):  # fmt: skip
        raise InvalidArgument(f"http_status is an HTTP status code, an int from 100 to 599: "
                              f"{http_status!r:.100}")  # fmt: skip
    if reason is not None and (not isinstance(reason, str) or not reason):
        raise InvalidArgument(f"reason is a non-empty str: {reason!r:.100}")
    return _Filter(state, contains, outcome, http_status, reason)


def urls(
    core: CoreFrontier,
    *,
    queue: str | None = None,
    state: str | None = None,
    contains: str | None = None,
    outcome: str | None = None,
    http_status: int | None = None,
    reason: str | None = None,
    after: bytes | None = None,
    limit: int = 100,
) -> list[URLStatus]:
    check_limit(limit)
    keep = _filter(state, contains, outcome, http_status, reason)
    if after is not None and not isinstance(after, bytes):
        raise TypeError(f"after is a fingerprint (bytes), not {type(after).__name__}")

    def _read() -> list[URLStatus]:
        out: list[URLStatus] = []  # made in the read: a read that is tried again starts over
        crawl = core.existing_crawl()
        if crawl is None or limit == 0:
            return out
        for url in scan(core, crawl, queue, after):
            if keep.keeps(url):
                out.append(_status(core, url, crawl))
                if len(out) >= limit:
                    break
        return out

    return core._view(_read)


def count(
    core: CoreFrontier,
    *,
    queue: str | None = None,
    state: str | None = None,
    contains: str | None = None,
    outcome: str | None = None,
    http_status: int | None = None,
    reason: str | None = None,
) -> int:
    keep = _filter(state, contains, outcome, http_status, reason)

    def _read() -> int:
        crawl = core.existing_crawl()
        if crawl is None:
            return 0
        if not keep.scans:
            if queue is not None:
                q = core.storage.queue(crawl, queue)
                c: dict[str, int] = _queue_counts(q) if q is not None else {}
            else:
                c = core.storage.totals(crawl)
            return _count_of(c, state)
        return sum(1 for url in scan(core, crawl, queue, None) if keep.keeps(url))

    return core._view(_read)


def purge(core: CoreFrontier, *, before: float, queue: str | None = None) -> int:
    """Forget the URLs first admitted before ``before``, a batch of them a write unit, so that
    memory stays bounded at any size (inside a transaction, the batches join it)."""
    check_time("before", before)
    after: bytes | None = None
    total = 0

    def _batch() -> tuple[int, bytes | None]:
        crawl = core.existing_crawl()
        if crawl is None:
            return 0, None
        now = core.clock()
        scanned: list[UrlRecord] = []
        for url in scan(core, crawl, queue, after):
            scanned.append(url)
            if len(scanned) >= _PURGE_BATCH:
                break
        queues: dict[str, QueueRecord] = {}
        gone = [url for url in scanned if url.created < before]
        for url in gone:
            q = queues.get(url.queue) or queues.setdefault(
                url.queue, core.unit(crawl).queue(url.queue, now)
            )
            if url.state == IN_FLIGHT:
                lease = core.storage.get_lease(crawl, url.token)
                if lease is not None:
                    core.unit(crawl).end(q, lease)
            core.unit(crawl).unplace(q, url)
            core.storage.delete_url(crawl, url)
        for q in queues.values():
            core.unit(crawl).place(q, now)
        last = scanned[-1].fp if len(scanned) >= _PURGE_BATCH else None
        return len(gone), last

    for run in core.units(key=queue):  # (each partition in turn, where there are several)
        after = None
        while True:
            removed, after = run(_batch)
            total += removed
            if after is None:
                break
    return total


#: URL records a purge reads in one write unit.
_PURGE_BATCH = 1000


def _queue_counts(q: QueueRecord) -> dict[str, int]:
    return {**q.counts, "queued": q.queued, "in_flight": q.in_flight, "scheduled": q.scheduled}


def _count_of(c: dict[str, int], state: str | None) -> int:
    """URLs in ``state`` (None: all), from a queue's or the crawl's gauges."""
    if state is None:
        return sum(c.get(name, 0) for name in (*_ACTIVE_GAUGES, *spi.FINISHED.values()))
    return c.get(spi.FINISHED.get(state, state), 0)


_ACTIVE_GAUGES = ("queued", "in_flight", "scheduled")
