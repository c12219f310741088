"""A crawl's bounded indexes written from its records, for a store of a format that had none
(its migration): its recent failures from its URLs' last outcomes, its revisits from their
schedule, and its blocked trap prefixes moved to their own namespace. Each write of them is
one that a second leaves as it is on Redis, so a migration stopped half way runs again."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from . import indexes, spi
from .traps import move_blocked

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = ["reindex"]

#: Queues listed at a time.
_PAGE = 500


def reindex(core: CoreFrontier) -> None:
    """Write the indexes of the core's crawl, which holds none yet: in one unit, or a unit a
    partition of a storage in partitions."""
    storage = core.storage
    if storage.capabilities.partitions == 1:

        def both() -> None:
            _index_urls(core)
            move_blocked(core)

        storage.run(both)
        return
    crawl = storage.view(core.existing_crawl)
    if crawl is None:
        return
    parts = cast(spi.Partitioned, storage)
    for partition in parts.partitions(crawl):
        parts.run_in(partition, lambda: _index_urls(core))
    storage.run(lambda: move_blocked(core))


def _index_urls(core: CoreFrontier) -> None:
    """The URLs of the queues the unit sees (every one, or its partition's), in its indexes."""
    storage = core.storage
    crawl = core.existing_crawl()
    after: str | None = None
    while crawl is not None:
        page = storage.queues(crawl, after, _PAGE)
        for q in page:
            for url in storage.iter_urls(crawl, q):
                indexes.count_revisit(storage, crawl, q, url, 1)
                outcome = url.outcome
                if outcome is not None and outcome.state == spi.FAILED:
                    indexes.note_failure(storage, crawl, q, url.seed.url, outcome)
        if len(page) < _PAGE:
            return
        after = page[-1].key
