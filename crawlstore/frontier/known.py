"""The core's overwrite of URLs, for protocols that update a URL without a lease token (the
URL Frontier's known URLs): whatever state the URL is in, its lease (anyone's) ends, its seed
is replaced, and it is scheduled again or finished for good, in the queue its new seed names
(another than its own when the new seed names another: the URL moves there)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import CorruptRecord
from ..seed import Seed
from . import spi
from .protocol import check_seed, check_time
from .spi import DONE, IN_FLIGHT, REVISIT, CrawlRecord, QueueRecord, UrlRecord

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = ["overwrite"]


def overwrite(core: CoreFrontier, items: Iterable[tuple[Seed, float | None]]) -> None:
    batch = list(items)
    for seed, at in batch:
        check_seed(seed)
        if at is not None:
            check_time("at", at)
    if not batch:
        return
    storage = core.storage

    def _write() -> None:
        crawl = core.crawl_for_write()
        now = core.clock()
        queues: dict[str, QueueRecord] = {}

        def queue(key: str) -> QueueRecord:
            q = queues.get(key)
            if q is None:
                q = queues[key] = core.unit(crawl).queue(key, now)
            return q

        for seed, at in batch:
            fresh = seed.with_lease(None) if seed.lease is not None else seed
            url = storage.url(crawl, seed.fingerprint)
            q = queue(core.unit(crawl).key_for(seed))
            if url is None:
                url = UrlRecord(seed.fingerprint, fresh, spi.SCHEDULED, q.key, None, now)
                core.unit(crawl).count(q, admitted=1)
            else:
                url = _take_out(core, crawl, queue(url.queue), url)
                if url.queue != q.key:  # a record of the new queue, created when first admitted
                    storage.delete_url(crawl, url)
                    url = UrlRecord(url.fp, fresh, url.state, q.key, None, url.created,
                                    url.outcome)  # fmt: skip
            url.seed = fresh
            if at is None:
                url.state, url.where, url.kind = DONE, None, None
                url.outcome = spi.Visit(now, None, None, DONE)
                storage.save_url(crawl, q, url)
                core.unit(crawl).count(q, done=1, **{spi.FINISHED[DONE]: 1})
            else:
                core.unit(crawl).schedule(q, url, at, REVISIT)
        for q in queues.values():
            core.unit(crawl).place(q, now)

    storage.run(_write)


def _take_out(core: CoreFrontier, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord) -> UrlRecord:
    """Take a URL out of where it is in its queue ``q``: its lease ends, whoever holds it."""
    if url.state != IN_FLIGHT:
        core.unit(crawl).unplace(q, url)
        return url
    lease = core.storage.get_lease(crawl, url.token)
    if lease is None:
        raise CorruptRecord(f"URL {url.fp.hex()} of crawl {core.name!r} is in flight without "
                            "its lease")  # fmt: skip
    return core.unit(crawl).end(q, lease)
