"""A crawl's bounded indexes written from its records, for a store of a format that had none
(its migration): its recent failures from its URLs' last outcomes, its revisits from their
schedule, and its blocked trap prefixes moved to their own namespace."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CorruptRecord
from . import indexes, spi
from .traps import move_blocked

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = ["reindex"]


def reindex(core: CoreFrontier) -> None:
    """Write the indexes of the core's crawl, which holds none yet, in one unit."""
    storage = core.storage

    def write() -> None:
        crawl = core.existing_crawl()
        if crawl is None:
            return
        queues: dict[str, spi.QueueRecord] = {}
        for url in storage.iter_urls(crawl, None):
            q = queues.get(url.queue)
            if q is None:
                q = storage.queue(crawl, url.queue)
                if q is None:
                    raise CorruptRecord(
                        f"URL {url.fp.hex()} of crawl {crawl.name!r} names "
                        f"queue {url.queue!r}, which it does not have"
                    )
                queues[url.queue] = q
            indexes.count_revisit(storage, crawl, q, url, 1)
            outcome = url.outcome
            if outcome is not None and outcome.state == spi.FAILED:
                indexes.note_failure(storage, crawl, q, url.seed.url, outcome)
        move_blocked(core)

    storage.run(write)
