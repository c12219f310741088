"""The core's overwrite of URLs, for protocols that update a URL without a lease token (the
URL Frontier's known URLs): whatever state the URL is in, its lease (anyone's) ends, its seed
is replaced, and it is scheduled again or finished for good, in the queue its new seed names
(another than its own when the new seed names another: the URL moves there)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, cast

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
    if core.storage.capabilities.partitions > 1:
        for run in _unique_runs(batch):  # a URL named again: after its earlier overwrite
            _partitioned(core, run)
    else:
        core.storage.run(lambda: _overwrite(core, batch))


def _overwrite(core: CoreFrontier, batch: list[tuple[Seed, float | None]],
               moved: dict[bytes, UrlRecord] | None = None) -> None:  # fmt: skip
    """Overwrite in the current unit. ``moved``: the records, read already, of URLs that move
    here from a queue of another partition, whose unit takes them out of it after this one."""
    storage = core.storage
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
        q = queue(core.unit(crawl).key_for(seed))
        old = moved.get(seed.fingerprint) if moved is not None else None
        url = storage.url(crawl, seed.fingerprint) if old is None else None
        if old is not None:  # a record of the new queue, created when first admitted
            url = UrlRecord(old.fp, fresh, old.state, q.key, None, old.created, old.outcome)
        elif url is None:
            url = UrlRecord(seed.fingerprint, fresh, spi.SCHEDULED, q.key, None, now)
            core.unit(crawl).count(q, admitted=1)
        else:
            url = _take_out(core, crawl, queue(url.queue), url)
            if url.queue != q.key:  # as above
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


def _unique_runs(
    batch: list[tuple[Seed, float | None]],
) -> Iterator[list[tuple[Seed, float | None]]]:
    """The batch in runs that name each URL once, in order."""
    run: list[tuple[Seed, float | None]] = []
    named: set[bytes] = set()
    for item in batch:
        fp = item[0].fingerprint
        if fp in named:
            yield run
            run, named = [], set()
        run.append(item)
        named.add(fp)
    yield run


def _partitioned(core: CoreFrontier, batch: list[tuple[Seed, float | None]]) -> None:
    """One unit a partition of the new queues; a URL that moves from a queue of another
    partition is written in its new queue first, then taken out of its old one by a unit on
    that partition: a process killed between the two leaves it in both (crawled twice, never
    lost)."""
    storage = cast("spi.Partitioned", core.storage)
    crawl = core.storage.run(core.crawl_for_write)
    keys = [core._key_for(crawl, seed) for seed, _ in batch]
    claimed = storage.claim_queues(crawl, [seed.fingerprint for seed, _ in batch], keys)
    groups: dict[int, list[int]] = {}
    leaving: dict[int, list[UrlRecord]] = {}
    moved: dict[bytes, UrlRecord] = {}
    for i, ((seed, _), key, was) in enumerate(zip(batch, keys, claimed, strict=True)):
        p = storage.partition_of(crawl, key)
        groups.setdefault(p, []).append(i)
        old_p = storage.partition_of(crawl, was)
        if old_p != p:

            def read(fp: bytes = seed.fingerprint) -> UrlRecord | None:
                return storage.url(crawl, fp)

            old = storage.run_in(old_p, read)
            if old is not None:
                moved[old.fp] = old
                leaving.setdefault(old_p, []).append(old)
    writes: list[tuple[int, Callable[[], None]]] = []
    for p, indexes in groups.items():

        def write(indexes: list[int] = indexes) -> None:
            _overwrite(core, [batch[i] for i in indexes], moved)

        writes.append((p, write))
    storage.run_each(writes)  # the new places first, then the old ones let go
    leaves: list[tuple[int, Callable[[], None]]] = []
    for p, urls in leaving.items():

        def leave(urls: list[UrlRecord] = urls) -> None:
            _leave(core, urls)

        leaves.append((p, leave))
    storage.run_each(leaves)


def _leave(core: CoreFrontier, urls: list[UrlRecord]) -> None:
    """Take these URLs out of their old queues (in this unit's partition), where they still
    are."""
    crawl = core.crawl_for_write()
    now = core.clock()
    queues: dict[str, QueueRecord] = {}
    for old in urls:
        url = core.storage.url(crawl, old.fp)
        if url is None or url.queue != old.queue:
            continue  # gone meanwhile
        q = queues.get(url.queue) or queues.setdefault(
            url.queue, core.unit(crawl).queue(url.queue, now)
        )
        core.storage.delete_url(crawl, _take_out(core, crawl, q, url))
    for q in queues.values():
        core.unit(crawl).place(q, now)


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
