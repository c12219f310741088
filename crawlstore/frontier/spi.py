"""The storage interface under the frontier core: records, and the operations a storage offers.

A storage keeps data and makes no policy decision: the core (``frontier/core.py``) reads what
it needs, decides, and writes the outcome, all inside one of the storage's write units. Most
operations name one crawl and, below the crawl, one queue. What spans queues: the crawl's
index of queues by their next event (a queue is due when it may hand out a seed, a schedule
falls due or a lease expires) and the other walks (leases, listings), the crawl's totals and
its sequence (``next_seq``), and the lookups by fingerprint (``url``, ``find_urls``) and by
lease token (``get_lease``), whose queue the caller does not know yet.

The storages are in ``crawlstore.storages``: memory, LMDB and Redis.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

import msgpack

from ..errors import CorruptRecord
from ..seed import Lease, Seed
from .policy import CrawlPolicy, Defaults

if TYPE_CHECKING:
    pass

#: One packer for every seed record (it calls no Python code: threads may share it).
_PACK = msgpack.Packer(use_bin_type=True).pack

__all__ = [
    "ACTIVE",
    "QUEUE_FIELDS",
    "REVISIT_SLOT",
    "Capabilities",
    "CrawlRecord",
    "Durability",
    "Entry",
    "Failure",
    "Inboxes",
    "LeaseRecord",
    "Partitioned",
    "Post",
    "QueueRecord",
    "Slot",
    "Storage",
    "StoreFile",
    "StoreStorage",
    "UnitReader",
    "UrlRecord",
    "ViewData",
    "Visit",
    "Where",
    "enqueue_each",
    "run_in_turn",
    "tend_at",
    "tend_time",
]

_T = TypeVar("_T")

#: URL states: waiting in a queue, handed out, waiting for a time; and the final ones.
QUEUED, IN_FLIGHT, SCHEDULED = "queued", "in_flight", "scheduled"
DONE, FAILED, SKIPPED = "done", "failed", "skipped"
ACTIVE = frozenset({QUEUED, IN_FLIGHT, SCHEDULED})
#: Kinds of schedule: a retry, a seed parked while its tag pauses, a revisit.
RETRY, PAUSE, REVISIT = "retry", "pause", "revisit"
#: The counters a queue keeps, beside its gauges (queued, in flight, scheduled, revisits).
COUNTS = ("admitted", "popped", "done", "failed", "skipped", "retried", "unchanged",
          "cancelled", "requeued")  # fmt: skip
#: Gauges of the URLs whose visit ended, by how (a queue's and the crawl's): what
#: ``count(state="done")`` reads. ``done`` above counts reports, a revisited URL at each visit.
FINISHED = {DONE: "urls:done", FAILED: "urls:failed", SKIPPED: "urls:skipped"}


class Entry(NamedTuple):
    """Where a queued URL is: its place in its queue, in the order entries leave it (rank, then
    class, then sequence)."""

    rank: int
    cls: int
    seq: int


class Slot(NamedTuple):
    """Where a scheduled URL is: when it falls due (epoch seconds) and a sequence unique in its
    crawl."""

    at: float
    seq: int


#: Where a URL is, by its state: queued, an ``Entry``; in flight, its lease's token (16 bytes);
#: scheduled, a ``Slot``; finished, nowhere. Each packs as the plain array or bytes it is.
Where = Entry | bytes | Slot | None


class Visit(NamedTuple):
    """How a URL's last visit ended: when, the status code and reason reported, the state it
    finished in."""

    at: float
    status: int | None
    reason: str | None
    state: str


class Failure(NamedTuple):
    """A visit that failed for good, as a crawl's index of recent failures keeps it: when, the
    queue and URL, the status code and reason reported."""

    at: float
    queue: str
    url: str
    status: int | None
    reason: str | None


#: Seconds of a slot of a crawl's index of revisits by when they fall due (``revisits_due``
#: counts whole slots).
REVISIT_SLOT = 60


class Durability(str, enum.Enum):
    """What a commit promises. Every mode survives a killed process with nothing lost."""

    #: fsync data and meta page at every commit: a power loss loses nothing committed (every
    #: crash image of a recorded crawl kept every acknowledged commit: docs/durability.md).
    FULL = "full"
    #: fsync data at every commit, not the meta page: a power loss may roll back the last
    #: commit (one group of a worker), never more, and never damages the file (measured the
    #: same way). The default.
    SAFE = "safe"
    #: no fsync at commit: commits reach the OS at once (a killed process loses nothing), a
    #: flush every ``flush_interval`` seconds reaches the disk. A power loss or an OS crash
    #: loses what was not flushed and **may damage the file** (crash images that do not open
    #: were measured): for crawls that can start again, or from a backup, if the machine goes
    #: down. Never the default.
    NOSYNC = "nosync"


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a storage offers beyond the shared core, so that callers test a capability, never
    the storage's kind."""

    #: Survives the process (a file, a server); False in memory.
    persistent: bool
    #: A transaction spans every view (frontier, seen set, validators) of the storage.
    atomic_views: bool
    #: What a commit promises: "memory", "os" (survives a killed process), "disk" (a power
    #: loss); on a replicated server, "replicated-async" (survives a killed process; a failover
    #: may lose the last commits) or "replicated-wait" (a replica has each commit too).
    durability: str
    #: Several processes can share it.
    shared: bool
    #: Every process holding a lease runs on this machine, so a lease whose process is gone
    #: can end at once; False where processes on other machines share the storage (leases
    #: then end by time only).
    local_holders: bool = True
    #: A ``reader()`` reads one point-in-time snapshot across its calls.
    snapshot: bool = False
    #: What a unit spans: a crawl's data falls in this many partitions, and a unit (a push, a
    #: pop, a page, ``store.transaction()``) commits atomically within one. 1: every unit
    #: commits atomically across the whole store, every crawl and view (every storage here).
    partitions: int = 1
    #: A push is acknowledged once its URLs are in their partitions' inboxes (``Inboxes``),
    #: and folded into their queues by a later unit on the partition: a push never waits on,
    #: nor conflicts with, the units of the partitions it reaches.
    inboxes: bool = False
    #: The queue mode of a crawl created without one: ``"host"`` where a single queue would
    #: hold all of a crawl's seeds in one shard of a sharded storage.
    default_queues: str = "single"


class CrawlRecord:
    """A crawl: its name, its policy, when it was created; ``ref`` is the storage's own.
    ``settled`` is False while the policy is not fixed yet: a crawl a seen set or validators
    created by their first write takes the policy of its frontier's first write."""

    __slots__ = ("created", "name", "policy", "ref", "settled")

    def __init__(
        self,
        name: str,
        policy: CrawlPolicy,
        created: float,
        ref: Any = None,
        *,
        settled: bool = True,
    ) -> None:
        self.name, self.policy, self.created, self.ref = name, policy, created, ref
        self.settled = settled


class QueueRecord:
    """A queue of one crawl: its overrides, its gauges and counters, and the lower bounds of its
    earliest schedule and lease expiry. ``event`` is the time the crawl's index holds it at
    (None: not indexed); ``ref`` is the storage's own."""

    __slots__ = ("blocked", "cap", "counts", "created", "delay", "due_at", "event",
                 "expiry_at", "in_flight", "key", "last", "limit", "queued", "ref", "revisits",
                 "scheduled", "stale")  # fmt: skip

    def __init__(self, key: str, created: float) -> None:
        self.key = key
        self.created = created
        self.delay: float | None = None
        self.cap: int | None = None
        self.blocked = 0.0
        self.limit: int | None = None
        self.last = float("-inf")
        self.queued = self.in_flight = self.scheduled = self.revisits = 0
        self.counts: dict[str, int] = {}
        self.due_at: float | None = None
        self.expiry_at: float | None = None
        self.event: float | None = None
        self.ref: Any = None
        #: Whether ``expiry_at`` may be too early (the earliest lease ended): the core reads it
        #: again once, before it stores the queue. Not stored.
        self.stale = False

    def copy(self) -> QueueRecord:
        new = QueueRecord.from_record(self.to_record(), self.ref)
        new.counts = dict(self.counts)
        new.stale = self.stale
        return new

    def to_record(self) -> list[Any]:
        """The queue as stored: the values of ``QUEUE_FIELDS``, in order."""
        return _queue_to_record(self)

    @classmethod
    def from_record(cls, record: Sequence[Any], ref: Any = None) -> QueueRecord:
        """The queue of a stored record (``ValueError`` when it has not one value a field)."""
        new = cls.__new__(cls)
        _queue_from_record(new, record)
        new.ref = ref
        new.stale = False
        return new


#: A queue record's stored fields, in the order they are stored (``QueueRecord.to_record``).
QUEUE_FIELDS = ("key", "created", "delay", "cap", "blocked", "limit", "last", "queued",
                "in_flight", "scheduled", "revisits", "counts", "due_at", "expiry_at",
                "event")  # fmt: skip


def _record_codec(fields: tuple[str, ...]) -> tuple[Callable[..., list[Any]], Callable[..., None]]:
    """A record's two conversions, written out from its field names once (as ``namedtuple``
    and ``dataclasses`` write theirs): a queue is read at every unit, and a loop of
    ``setattr`` would cost more than the rest of its decoding."""
    values = ", ".join(f"obj.{name}" for name in fields)
    namespace: dict[str, Any] = {}
    # the text is made of the field names above only
    exec(
        f"def to_record(obj):\n    return [{values}]\n"
        f"def from_record(obj, record):\n    ({values},) = record\n",
        namespace,
    )
    return namespace["to_record"], namespace["from_record"]


_queue_to_record, _queue_from_record = _record_codec(QUEUE_FIELDS)


class UrlRecord:
    """A URL of a crawl, by fingerprint: its seed, its queue, where it is (``where``: its
    ``Entry`` in the queue, its lease's token, or its schedule ``Slot``), when it was first
    admitted, and how its last visit ended (``outcome``, a ``Visit``).

    A storage may hand over the seed still packed (``packed``: the msgpack of its record): it
    is decoded when first read, and a record saved with its seed unread keeps those bytes."""

    __slots__ = ("_packed", "_seed", "created", "fp", "kind", "outcome", "queue", "ref",
                 "state", "where")  # fmt: skip

    def __init__(
        self,
        fp: bytes,
        seed: Seed | None,
        state: str,
        queue: str,
        where: Where,
        created: float,
        outcome: Visit | None = None,
        kind: str | None = None,
        *,
        packed: bytes | None = None,
    ) -> None:
        self.fp, self._seed, self.state, self.queue = fp, seed, state, queue
        self.where, self.created, self.outcome, self.kind = where, created, outcome, kind
        self._packed = packed
        self.ref: Any = None

    @property
    def entry(self) -> Entry:
        """Where this queued URL is in its queue."""
        where = self.where
        if type(where) is not Entry:
            raise self._misplaced("a queue entry")
        return where

    @property
    def token(self) -> bytes:
        """The token of this in-flight URL's lease."""
        where = self.where
        if type(where) is not bytes:
            raise self._misplaced("a lease token")
        return where

    @property
    def slot(self) -> Slot:
        """When this scheduled URL falls due."""
        where = self.where
        if type(where) is not Slot:
            raise self._misplaced("a schedule slot")
        return where

    def _misplaced(self, wanted: str) -> CorruptRecord:
        return CorruptRecord(f"urls record of {bytes(self.fp).hex()} is {self.state} without "
                             f"{wanted}: {self.where!r:.100}")  # fmt: skip

    @property
    def seed(self) -> Seed:
        seed = self._seed
        if seed is None:
            seed = self._seed = self._decode(None)
        return seed

    @seed.setter
    def seed(self, seed: Seed) -> None:
        self._seed, self._packed = seed, None

    def leased(self, lease: Lease) -> Seed:
        """The seed under ``lease`` (decoded with it, when still packed: no copy)."""
        return self._decode(lease) if self._seed is None else self._seed.with_lease(lease)

    def _decode(self, lease: Lease | None) -> Seed:
        try:
            return Seed._trusted(msgpack.unpackb(self._packed, raw=False), self.fp, lease)
        except Exception as exc:
            raise CorruptRecord(
                f"urls record of {bytes(self.fp).hex()} holds a seed that does not decode: {exc!r}"
            ) from None

    def seed_packed(self, packed: bytes) -> None:
        """Keep the seed as these bytes only (decoded afresh at each read of a copy)."""
        self._seed, self._packed = None, packed

    def packed_seed(self) -> bytes:
        """The seed's record as msgpack (the bytes it was read as, when unchanged)."""
        if self._packed is None:
            seed = self._seed if self._seed is not None else self.seed
            self._packed = _PACK(seed.to_record())
        return self._packed

    def copy(self) -> UrlRecord:
        new = UrlRecord(self.fp, self._seed, self.state, self.queue, self.where, self.created,
                        self.outcome, self.kind, packed=self._packed)  # fmt: skip
        new.ref = self.ref
        return new


class LeaseRecord:
    """A seed handed out: its token, URL, queue, expiry and holder (pid, process start)."""

    __slots__ = ("expires", "fp", "owner", "queue", "token")

    def __init__(
        self, token: bytes, fp: bytes, queue: str, expires: float, owner: tuple[int, int]
    ) -> None:
        self.token, self.fp, self.queue, self.expires, self.owner = (
            token, fp, queue, expires, owner)  # fmt: skip


class Reader(Protocol):
    """A storage's reads across calls (``Storage.reader``); closed when done."""

    def run(self, operation: Callable[[], _T]) -> _T: ...
    def close(self) -> None: ...


class StoreFile(Protocol):
    """What only a store in a file can do. A storage without a file has one whose every
    member raises ``StoreError`` saying what to use instead."""

    @property
    def path(self) -> Path: ...
    def size(self) -> int:
        """Bytes the file takes."""

    def records_size(self) -> int:
        """Bytes of the file's pages that hold records now."""

    def backup(self, target: Path, *, compact: bool) -> None:
        """A consistent copy of what is committed, at ``target`` (which does not exist)."""


class UnitReader:
    """The ``Reader`` of a storage that keeps no snapshot across calls: each ``run`` is one
    consistent read of its own (writes may come between two of them)."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def run(self, operation: Callable[[], _T]) -> _T:
        return self._storage.view(operation)

    def close(self) -> None:
        pass


def tend_at(queue: QueueRecord) -> float | None:
    """When a queue with seeds in flight must be visited whatever a pop's cap on them
    (``due_queues``'s ``below``): at its earliest schedule or lease expiry, not before the time
    it is indexed at (``event``); None when it has neither, none in flight, or no place."""
    return tend_time(queue.in_flight, queue.due_at, queue.expiry_at, queue.event)


def tend_time(
    in_flight: int, due_at: float | None, expiry_at: float | None, event: float | None
) -> float | None:
    """``tend_at`` of a queue with these values (a storage reading them off a stored record)."""
    if in_flight <= 0 or event is None:
        return None
    if due_at is None:
        return None if expiry_at is None else max(event, expiry_at)
    return max(event, due_at if expiry_at is None else min(due_at, expiry_at))


def enqueue_each(storage: Storage, crawl: CrawlRecord, queue: QueueRecord,
                 urls: list[UrlRecord]) -> None:  # fmt: skip
    """``enqueue_many`` an entry and a ``save_url`` at a time: for a storage that has nothing
    to gain from writing them together."""
    for url in urls:
        storage.enqueue(crawl, queue, url.entry, url.fp)
        storage.save_url(crawl, queue, url)


class Storage(Protocol):
    """What the core needs of a storage. Every method but ``run``, ``view``,
    ``scratch`` and ``transaction`` is called inside one of them; the ones that change data
    inside ``run`` (or ``scratch``)."""

    capabilities: Capabilities

    def run(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as one atomic write unit (it joins the caller's open transaction;
        a storage may run it again from the start, after growing, say)."""

    def view(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as one consistent read (in the caller's open transaction, if
        any)."""

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """The users' grouping of operations into one atomic step."""

    def reader(self) -> Reader:
        """Reads across calls, for an export: one snapshot where the storage can keep one."""

    def scratch(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as a write unit over one consistent read (the caller's open
        transaction, if any) whose writes are all thrown away when it returns or raises: it
        changes nothing, nobody else ever sees what it wrote, and it needs no write access.
        The core's dry runs (``peek``) use it."""

    # -- crawls ---------------------------------------------------------------------------------

    def defaults(self) -> Defaults: ...
    def save_defaults(self, defaults: Defaults) -> None: ...
    def crawl(self, name: str) -> CrawlRecord | None: ...
    def save_crawl(self, crawl: CrawlRecord) -> None:
        """Create the crawl (its ``ref`` is then set) or store its changed policy."""

    def crawls(self) -> list[str]: ...
    def delete_crawl(self, crawl: CrawlRecord) -> int:
        """Remove the crawl and everything it holds; the URLs it knew."""

    def totals(self, crawl: CrawlRecord) -> dict[str, int]: ...
    def add_totals(self, crawl: CrawlRecord, deltas: dict[str, int]) -> None: ...
    def next_seq(self, crawl: CrawlRecord, n: int = 1) -> int:
        """A number unique in the crawl, and larger than every one before (``n``: the first
        of ``n`` consecutive ones, all taken)."""

    def last_seq(self, crawl: CrawlRecord) -> int:
        """The crawl's last sequence number (0: none yet): every later ``next_seq`` is larger."""

    def advance_seq(self, crawl: CrawlRecord, at_least: int) -> None:
        """Make every later ``next_seq`` larger than ``at_least`` (loading an export)."""

    def state_get(self, crawl: CrawlRecord, namespace: str, key: str) -> bytes | None:
        """A facade state value (msgpack), None when there is none."""

    def state_put(self, crawl: CrawlRecord, namespace: str, key: str, value: bytes) -> None: ...
    def state_delete(self, crawl: CrawlRecord, namespace: str, key: str) -> bool:
        """Remove a state value; whether there was one."""

    def state_keys(self, crawl: CrawlRecord, namespace: str) -> list[str]: ...
    def states(self, crawl: CrawlRecord) -> Iterator[tuple[str, str, bytes]]:
        """Every facade state entry of the crawl: (namespace, key, msgpack value), in order."""

    # -- queues ---------------------------------------------------------------------------------

    def queue(self, crawl: CrawlRecord, key: str) -> QueueRecord | None: ...
    def save_queue(self, crawl: CrawlRecord, queue: QueueRecord, event: float | None,
                   rotate: bool = False) -> None:  # fmt: skip
        """Store the queue (creating it when new) and index it at ``event`` (None: not at all).
        At the time it is indexed at already it keeps its place, unless ``rotate``: then it goes
        behind the queues indexed at that time."""

    def queues(self, crawl: CrawlRecord, after: str | None, limit: int) -> list[QueueRecord]:
        """The crawl's queues in key order, from the first key after ``after``."""

    def queue_count(self, crawl: CrawlRecord) -> int: ...
    def due_queues(self, crawl: CrawlRecord, now: float, limit: int,
                   below: int | None = None) -> list[QueueRecord]:  # fmt: skip
        """Up to ``limit`` queues indexed at ``now`` or before, earliest first. ``below`` (at
        least 1): only those a pop leaving fewer than ``below`` seeds in flight may take from
        or must tend: as stored, fewer than ``below`` in flight, or a schedule or lease expiry
        (``due_at``, ``expiry_at``) at ``now`` or before. The others cost such a call nothing:
        a storage keeps them out of its walk with an index (by in-flight count, and by the
        earlier of those two times), so a walk is as long as what it returns however many
        queues are at that cap. One indexed up to a millisecond early may come back."""

    def next_event(self, crawl: CrawlRecord) -> float | None: ...
    def delete_queue(self, crawl: CrawlRecord, queue: QueueRecord) -> int:
        """Remove the queue with its entries, leases, schedule and URLs; how many URLs."""

    # -- a queue's entries, leases and schedule -------------------------------------------------

    def enqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry,
                fp: bytes) -> None:  # fmt: skip
        """Add an entry at ``order`` (rank, class, sequence: unique in the crawl)."""

    def enqueue_many(self, crawl: CrawlRecord, queue: QueueRecord, urls: list[UrlRecord]) -> None:
        """Queue these URLs of ``queue`` (stored already): each one's entry at its ``entry``,
        and its record saved (``save_url``), in one pass. A URL with no ``ref`` is new to the
        crawl, and its entry's sequence is the crawl's next (``next_seq``): a storage may keep
        its record by that sequence."""

    def dequeue(self, crawl: CrawlRecord, queue: QueueRecord, n: int) -> list[bytes]:
        """Take up to ``n`` entries from the head; their fingerprints."""

    def unqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry) -> None:
        """Remove the entry at ``order``."""

    def lease(self, crawl: CrawlRecord, queue: QueueRecord, lease: LeaseRecord) -> None:
        """Store a lease; its ``token`` is set here."""

    def get_lease(self, crawl: CrawlRecord, token: bytes) -> LeaseRecord | None: ...
    def extend_lease(self, crawl: CrawlRecord, lease: LeaseRecord, expires: float) -> None: ...
    def end_lease(self, crawl: CrawlRecord, lease: LeaseRecord) -> None: ...
    def expired(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[LeaseRecord]:
        """The queue's leases that expired at ``now``."""

    def next_expiry(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None: ...
    def leases(self, crawl: CrawlRecord) -> Iterator[LeaseRecord]:
        """Every lease of the crawl (for a look at who holds them)."""

    def schedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot,
                 fp: bytes) -> None:  # fmt: skip
        """Schedule ``fp`` at ``when`` (a time, and a sequence unique in the crawl)."""

    def unschedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot) -> None: ...
    def due(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[bytes]:
        """Remove the queue's schedules due at ``now``; return their fingerprints, earliest
        first."""

    def next_due(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None: ...

    # -- URLs -----------------------------------------------------------------------------------

    def prefetch(self, crawl: CrawlRecord, fps: Sequence[bytes], queues: Sequence[str],
                 tokens: Sequence[bytes] = ()) -> None:  # fmt: skip
        """Read ahead what the unit reads next: these URLs, these queues with their entries,
        leases and schedule, and the leases of these tokens. A storage whose reads are round
        trips (a server) reads them at once; the others do nothing. A storage in partitions
        is also called outside any unit, before the units of a batch run on their partitions:
        it may read ahead for all of them at once (a hint: each unit still reads what it
        needs, and what it was given ahead is checked when it commits)."""

    def find_urls(self, crawl: CrawlRecord, fps: Sequence[bytes],
                  queues: Sequence[str]) -> list[UrlRecord | None]:  # fmt: skip
        """The URLs of ``fps`` (None where the crawl has none), read at once; ``queues``: the
        queues the unit writes next (``prefetch``)."""

    def url(self, crawl: CrawlRecord, fp: bytes) -> UrlRecord | None: ...
    def save_url(self, crawl: CrawlRecord, queue: QueueRecord, url: UrlRecord) -> None:
        """Store the URL, of ``queue`` (stored already)."""

    def delete_url(self, crawl: CrawlRecord, url: UrlRecord) -> None: ...
    def urls(self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None,
             limit: int) -> list[UrlRecord]:  # fmt: skip
        """URLs of the crawl, or of one queue, in fingerprint order after ``after``."""

    def iter_urls(self, crawl: CrawlRecord, queue: QueueRecord | None) -> Iterator[UrlRecord]:
        """Every URL of the crawl, or of one queue, in fingerprint order (inside ``read``)."""

    # -- bounded indexes of what happened, read in what they show -------------------------------

    def note_failure(self, crawl: CrawlRecord, queue: QueueRecord, failure: Failure,
                     keep: int) -> None:  # fmt: skip
        """Keep ``failure``, of ``queue``, among the newest ``keep`` of the queue's partition
        (by ``at``, to the millisecond): the oldest one beyond ``keep`` goes. It costs a few
        keys' writes, whatever the crawl holds."""

    def failures(self, crawl: CrawlRecord, limit: int) -> list[Failure]:
        """The newest ``limit`` failures kept, newest first (each partition's, merged)."""

    def count_revisit(self, crawl: CrawlRecord, queue: QueueRecord, fp: bytes, at: float,
                      n: int) -> None:  # fmt: skip
        """Count (``n`` 1) a revisit of ``fp`` scheduled at ``at`` in ``queue``, or take it out
        of the count (-1) when it leaves the schedule."""

    def revisits_due(self, crawl: CrawlRecord, until: float) -> int:
        """The revisits counted in every ``REVISIT_SLOT`` up to the one holding ``until``
        (those overdue too), every partition's: a read of the slots it counts."""


class Partitioned(Storage, Protocol):
    """A storage whose crawls fall in ``capabilities.partitions`` (more than 1) partitions:
    a queue, with its entries, leases, schedule and the records of its URLs, lives in the
    partition of its key. ``run_in`` is a unit confined to one partition, and partitions
    commit side by side; ``run`` is a unit over every partition, kept for what belongs to
    none (a crawl's creation and policy, the store's defaults, facades' state, refusal
    counts) and for reads, and ``scratch`` (a dry run) may write anywhere. Inside
    ``run_in(p, ...)``:

    - a call that names a queue, a lease or a URL of another partition raises
      ``PartitionError``; so does a write to a partition's data from a unit over every
      partition outside ``run_in`` (a ``run_in`` inside ``run`` is confined to its partition);
    - ``url`` and ``find_urls`` read ``p``'s records, even of a URL claimed by a queue of
      another partition (where a URL's record is, its claim says: ``claim_queues``); the
      walks (``due_queues``, ``next_event``, ``leases``, ``urls``) see ``p`` only;
    - ``totals`` are the crawl's (every partition's, summed); ``add_totals`` adds to ``p``'s;
    - ``next_seq`` is unique in ``p``, not in the crawl, so that no unit writes a key every
      unit writes: the order of two queues of two partitions due at one time is theirs;
      ``advance_seq`` advances ``p``'s.
    """

    def run_in(self, partition: int, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` as one atomic write unit on ``partition`` alone (it joins the
        caller's open unit: one over every partition, or on this one)."""

    def run_each(self, units: Sequence[tuple[int, Callable[[], _T]]]) -> list[_T]:
        """Run each operation as a unit on its partition, as ``run_in`` does: independent
        units, which a storage on a server commits together (one round trip for them all,
        each atomic on its partition). Their results, in order. When one raises, every other
        one still runs (and may commit); the first error is raised after."""

    def partition_of(self, crawl: CrawlRecord, key: str) -> int:
        """The partition of the queue ``key`` (a number of the storage's own: the partitions
        of two crawls may differ)."""

    def partitions(self, crawl: CrawlRecord) -> list[int]:
        """The crawl's partitions that may hold any of its data (all of them, or fewer)."""

    def lease_partition(self, crawl: CrawlRecord, token: bytes) -> int | None:
        """The partition a lease token names; None when it names none (not this crawl's)."""

    def claim_queues(self, crawl: CrawlRecord, fps: Sequence[bytes],
                     keys: Sequence[str]) -> list[str]:  # fmt: skip
        """The queue each URL belongs to: the one it was first given (``keys``: this push's
        choice for each), claimed at once, each URL on its own; the first of two claims of one
        URL wins. A claim outlives a unit that fails after it (a claim without a record): it
        says where the URL's record is looked for, and where the URL goes when it comes
        again."""

    def claimed(self, crawl: CrawlRecord, fps: Sequence[bytes]) -> list[str | None]:
        """The queue that claims each URL (None: none does)."""

    def prefetch_partitions(self, crawl: CrawlRecord, partitions: Sequence[int]) -> None:
        """Outside a unit: read ahead, at once, what units on these partitions read first (a
        storage on a server; a hint, which may do nothing)."""

    def due_partitions(self, crawl: CrawlRecord, now: float) -> list[int]:
        """The partitions that may have a queue due at ``now`` (a hint: one in it may turn
        out to have nothing to hand out), starting at a different one each call, so that
        pops spread over them."""


@dataclass(frozen=True, slots=True)
class Post:
    """A push acknowledged into the inbox of its queue's partition: the queue claimed for it,
    the seed (without a lease), and whether it was pushed ``new_only``."""

    key: str
    seed: Seed
    new_only: bool

    def to_record(self) -> list[Any]:
        return [self.key, self.seed.to_record(), self.new_only]

    @classmethod
    def from_record(cls, record: Sequence[Any]) -> Post:
        key, seed, new_only = record
        if not isinstance(key, str) or not isinstance(new_only, bool):
            raise ValueError(f"key {key!r}, new_only {new_only!r}")
        return cls(key, Seed.from_record(seed), new_only)


class Inboxes(Partitioned, Protocol):
    """A partitioned storage whose ``capabilities.inboxes`` is True: a push does not run a
    unit on the partitions its URLs go to; it appends them to those partitions' inboxes, which
    takes no version and never conflicts. The core folds a partition's inbox into its queues
    at the start of its next unit there (``posted``, then ``unpost`` in the same unit: an entry
    leaves the inbox only with a unit that committed), in the order they were posted. An
    inbox holds a URL once: a post of a URL already posted there replaces it."""

    def look(self, crawl: CrawlRecord, fps: Sequence[bytes],
             keys: Sequence[str]) -> list[tuple[UrlRecord | None, bool]]:  # fmt: skip
        """Outside a unit on a partition: each URL's record as committed (the open unit over
        every partition's own writes included), and whether its queue's inbox holds it; in one
        round trip."""

    def post(self, crawl: CrawlRecord, posts: Sequence[Post], refused: Sequence[str] = ()) -> None:
        """Append each post to the inbox of its queue's partition, count a push refused as a
        duplicate in the inbox of each queue of ``refused``, and mark those partitions due
        now. Outside a unit, at once; in a unit over every partition, with its commit (not at
        all when it rolls back)."""

    def posted(self, crawl: CrawlRecord) -> tuple[list[Post], int]:
        """In a unit on a partition: what its inbox holds, in the order posted (one client's
        posts in its order; two clients' in an order of the storage's), and the refusals
        counted there."""

    def unpost(self, crawl: CrawlRecord, fps: Sequence[bytes], refused: int) -> None:
        """In a unit on a partition: take these URLs and ``refused`` refusals out of its inbox
        when the unit commits."""

    def posted_partitions(self, crawl: CrawlRecord) -> list[int]:
        """The crawl's partitions whose inboxes hold anything now (one read)."""

    def in_transaction(self) -> bool:
        """Whether the caller is in a unit over every partition (a transaction): a push there
        leaves its posts to later units on their partitions (a pop folds before it chooses),
        where a push outside one folds them before it returns."""


class ViewData(Protocol):
    """What the store's views (``crawlstore.views``, ``crawlstore.exchange``) need of a
    storage: where it keeps seen sets, Bloom filters and validators, in its own layout. Called
    inside one of the storage's units; ``ref`` is the storage's handle of a crawl
    (``crawl_ref``). Counts are named "seen", "validators" and "bloom"."""

    #: The kinds of exact seen set the storage keeps, its default first.
    seen_kinds: tuple[str, ...]

    def crawl_ref(self, name: str) -> Any:
        """The storage's handle of the crawl, None when there is no such crawl."""

    def view_count(self, ref: Any, name: str) -> int: ...
    def add_view_count(self, ref: Any, name: str, n: int) -> int:
        """Add ``n`` to a count; what it was."""

    def seen_mark(self, ref: Any, kind: str, *, write: bool) -> str | None:
        """The kind of exact seen set the crawl keeps (None: none yet); with ``write``, a crawl
        that keeps none keeps ``kind`` from now on."""

    def seen_has(self, ref: Any, kind: str, fps: Sequence[bytes]) -> list[bool]: ...
    def seen_add(self, ref: Any, kind: str, fps: Sequence[bytes]) -> int:
        """Add the fingerprints (a batch may hold one twice); how many the set did not hold."""

    def seen_all(self, ref: Any, kind: str) -> Iterator[bytes]:
        """Every fingerprint of the set, in byte order (read as it is iterated, in the unit or
        reader it began in)."""

    def bloom_parts(self, bits: int) -> int:
        """How many parts a Bloom filter of ``bits`` is split in (each of the bits over the
        parts, rounded up)."""

    def bloom_part(self, fp: bytes, parts: int) -> int:
        """The part a fingerprint's bits are in: the storage's number for it."""

    def bloom_params(self, ref: Any) -> tuple[Any, ...] | None:
        """(expected, fp_rate, bits, hashes) of the crawl's Bloom filter, None when none."""

    def bloom_create(self, ref: Any, params: tuple[Any, ...], parts: int, part_bits: int
                     ) -> None: ...  # fmt: skip
    def bloom_get(self, ref: Any, part: int, positions: Sequence[int]) -> list[bool]: ...
    def bloom_set(self, ref: Any, part: int, positions: Sequence[int]) -> None: ...
    def validator(self, ref: Any, fp: bytes) -> list[Any] | None:
        """[etag, last modified, when stored] of ``fp``, None when none."""

    def put_validator(self, ref: Any, fp: bytes, record: list[Any] | None) -> bool:
        """Store (None: delete) the validators of ``fp``; whether it had some."""

    def validators_all(self, ref: Any) -> Iterator[tuple[bytes, list[Any]]]:
        """Every (fingerprint, validators) of the crawl, in fingerprint order."""

    def bloom_chunks(self, ref: Any) -> Iterator[tuple[int, bytes]]:
        """The Bloom filter's bits as (chunk number, bytes), for an export; ``InvalidArgument``
        (raised by the call, before any chunk) where its bits do not travel."""

    def load_bloom(self, ref: Any, params: tuple[Any, ...], count: int) -> None:
        """Make the Bloom filter an export describes (its chunks follow); ``InvalidSnapshot``
        where such bits cannot be taken over."""

    def put_bloom_chunk(self, ref: Any, chunk: int, bits: bytes) -> None:
        """Write a chunk of ``bloom_chunks`` back (``InvalidSnapshot`` where it cannot)."""


class StoreStorage(Storage, Protocol):
    """A storage that ``Store`` opens: the core's storage, and what the store asks of it."""

    #: Where the store is: a file's path, a server's URL without its password.
    location: str
    readonly: bool
    durability: Durability

    @property
    def file(self) -> StoreFile:
        """What a file store has and a server has not."""

    @property
    def fingerprint(self) -> int:
        """The fingerprint version the store's records hold: older than this crawlstore's
        only in a store that ``Store.open`` migrates in place."""

    def set_fingerprint(self, version: int) -> None:
        """Record the fingerprint version the records now hold (a migration's end)."""

    @property
    def indexed(self) -> bool:
        """Whether every crawl's bounded indexes (``note_failure``, ``count_revisit``, the
        blocked trap prefixes apart) cover what happened before this crawlstore: False only in
        a store of a format that predates them and is used as it is (Redis format 1), which
        ``Store.open`` brings up to date when it opens it for writing."""

    def set_indexed(self) -> None:
        """Record that the indexes cover every crawl now (``Store.open``'s step's end)."""

    @property
    def meta(self) -> dict[str, Any]:
        """The store's format version, fingerprint version and creation time."""

    def close(self) -> None: ...

    def server_clock(self) -> Callable[[], float] | None:
        """The clock every client of the store shares, a server's (epoch seconds, a round trip
        a reading); None where the store has no clock of its own (a file: the processes of
        one machine read its clock)."""

    @property
    def view_data(self) -> ViewData:
        """Where the storage keeps what the store's views hold."""


def run_in_turn(
    partitioned: Partitioned, units: Sequence[tuple[int, Callable[[], _T]]]
) -> list[_T]:
    """``run_each`` as one ``run_in`` after another: every unit runs, even when one raises; the
    first error is raised after them all."""
    results: list[_T] = []
    error: BaseException | None = None
    for partition, operation in units:
        try:
            results.append(partitioned.run_in(partition, operation))
        except BaseException as exc:  # the others run all the same
            error = error or exc
    if error is not None:
        raise error
    return results
