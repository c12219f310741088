"""Where a seed goes in its queue, and what a queue's limit counts: shared by the core, its
listings and its exports."""

from __future__ import annotations

import functools

from ..seed import Seed
from .spi import Entry, QueueRecord

__all__ = ["finished_count", "place_sequence", "queue_place"]

_PRIORITY_TOP = 2**31 - 1
#: ``Entry((rank, cls, seq))`` without the Python-level ``__new__`` of a named tuple: a push
#: makes one.
_entry = functools.partial(tuple.__new__, Entry)
_U64_MAX = 2**64 - 1


def place_sequence(order: str, cls: int, seq: int) -> int:
    """The last part of a queue place, from the crawl's sequence number (pushed seeds of a
    lifo crawl count down, so the newest is first), and back: it is its own inverse."""
    return _U64_MAX - seq if order == "lifo" and cls == 1 else seq


def queue_place(order: str, seed: Seed, cls: int, seq: int) -> Entry:
    """Where a seed goes in its queue: rank (its priority, in a priority crawl), class (0:
    coming back, ahead of pushed seeds of its rank), sequence."""
    rank = _PRIORITY_TOP - seed.priority if order == "priority" else 0
    return _entry((rank, cls, place_sequence(order, cls, seq)))


def finished_count(q: QueueRecord) -> int:
    """Seeds of the queue that finished (done, failed or skipped): what its limit caps."""
    c = q.counts
    return c.get("done", 0) + c.get("failed", 0) + c.get("skipped", 0)
