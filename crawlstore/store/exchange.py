"""A store crawl's export: its frontier's records, then its seen set (exact or Bloom) and its
validators, then an end record that counts what came before; and loading one back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import lmdb

from ..errors import InvalidArgument, InvalidSnapshot
from ..frontier.export import export_frontier, filling, in_reader, malformed, with_end
from . import keys
from .codec import pack, scan, unpack
from .context import WriteContext

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..frontier.core import CoreFrontier
    from .storage import LmdbStorage

__all__ = [
    "check_empty",
    "crawl_holds",
    "export_store",
    "fingerprint",
    "load_records",
    "load_store",
    "new_crawl",
]

#: Fingerprints a seen record carries.
_SEEN_BATCH = 4096
_WRITE_BATCH = 1000


def export_store(storage: LmdbStorage, frontier: CoreFrontier) -> Iterator[dict[str, Any]]:
    return in_reader(storage, lambda: with_end(_records(storage, frontier)))


def _records(storage: LmdbStorage, frontier: CoreFrontier) -> Iterator[dict[str, Any]]:
    yield from export_frontier(frontier.core)
    prefix = storage.crawl_key(frontier.core.name)
    if prefix is None:
        return  # no such crawl
    txn, dbs = storage.txn(), storage.dbs
    yield from _seen(txn, dbs, prefix)
    yield from _bloom(txn, dbs, prefix)
    for key, raw in scan(txn, dbs["validators"], prefix):
        etag, last_modified, stored_at = unpack("validators", key, raw)
        yield {"type": "validator", "fp": key[4:], "etag": etag,
               "last_modified": last_modified, "stored_at": stored_at}  # fmt: skip


def _seen(txn: lmdb.Transaction, dbs: dict[str, Any], prefix: bytes) -> Iterator[dict[str, Any]]:
    cursor = txn.cursor(db=dbs["seen"])
    if not cursor.set_key(prefix):
        return
    batch: list[bytes] = []
    for fp in cursor.iternext_dup():
        batch.append(bytes(fp))
        if len(batch) >= _SEEN_BATCH:
            yield {"type": "seen", "fps": batch}
            batch = []
    if batch:
        yield {"type": "seen", "fps": batch}


def _bloom(txn: lmdb.Transaction, dbs: dict[str, Any], prefix: bytes) -> Iterator[dict[str, Any]]:
    for key, raw in scan(txn, dbs["bloom"], prefix):
        if key[4:5] == b"\x00":
            yield {"type": "bloom", "params": unpack("bloom", key, raw)}
        else:
            yield {"type": "bloom_chunk", "chunk": keys.read_u32(key, 5), "bits": raw}


def load_store(
    storage: LmdbStorage,
    frontier_of: Callable[[str], CoreFrontier],
    records: Iterable[dict[str, Any]],
    crawl: str | None,
) -> str:
    """Load an export into a crawl (the export's own name unless ``crawl``), which must hold
    nothing yet; the crawl's name."""

    def write(name: str, batch: list[dict[str, Any]], first: int) -> None:
        storage.run_ctx(lambda ctx: _write(ctx, _prefix(storage, name), batch, first))

    return load_records(lambda name: crawl_holds(storage, name), write, frontier_of, records,
                        crawl)  # fmt: skip


def load_records(
    holds: Callable[[str], bool],
    write: Callable[[str, list[dict[str, Any]], int], None],
    frontier_of: Callable[[str], CoreFrontier],
    records: Iterable[dict[str, Any]],
    crawl: str | None,
) -> str:
    """``load_store`` over any store: ``holds(name)`` tells whether a crawl holds anything,
    ``write(name, batch, first)`` writes a batch of seen and validator records in one unit
    (``first``: the place in the stream of the batch's first record, which its errors name)."""
    stream = iter(records)
    header = next(stream, None)
    if not isinstance(header, dict) or header.get("type") != "crawl":
        raise InvalidSnapshot("an export starts with its crawl record", record=1)
    name = crawl or header.get("name")
    if not isinstance(name, str):
        raise InvalidSnapshot(f"an export names its crawl: {name!r}", record=1)

    check_empty(holds, name)
    frontier = frontier_of(name)
    pending: list[dict[str, Any]] = []
    place = first = 1  # of the latest record in the stream; of pending[0]

    def flush() -> None:
        if pending:
            batch = list(pending)
            pending.clear()
            write(name, batch, first)

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


def crawl_holds(storage: LmdbStorage, name: str) -> bool:
    """Whether the crawl holds anything (a frontier, seen set or validators)."""

    def holds() -> bool:
        prefix = storage.crawl_key(name)
        return prefix is not None and (
            any(storage.totals_of(prefix).values())
            or storage.get("bloom", prefix + b"\x00") is not None
        )

    return storage.view(holds)


def check_empty(holds: Callable[[str], bool], name: str) -> None:
    """``InvalidArgument`` when the crawl's frontier, seen set or validators hold something."""
    if holds(name):
        raise InvalidArgument(f"crawl {name!r} is not empty: load into a new crawl")


@contextlib.contextmanager
def new_crawl(holds: Callable[[str], bool], frontier: CoreFrontier) -> Iterator[CoreFrontier]:
    """The frontier of a crawl that holds nothing yet, for the block to fill; when the block
    raises, the crawl is removed again, with whatever it wrote to the seen set."""
    check_empty(holds, frontier.core.name)
    with filling(frontier.core):
        yield frontier


def fingerprint(value: object) -> bytes:
    """A fingerprint of an export record: 16 bytes (``ValueError`` for anything else)."""
    if not isinstance(value, bytes) or len(value) != 16:
        raise ValueError(f"a fingerprint is 16 bytes: {value!r:.60}")
    return value


def _prefix(storage: LmdbStorage, name: str) -> bytes:
    prefix = storage.crawl_key(name)  # the frontier's load created the crawl
    assert prefix is not None
    return prefix


def _write(ctx: WriteContext, prefix: bytes, batch: list[dict[str, Any]], first: int) -> None:
    dbs = ctx.dbs
    counters = ctx.counters(prefix)
    place = first
    try:
        for place, record in enumerate(batch, first):  # noqa: B007 (the error names it)
            kind = record["type"]
            if kind == "seen":
                for fp in map(fingerprint, record["fps"]):
                    if ctx.txn.put(prefix, fp, db=dbs["seen"], dupdata=False):
                        counters["seen"] += 1
            elif kind == "bloom":
                ctx.put_record("bloom", prefix + b"\x00", record["params"])
            elif kind == "bloom_chunk":
                key = prefix + b"\x01" + keys.u32(int(record["chunk"]))
                ctx.txn.put(key, bytes(record["bits"]), db=dbs["bloom"])
            else:
                fp = fingerprint(record["fp"])
                existed = ctx.txn.get(prefix + fp, db=dbs["validators"]) is not None
                value = pack([record["etag"], record["last_modified"], record["stored_at"]])
                ctx.txn.put(prefix + fp, value, db=dbs["validators"])
                counters["validators"] += not existed
    except (KeyError, TypeError, ValueError, OverflowError) as exc:
        raise malformed(exc, place) from None
