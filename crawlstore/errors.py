"""Typed errors: every problem crawlstore reports is one of these, and names what was wrong."""

from __future__ import annotations


class CrawlstoreError(Exception):
    """Base class of every error crawlstore raises on purpose."""


class InvalidSeed(CrawlstoreError, ValueError):
    """A seed (URL, method, header, body, tag, priority or depth) that crawlstore refuses."""


class InvalidSnapshot(CrawlstoreError, ValueError):
    """Snapshot bytes, or export records, that do not decode to a crawlstore snapshot or crawl.
    ``record``: where in an export's stream the problem is (1 for its first record; for a
    stream cut short, the place of its missing end record), or None."""

    def __init__(self, message: str, *, record: int | None = None) -> None:
        super().__init__(message)
        self.record = record


class NotInFlight(CrawlstoreError, LookupError):
    """A report for a seed that the frontier did not hand out (or whose lease already ended)."""


class TransactionBusy(CrawlstoreError, RuntimeError):
    """A write from one asyncio task while another task of the same thread holds a transaction
    of the same store or frontier (it awaited inside it): waiting would block the event loop,
    joining would let the other task's rollback take this write back."""


class StoreError(CrawlstoreError):
    """A problem with a store file or its use."""


class NotAStore(StoreError):
    """The file exists but is not a crawlstore store; it was not modified."""


class IncompatibleStore(StoreError):
    """The store was written by a newer crawlstore (format or fingerprint version)."""


class OlderFormat(IncompatibleStore):
    """A store of an older format: opening it for writing migrates it; a read-only open
    refuses it, naming the command that migrates it."""


class StoreFull(StoreError):
    """The store reached its maximum size, or the disk is full; nothing committed was lost."""


class ReadOnlyStore(StoreError):
    """A write on a store opened with ``readonly=True``."""


class CorruptStore(StoreError):
    """A store file that is damaged (torn, truncated, garbled); it was not modified."""


class CorruptRecord(CorruptStore):
    """A stored record that does not decode; the message names the table and key."""


class TransactionConflict(StoreError):
    """Another client committed to what this transaction read, on a store whose transactions
    commit optimistically (Redis, format 2: the default); nothing of it was written:
    run it again. The store's own operations (a push, a pop, a report, a worker's group) run
    again by themselves; only a caller's ``with store.transaction():`` block sees this."""


class PartitionError(CrawlstoreError, RuntimeError):
    """A unit confined to one partition of a partitioned storage reached into another (or
    asked for what only a unit over every partition gives); the message names both."""


class InvalidArgument(CrawlstoreError, ValueError):
    """An argument out of its range: a NaN or infinite time, a negative delay, a name too long
    to be a key."""


class PolicyConflict(CrawlstoreError, ValueError):
    """A view opened with an order or queue mode other than its crawl's, which are fixed when
    the crawl is created."""


class InvalidValidator(CrawlstoreError, ValueError):
    """A validator (ETag, Last-Modified) that cannot be sent back in a request header."""


class InvalidInterval(CrawlstoreError, ValueError):
    """A revisit interval that is malformed, zero or negative."""


class JobdirError(CrawlstoreError, ValueError):
    """A Scrapy JOBDIR that cannot be imported as it is (a damaged queue, one left by an
    unclean stop, a kind of queue this version does not read); the message names the file."""
