"""A crawl's frontier as a stream of versioned records, and back: the complete form of its
state, whatever the storage. Memory stays bounded: records are read and written a batch at a
time.

Records (dicts, msgpack-able), in this order:

- ``{"type": "crawl", "v": 1, "name", "policy", "created", "totals"}``;
- ``{"type": "queue", "key", "created", "delay", "cap", "blocked", "limit", "last",
  "counts"}``, one a queue;
- ``{"type": "url", "seed", "state", "queue", "order" | "at", "seq", "kind", "created",
  "outcome"}``, one a URL: a seed in flight is exported as queued, at the front of its queue
  (behind those already there), since its lease dies with the export; the crawl record's
  totals count it queued too, so that loading an export and exporting it again gives the
  same records;
- ``{"type": "state", "namespace", "key", "value"}``: facades' state (tag pauses, trap budgets);
- a store adds its seen set and validators (``store.export``);
- ``{"type": "end", "counts"}``: how many records of each type came before, so that a stream
  cut short is refused.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..errors import InvalidArgument, InvalidSeed, InvalidSnapshot
from ..seed import Seed
from . import indexes, spi
from .crawlstate import pack_state, unpack_state
from .places import place_sequence, queue_place
from .policy import CrawlPolicy, check_cap, check_delay
from .protocol import check_limit, check_namespace
from .spi import CrawlRecord, QueueRecord, UrlRecord
from .traps import moved_state

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = [
    "EXPORT_VERSION",
    "export_frontier",
    "filling",
    "in_reader",
    "load_frontier",
    "malformed",
    "with_end",
]

_T = TypeVar("_T")

EXPORT_VERSION = 1
#: Records written a transaction while loading.
_BATCH = 1000


def in_reader(storage: spi.Storage, make: Callable[[], Iterator[_T]]) -> Iterator[_T]:
    """The items of ``make()``, each read in one reader of ``storage`` (one snapshot where the
    storage keeps one), without holding it while the caller has an item: other reads and
    writes of this thread or task go on meanwhile."""
    reader = storage.reader()
    try:
        items = reader.run(make)
        while True:
            try:
                item = reader.run(lambda: next(items))
            except StopIteration:
                return
            yield item
    finally:
        reader.close()


def with_end(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The records, then the end record that counts them by type (none for no records)."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record["type"]] = counts.get(record["type"], 0) + 1
        yield record
    if counts:
        yield {"type": "end", "counts": counts}


def export_frontier(core: CoreFrontier) -> Iterator[dict[str, Any]]:
    """The crawl's frontier records, without the end record (one consistent read: the caller
    iterates inside it)."""
    storage = core.storage
    crawl = core.existing_crawl()
    if crawl is None:
        return
    totals = {k: v for k, v in storage.totals(crawl).items() if _exported(k)}
    # seeds in flight are exported queued (their leases end with the export): count them so
    in_flight = totals.pop("in_flight", 0)
    totals["queued"] = totals.get("queued", 0) + in_flight
    totals = {k: v for k, v in totals.items() if v}
    yield {
        "type": "crawl",
        "v": EXPORT_VERSION,
        "name": crawl.name,
        "policy": crawl.policy.to_record(),
        "created": crawl.created,
        "totals": totals,
        **({} if crawl.settled else {"settled": False}),
    }
    after = None
    while True:
        page = storage.queues(crawl, after, 256)
        for q in page:
            yield {"type": "queue", "key": q.key, "created": q.created, "delay": q.delay,
                   "cap": q.cap, "blocked": q.blocked, "limit": q.limit, "last": q.last,
                   "counts": dict(q.counts)}  # fmt: skip
        if len(page) < 256:
            break
        after = page[-1].key
    # each at the front of its queue, behind those already there, as if its lease just ended
    back = itertools.count(storage.last_seq(crawl) + 1)
    for url in storage.iter_urls(crawl, None):
        yield _url_record(url, crawl.policy.order, back)
    for namespace, key, raw in storage.states(crawl):
        yield {"type": "state", "namespace": namespace, "key": key,
               "value": unpack_state(namespace, key, raw)}  # fmt: skip


_GAUGES = ("queued", "in_flight", "scheduled", "revisits")


def _exported(counter: str) -> bool:
    """The crawl's own counters (a storage may keep others beside them)."""
    return (counter in spi.COUNTS or counter in _GAUGES or counter.startswith("refused:")
            or counter in spi.FINISHED.values())  # fmt: skip


def _url_record(url: UrlRecord, order: str, back: Iterator[int]) -> dict[str, Any]:
    """A URL's record; a seed in flight is queued, at the place of ``back``'s next sequence."""
    record: dict[str, Any] = {"type": "url", "seed": url.seed.to_record(), "state": url.state,
                              "queue": url.queue, "kind": url.kind, "created": url.created,
                              "outcome": list(url.outcome) if url.outcome else None}  # fmt: skip
    if url.state == spi.QUEUED:
        record["order"] = list(url.entry)
    elif url.state == spi.SCHEDULED:
        record["at"], record["seq"] = url.slot
    elif url.state == spi.IN_FLIGHT:
        record["state"] = spi.QUEUED  # its lease ends with the export: at the front again
        record["kind"] = None
        record["order"] = list(queue_place(order, url.seed, 0, next(back)))
    return record


def load_frontier(
    core: CoreFrontier,
    records: Iterable[dict[str, Any]],
    other: Callable[[dict[str, Any]], object] | None = None,
) -> None:
    """Load frontier records into the core's crawl, which must hold nothing yet. Records of
    other kinds go to ``other`` (a store loads its seen set and validators), or are refused."""
    storage = core.storage
    stream = iter(records)
    header = next(stream, None)
    if not isinstance(header, dict) or header.get("type") != "crawl":
        raise InvalidSnapshot("an export starts with its crawl record", record=1)
    if header.get("v") != EXPORT_VERSION:
        raise InvalidSnapshot(f"export version {header.get('v')!r}; this reads {EXPORT_VERSION}",
                              record=1)  # fmt: skip
    try:
        policy = CrawlPolicy.from_record(header["policy"])
        totals = {k: int(v) for k, v in header["totals"].items() if _exported(k)}
        created = float(header["created"])
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise InvalidSnapshot(f"an export's crawl record is malformed: {exc!r}", record=1) from None

    settled = header.get("settled", True) is not False

    def setup(crawl: CrawlRecord) -> None:
        crawl.policy, crawl.created, crawl.settled = policy, created, settled
        storage.add_totals(crawl, totals)

    with filling(core, setup) as crawl:
        _load_records(core, crawl, stream, other)


@contextlib.contextmanager
def filling(
    core: CoreFrontier, setup: Callable[[CrawlRecord], None] | None = None
) -> Iterator[CrawlRecord]:
    """The core's crawl, created (with the view's policy) for the block to fill; it must hold
    nothing yet (``InvalidArgument``). ``setup`` changes the new crawl record in the same
    write. When the block raises, the crawl is as it was: a fill that fails leaves no trace."""
    storage = core.storage
    before: list[CrawlRecord | None] = []

    def begin() -> CrawlRecord:
        existing = core.existing_crawl()
        if existing is not None and not _holds_nothing(core, existing):
            raise InvalidArgument(f"crawl {core.name!r} is not empty: load into a new crawl")
        before.append(None if existing is None else
                      CrawlRecord(existing.name, existing.policy, existing.created))  # fmt: skip
        crawl = core.crawl_for_write()
        if setup is not None:
            setup(crawl)
            storage.save_crawl(crawl)
        return crawl

    crawl = storage.run(begin)
    try:
        yield crawl
    except BaseException:
        core.delete_crawl()  # it held nothing before
        old = before[0]
        if old is not None:  # an empty crawl (a new InMemFrontier's) is as it was
            storage.run(lambda: storage.save_crawl(old))
        raise


def _holds_nothing(core: CoreFrontier, crawl: CrawlRecord) -> bool:
    """A crawl with no counts, queues or facade state (what a new frontier view makes)."""
    storage = core.storage
    totals = storage.totals(crawl)
    return (not any(v for k, v in totals.items() if _exported(k))
            and storage.queue_count(crawl) == 0
            and next(storage.states(crawl), None) is None)  # fmt: skip


def _load_records(
    core: CoreFrontier,
    crawl: CrawlRecord,
    stream: Iterator[Any],
    other: Callable[[dict[str, Any]], object] | None,
) -> None:
    storage = core.storage
    queues: dict[str, QueueRecord] = {}
    batch: list[dict[str, Any]] = []
    counts = {"crawl": 1}
    end: dict[str, Any] | None = None
    place = first = 1  # of the record in the stream (the crawl record is the first); of batch[0]

    def load(records: list[dict[str, Any]], first: int) -> None:
        if storage.capabilities.partitions > 1:
            _claim(core, crawl, records, first)
        for part, start, end in _runs(core, crawl, records):
            write = functools.partial(_load, core, crawl, queues, records[start:end], first + start)
            if part is None:
                storage.run(write)
            else:
                cast("spi.Partitioned", storage).run_in(part, write)

    for place, record in enumerate(stream, 2):
        kind = record.get("type") if isinstance(record, dict) else None
        if kind == "end":
            end = record
            break
        counts[str(kind)] = counts.get(str(kind), 0) + 1
        if kind in ("queue", "url", "state"):
            first = first if batch else place
            batch.append(record)
            if len(batch) >= _BATCH:
                load(batch, first)
                batch = []
        else:
            if batch:
                load(batch, first)
                batch = []
            if other is None:
                raise InvalidSnapshot(f"an export record of an unknown kind: {kind!r}",
                                      record=place)  # fmt: skip
            other(record)
    if batch:
        load(batch, first)
    if storage.capabilities.partitions > 1:  # each partition's queues in a unit on it
        partitioned = cast("spi.Partitioned", storage)
        by_part: dict[int, list[QueueRecord]] = {}
        for key, q in queues.items():
            by_part.setdefault(partitioned.partition_of(crawl, key), []).append(q)
        partitioned.run_each([(part, functools.partial(_place, core, crawl, some))
                              for part, some in by_part.items()])  # fmt: skip
        storage.run(functools.partial(_gauges, core, crawl, queues))
    else:

        def place_all() -> None:
            _place(core, crawl, queues.values())
            _gauges(core, crawl, queues)

        storage.run(place_all)
    if end is None:
        raise InvalidSnapshot("the export ends before its end record: it was cut short",
                              record=place + 1)  # fmt: skip
    if end.get("counts") != counts:
        raise InvalidSnapshot(
            f"the export's end record counts {end.get('counts')!r}, but {counts!r} came",
            record=place,
        )


def _claim(core: CoreFrontier, crawl: CrawlRecord, records: list[dict[str, Any]],
           first: int) -> None:  # fmt: skip
    """Claim each URL of ``records`` for its queue, before the units that write them (a store
    in partitions finds a URL's record through its claim)."""
    fps: list[bytes] = []
    keys: list[str] = []
    place = first
    try:
        for place, record in enumerate(records, first):  # noqa: B007 (the error names it)
            if record["type"] == "url":
                if not isinstance(record["queue"], str):
                    raise ValueError(f"a queue key is a str: {record['queue']!r:.100}")
                fps.append(Seed.from_record(record["seed"]).fingerprint)
                keys.append(record["queue"])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
            InvalidArgument, InvalidSeed) as exc:  # fmt: skip
        raise malformed(exc, place) from None
    if fps:
        cast("spi.Partitioned", core.storage).claim_queues(crawl, fps, keys)


def _runs(
    core: CoreFrontier, crawl: CrawlRecord, records: list[dict[str, Any]]
) -> list[tuple[int | None, int, int]]:
    """The runs of ``records`` that one unit loads: (partition, start, end), the partition of
    the queue of each record of the run, None for a unit over every partition (facades' state,
    and every record where the storage has one partition)."""
    storage = core.storage
    if storage.capabilities.partitions == 1:
        return [(None, 0, len(records))]
    partitioned = cast("spi.Partitioned", storage)
    runs: list[tuple[int | None, int, int]] = []
    for i, record in enumerate(records):
        key = record.get("key") if record.get("type") == "queue" else record.get("queue")
        part = partitioned.partition_of(crawl, key) if isinstance(key, str) else None
        if runs and runs[-1][0] == part:
            runs[-1] = (part, runs[-1][1], i + 1)
        else:
            runs.append((part, i, i + 1))
    return runs


def _load(
    core: CoreFrontier,
    crawl: CrawlRecord,
    queues: dict[str, QueueRecord],
    batch: list[dict[str, Any]],
    first: int,
) -> None:
    """Load a batch of frontier records, the first at place ``first`` of the stream."""
    storage = core.storage
    place = first
    try:
        for place, record in enumerate(batch, first):  # noqa: B007 (the error names it)
            kind = record["type"]
            if kind == "queue":
                q = QueueRecord(record["key"], float(record["created"]))
                if not isinstance(q.key, str):
                    raise TypeError(f"a queue key is a str: {q.key!r}")
                q.delay = check_delay("delay", record["delay"])
                q.cap = check_cap(record["cap"])  # type: ignore[assignment]
                q.limit = None if record["limit"] is None else check_limit(record["limit"])
                q.blocked, q.last = float(record["blocked"]), float(record["last"])
                if math.isnan(q.blocked) or math.isnan(q.last):
                    raise ValueError(f"a queue's times are not NaN: {q.blocked}, {q.last}")
                q.counts = {k: int(v) for k, v in record["counts"].items()}
                storage.save_queue(crawl, q, None)
                queues[q.key] = q
            elif kind == "url":
                _load_url(core, crawl, queues, record)
            else:
                namespace, key = moved_state(check_namespace(record["namespace"]), record["key"])
                storage.state_put(crawl, namespace, key, pack_state(key, record["value"]))
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError,
            InvalidArgument, InvalidSeed) as exc:  # fmt: skip
        raise malformed(exc, place) from None


def malformed(exc: Exception, place: int) -> InvalidSnapshot:
    """The error of a record (at ``place`` in the stream) that ``exc`` refused."""
    return InvalidSnapshot(f"an export record is malformed: {exc!r}", record=place)


def _load_url(
    core: CoreFrontier, crawl: CrawlRecord, queues: dict[str, QueueRecord], record: dict[str, Any]
) -> None:
    storage = core.storage
    seed = Seed.from_record(record["seed"])
    q = queues.get(record["queue"])
    if q is None:
        q = queues[record["queue"]] = core.unit(crawl).queue(
            record["queue"], float(record["created"])
        )
    outcome = _outcome(record.get("outcome"))
    url = UrlRecord(seed.fingerprint, seed, record["state"], q.key, None,
                    float(record["created"]), outcome, record.get("kind"))  # fmt: skip
    state = record["state"]
    if state == spi.QUEUED and record.get("order") is None:
        core.unit(crawl).enqueue(q, url, 0)  # in flight, by an older export: the front (saved)
        return
    if state == spi.QUEUED:
        rank, cls, seq = (int(part) for part in record["order"])
        if not (0 <= rank < 2**32 and cls in (0, 1) and 0 <= seq < 2**64):
            raise ValueError(f"a queue place out of range: {record['order']!r}")
        url.where = entry = spi.Entry(rank, cls, seq)
        storage.advance_seq(crawl, place_sequence(crawl.policy.order, cls, seq))
        storage.enqueue(crawl, q, entry, url.fp)
        q.queued += 1
    elif state == spi.SCHEDULED:
        at = float(record["at"])
        url.where = slot = spi.Slot(at, int(record["seq"]))
        if not (math.isfinite(at) and 0 <= slot.seq < 2**63):
            raise ValueError(f"a schedule out of range: {record['at']!r}, {record['seq']!r}")
        storage.advance_seq(crawl, slot.seq)
        storage.schedule(crawl, q, slot, url.fp)
        q.scheduled += 1
        q.revisits += url.kind == spi.REVISIT
        q.due_at = at if q.due_at is None else min(q.due_at, at)
    elif state not in (spi.DONE, spi.FAILED, spi.SKIPPED):
        raise ValueError(f"an unknown URL state: {state!r}")
    storage.save_url(crawl, q, url)
    indexes.count_revisit(storage, crawl, q, url, 1)
    if outcome is not None and outcome.state == spi.FAILED:
        indexes.note_failure(storage, crawl, q, seed.url, outcome)


def _outcome(record: Any) -> spi.Visit | None:
    """A URL's last outcome from its export: time, status, reason, final state."""
    if not record:
        return None
    when, status, reason, state = record
    if state not in spi.FINISHED or not (status is None or isinstance(status, int)):
        raise ValueError(f"an outcome is time, status, reason, final state: {record!r:.100}")
    return spi.Visit(float(when), status, None if reason is None else str(reason), state)


def _place(core: CoreFrontier, crawl: CrawlRecord, queues: Iterable[QueueRecord]) -> None:
    """Put the loaded queues in the crawl's index."""
    now = core.clock()
    for q in queues:
        core.unit(crawl).place(q, now)


def _gauges(core: CoreFrontier, crawl: CrawlRecord, queues: dict[str, QueueRecord]) -> None:
    """The totals' gauges in line with what was loaded (seeds that were in flight are queued
    now)."""
    gauges = {"queued": 0, "in_flight": 0, "scheduled": 0, "revisits": 0}
    for q in queues.values():
        gauges["queued"] += q.queued
        gauges["scheduled"] += q.scheduled
        gauges["revisits"] += q.revisits
    totals = core.storage.totals(crawl)
    core.storage.add_totals(crawl, {k: v - totals.get(k, 0) for k, v in gauges.items()})
