"""Exports of a crawl on Redis, and loading one, in the file store's record format: a crawl
moves between a file and a cluster with ``export`` and ``load``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgpack

from ..errors import InvalidArgument, InvalidSnapshot
from ..frontier.export import export_frontier, in_reader, malformed, with_end
from ..store.exchange import fingerprint, load_records
from .views import SEEN_KINDS, RedisSeen, RedisValidators

if TYPE_CHECKING:
    from ..frontier.core import CoreFrontier
    from .storage import RedisStorage

__all__ = ["crawl_holds", "export_crawl", "load_crawl"]

_SEEN_BATCH = 4096


def export_crawl(storage: RedisStorage, frontier: CoreFrontier) -> Iterator[dict[str, Any]]:
    return in_reader(storage, lambda: with_end(_records(storage, frontier)))


def _seen_kind(storage: RedisStorage, name: str) -> str | None:
    """How the crawl keeps its seen set ("bloom" too), None before its first insert."""
    crawl = storage.crawl(name)
    if crawl is None:
        return None
    totals = storage._crawl_tag(crawl) + b":t"
    if storage.u().hget(totals, b"~bloom") is not None:
        return "bloom"
    kind = storage.u().hget(totals, b"~seen")
    return kind.decode() if kind is not None else None


def _records(storage: RedisStorage, frontier: CoreFrontier) -> Iterator[dict[str, Any]]:
    name = frontier.core.name
    yield from export_frontier(frontier.core)
    crawl = storage.crawl(name)
    if crawl is None:
        return
    kind = _seen_kind(storage, name)
    if kind == "bloom":
        raise InvalidArgument(
            f"crawl {name!r} keeps a Bloom seen set on Redis, which an export does not carry "
            "(its bits are laid out per bucket); export a crawl with an exact seen set"
        )
    if kind in SEEN_KINDS:
        batch: list[bytes] = []
        for fp in RedisSeen(storage, name, frontier.clock, kind):
            batch.append(fp)
            if len(batch) >= _SEEN_BATCH:
                yield {"type": "seen", "fps": batch}
                batch = []
        if batch:
            yield {"type": "seen", "fps": batch}
    for bucket in range(storage.buckets):
        records = storage.u().hgetall(storage.bucket_tag(crawl, bucket) + b":v")
        for key in sorted(records):
            etag, last_modified, stored_at = msgpack.unpackb(records[key], raw=False)
            yield {"type": "validator", "fp": key, "etag": etag,
                   "last_modified": last_modified, "stored_at": stored_at}  # fmt: skip


def crawl_holds(storage: RedisStorage, name: str) -> bool:
    """Whether the crawl holds anything (a frontier, seen set or validators)."""

    def holds() -> bool:
        crawl = storage.crawl(name)
        return crawl is not None and (
            any(storage.totals(crawl).values()) or _seen_kind(storage, name) == "bloom"
        )

    return storage.view(holds)


def load_crawl(
    storage: RedisStorage,
    frontier_of: Callable[[str], CoreFrontier],
    records: Iterable[dict[str, Any]],
    crawl: str | None,
    clock: Callable[[], float],
) -> str:
    def write(name: str, batch: list[dict[str, Any]], first: int) -> None:
        def unit() -> None:
            seen = RedisSeen(storage, name, clock, _seen_kind(storage, name) or "packed")
            validators = RedisValidators(storage, name, clock)
            place = first
            try:
                for place, record in enumerate(batch, first):
                    kind = record["type"]
                    if kind == "seen":
                        seen.insert_many([fingerprint(fp) for fp in record["fps"]])
                    elif kind in ("bloom", "bloom_chunk"):
                        raise InvalidSnapshot(
                            "the export holds a Bloom seen set, which a store on Redis cannot "
                            "take over (its bits are laid out per bucket): export the crawl "
                            "with an exact seen set",
                            record=place,
                        )
                    else:
                        value = msgpack.packb([record["etag"], record["last_modified"],
                                               record["stored_at"]])  # fmt: skip
                        validators._change(fingerprint(record["fp"]), value)
            except InvalidSnapshot:
                raise
            except (KeyError, TypeError, ValueError, OverflowError) as exc:
                raise malformed(exc, place) from None

        storage.run(unit)

    return load_records(lambda name: crawl_holds(storage, name), write, frontier_of, records,
                        crawl)  # fmt: skip
