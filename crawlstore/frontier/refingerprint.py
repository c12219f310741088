"""Moving a crawl's URLs to the fingerprints this crawlstore computes, after the canonical
form changed (``url.FINGERPRINT_VERSION``): a store of an older fingerprint version is
migrated by it when it is opened for writing.

A URL record keeps its seed, so its fingerprint is computed again; a URL whose fingerprint
changed moves, with its place (queued, scheduled, or, in flight, back at the front of its
queue: its lease named the old fingerprint). Two records that turn out to be one page (two
spellings the old form told apart) become one: the one furthest along is kept (finished, then
queued or in flight, then scheduled), the other leaves its queue and its gauges. What holds
fingerprints only (a seen set, validators) is for the store to carry over, from the moves
returned (``carry_over``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ..errors import CorruptRecord
from ..seed import Seed
from ..url import Fingerprint
from ..validators import Validators
from . import indexes, spi
from .spi import IN_FLIGHT, QUEUED, SCHEDULED, CrawlRecord, QueueRecord, UrlRecord

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = ["carry_over", "refingerprint"]

#: Which of two records of one page is kept: the lowest rank.
_RANK = {**dict.fromkeys(spi.FINISHED, 0), QUEUED: 1, IN_FLIGHT: 1, SCHEDULED: 2}


def refingerprint(core: CoreFrontier) -> dict[bytes, bytes]:
    """In the caller's write unit: move every URL of the core's crawl whose fingerprint
    changed; the moves, old fingerprint to new."""
    storage = core.storage
    crawl = core.existing_crawl()
    if crawl is None:
        return {}
    moving = []
    for url in storage.iter_urls(crawl, None):
        seed = Seed.from_record(url.seed.to_record())  # its fingerprint computed, not stored
        if seed.fingerprint != url.fp:
            moving.append((url, seed))
    now = core.clock()
    queues: dict[str, QueueRecord] = {}

    def queue(key: str) -> QueueRecord:
        if key not in queues:
            queues[key] = core.unit(crawl).queue(key, now)
        return queues[key]

    moved = {}
    for url, seed in moving:
        new = seed.fingerprint
        other = storage.url(crawl, new)
        if other is not None and (_RANK[other.state], other.fp) <= (_RANK[url.state], url.fp):
            _drop(core, crawl, queue(url.queue), url)  # the other one is further along
        else:
            if other is not None:
                _drop(core, crawl, queue(other.queue), other)
            _move(core, crawl, queue(url.queue), url, seed)
        moved[bytes(url.fp)] = bytes(new)
    for q in queues.values():
        core.unit(crawl).place(q, now)
    return moved


def _settle(core: CoreFrontier, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord) -> UrlRecord:
    """The URL as it is once a lease it is under ends: queued at the front of its queue."""
    if url.state != IN_FLIGHT:
        return url
    lease = core.storage.get_lease(crawl, url.token)
    if lease is None:
        raise CorruptRecord(f"URL {url.fp.hex()} is in flight without its lease")
    core.unit(crawl).requeue(q, lease)
    settled = core.storage.url(crawl, url.fp)
    assert settled is not None
    return settled


def _drop(core: CoreFrontier, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord) -> None:
    """Remove a URL that is another record's page, with its place and its gauges."""
    url = _settle(core, crawl, q, url)
    core.unit(crawl).unplace(q, url)
    core.storage.delete_url(crawl, url)


def _move(core: CoreFrontier, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord,
          seed: Seed) -> None:  # fmt: skip
    """Give a URL its seed's new fingerprint, in the same place."""
    storage, new = core.storage, seed.fingerprint
    url = _settle(core, crawl, q, url)
    if url.state == QUEUED:
        storage.unqueue(crawl, q, url.entry)
        storage.enqueue(crawl, q, url.entry, new)
    elif url.state == SCHEDULED:
        storage.unschedule(crawl, q, url.slot)
        storage.schedule(crawl, q, url.slot, new)
    storage.delete_url(crawl, url)
    moved = UrlRecord(new, seed.with_lease(None), url.state, url.queue, url.where, url.created,
                      url.outcome, url.kind)  # fmt: skip
    storage.save_url(crawl, q, moved)
    indexes.count_revisit(storage, crawl, q, url, -1)
    indexes.count_revisit(storage, crawl, q, moved, 1)


class _Seen(Protocol):
    def __contains__(self, fp: object) -> bool: ...
    def insert_many(self, fps: Sequence[bytes]) -> int: ...


def carry_over(moved: dict[bytes, bytes], seen: _Seen | None, validators: Validators) -> None:
    """Beside each moved URL's old fingerprint, its new one: in the seen set where it has the
    old one, in the validators where the old one has some. The old ones stay: a page seen
    before under its old fingerprint, whose URL record is gone, is not known by the new one."""
    if seen is not None:
        seen.insert_many([new for old, new in moved.items() if old in seen])
    for old, new in moved.items():
        found = validators.get(Fingerprint(old))
        if found is not None and validators.get(Fingerprint(new)) is None:
            validators.put(Fingerprint(new), found)
