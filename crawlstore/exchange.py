"""A crawl's export, written once over the storage interface: its frontier's records, then its
seen set (exact, or a Bloom filter where the storage can carry one) and its validators, then an
end record that counts what came before; and loading one back into a crawl that holds nothing.
A crawl moves between a file and a cluster with ``export`` and ``load``."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from .errors import InvalidArgument, InvalidSnapshot
from .frontier.export import export_frontier, filling, in_reader, malformed, with_end
from .views import StoreSeen

if TYPE_CHECKING:
    from .clock import Clock
    from .frontier.core import CoreFrontier
    from .frontier.spi import StoreStorage

__all__ = ["crawl_holds", "export_crawl", "load_crawl", "new_crawl"]

#: Fingerprints a seen record carries.
_SEEN_BATCH = 4096
#: Seen and validator records loaded a unit.
_WRITE_BATCH = 1000
_BLOOM_PARAMS = ("expected", "fp_rate", "bits", "hashes")


def export_crawl(storage: StoreStorage, frontier: CoreFrontier) -> Iterator[dict[str, Any]]:
    """The crawl's records, each read in the storage's reader (one snapshot where it keeps one:
    in a file; on Redis, each record consistent in itself)."""
    frontier.core._settle(every=True)  # (what any client posted, folded first)
    return in_reader(storage, lambda: with_end(_records(storage, frontier)))


def _records(storage: StoreStorage, frontier: CoreFrontier) -> Iterator[dict[str, Any]]:
    name = frontier.core.name
    yield from export_frontier(frontier.core)
    ref = storage.view_data.crawl_ref(name)
    if ref is None:
        return  # no such crawl
    params = storage.view_data.bloom_params(ref)
    # the storage refuses here, before any record of the set, when its bits do not travel
    chunks = storage.view_data.bloom_chunks(ref) if params is not None else iter(())
    kind = storage.view_data.seen_mark(ref, storage.view_data.seen_kinds[0], write=False)
    if kind is not None:
        batch: list[bytes] = []
        for fp in storage.view_data.seen_all(ref, kind):  # a cursor in the reader's snapshot
            batch.append(fp)
            if len(batch) >= _SEEN_BATCH:
                yield {"type": "seen", "fps": batch}
                batch = []
        if batch:
            yield {"type": "seen", "fps": batch}
    if params is not None:
        meta = dict(zip(_BLOOM_PARAMS, params, strict=True))
        yield {"type": "bloom", "params": {**meta, "n": storage.view_data.view_count(ref, "bloom")}}
        for chunk, bits in chunks:
            yield {"type": "bloom_chunk", "chunk": chunk, "bits": bits}
    for fp, (etag, last_modified, stored_at) in storage.view_data.validators_all(ref):
        yield {"type": "validator", "fp": fp, "etag": etag, "last_modified": last_modified,
               "stored_at": stored_at}  # fmt: skip


def crawl_holds(storage: StoreStorage, name: str) -> bool:
    """Whether the crawl holds anything (a frontier, seen set or validators)."""

    def holds() -> bool:
        crawl = storage.crawl(name)
        return crawl is not None and (
            any(storage.totals(crawl).values())
            or storage.view_data.bloom_params(storage.view_data.crawl_ref(name)) is not None
        )

    return storage.view(holds)


def _check_empty(storage: StoreStorage, name: str) -> None:
    if crawl_holds(storage, name):
        raise InvalidArgument(f"crawl {name!r} is not empty: load into a new crawl")


@contextlib.contextmanager
def new_crawl(storage: StoreStorage, frontier: CoreFrontier) -> Iterator[CoreFrontier]:
    """The frontier of a crawl that holds nothing yet, for the block to fill; when the block
    raises, the crawl is removed again, with whatever it wrote to the seen set."""
    _check_empty(storage, frontier.core.name)
    with filling(frontier.core):
        yield frontier


def load_crawl(
    storage: StoreStorage,
    frontier_of: Callable[[str], CoreFrontier],
    records: Iterable[dict[str, Any]],
    crawl: str | None,
    clock: Clock,
) -> str:
    """Load an export into a crawl (the export's own name unless ``crawl``), which must hold
    nothing yet; the crawl's name. Seen and validator records are written a batch a unit."""
    stream = iter(records)
    header = next(stream, None)
    if not isinstance(header, dict) or header.get("type") != "crawl":
        raise InvalidSnapshot("an export starts with its crawl record", record=1)
    name = crawl or header.get("name")
    if not isinstance(name, str):
        raise InvalidSnapshot(f"an export names its crawl: {name!r}", record=1)

    _check_empty(storage, name)
    frontier = frontier_of(name)
    pending: list[dict[str, Any]] = []
    place = first = 1  # of the latest record in the stream; of pending[0]

    def flush() -> None:
        if pending:
            batch = list(pending)
            pending.clear()
            storage.run(lambda: _write(storage, name, clock, batch, first))

    def other(record: Any) -> None:
        nonlocal first
        kind = record.get("type") if isinstance(record, dict) else None
        if kind not in ("seen", "bloom", "bloom_chunk", "validator"):
            raise InvalidSnapshot(f"an export record of an unknown kind: {record!r:.100}",
                                  record=place)  # fmt: skip
        first = first if pending else place
        pending.append(record)
        if len(pending) >= _WRITE_BATCH:
            flush()

    def stream_then_flush() -> Iterator[dict[str, Any]]:
        nonlocal place
        yield header
        for place, record in enumerate(stream, 2):  # noqa: B007 (``other`` reads it)
            if isinstance(record, dict) and record.get("type") == "end":
                flush()  # before the frontier checks the end record, and so inside its undo
            yield record

    frontier.load(stream_then_flush(), other)
    return name


def _fingerprint(value: object) -> bytes:
    if not isinstance(value, bytes) or len(value) != 16:
        raise ValueError(f"a fingerprint is 16 bytes: {value!r:.60}")
    return value


def _write(storage: StoreStorage, name: str, clock: Clock, batch: list[dict[str, Any]],
           first: int) -> None:  # fmt: skip
    """One unit: a batch of seen and validator records (the frontier's load made the crawl)."""
    ref = storage.view_data.crawl_ref(name)
    place = first
    try:
        for place, record in enumerate(batch, first):  # noqa: B007 (the errors name it)
            kind = record["type"]
            if kind == "seen":
                stored = storage.view_data.seen_mark(
                    ref, storage.view_data.seen_kinds[0], write=False
                )
                seen = StoreSeen(storage, name, clock, stored)
                seen.insert_many([_fingerprint(fp) for fp in record["fps"]])
            elif kind == "bloom":
                params = record["params"]
                meta = tuple(params[key] for key in _BLOOM_PARAMS)
                storage.view_data.load_bloom(ref, meta, int(params["n"]))
            elif kind == "bloom_chunk":
                storage.view_data.put_bloom_chunk(ref, int(record["chunk"]), bytes(record["bits"]))
            else:
                fp = _fingerprint(record["fp"])
                value = [record["etag"], record["last_modified"], record["stored_at"]]
                if not storage.view_data.put_validator(ref, fp, value):
                    storage.view_data.add_view_count(ref, "validators", 1)
    except InvalidSnapshot as exc:
        if exc.record is None:  # the storage's refusal: at this record
            raise InvalidSnapshot(str(exc), record=place) from None
        raise
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise malformed(exc, place) from None
