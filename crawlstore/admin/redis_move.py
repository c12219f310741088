"""Migrating a store on Redis (``crawlstore migrate redis://...``; the server's steps:
``storages/_redis/migrate.py``).

Format 2 to 3, in place: each crawl's bounded indexes are written from its records, a unit a
bucket, and ``META`` says format 3.

Format 1 to 3, in its own namespace: each crawl's export is written to a directory that is
kept, then the namespace is cleared and the exports are loaded in format 3.

The exports carry everything ``crawlstore export`` does: the frontier in every state, facade
state, counters, the seen set and validators. A crawl's Bloom filter, which an export of a
store on Redis does not carry, goes bit for bit beside its export (``N.bloom``: its
parameters, count and parts, in msgpack).

The store's clients must be stopped first. A move from format 1 takes its store lock for
good, so a client left running fails at its next unit; a client that opens the store while a
migration runs is refused; a client of format 2 left running would write without indexes.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cli.exportfile import read_export, to_line
from ..clock import system_clock
from ..errors import InvalidArgument, OlderFormat, StoreError
from ..storages import REDIS_INDEXING as INDEXING
from ..storages import redis_format_move, sync_directory
from ..store import Store, index_crawls, migrate_fingerprints
from ..textfiles import open_text
from ..url import FINGERPRINT_VERSION

if TYPE_CHECKING:
    from ..storages import FormatMove

__all__ = ["Moved", "move_redis_store"]

#: The list of a move's exports, written once they are all complete.
_LIST = "crawls.json"


@dataclass(frozen=True, slots=True)
class Moved:
    """What a migration did: the crawls it moved and the directory of their exports (None: it
    was in place); ``crawls`` None when the store was in format 3 already (nothing changed)."""

    crawls: list[str] | None
    kept: Path | None


def move_redis_store(url: str, keep: str | os.PathLike[str] | None = None) -> Moved:
    """Migrate the store at ``url`` to format 3: one of format 2 in place; one of format 1 by a
    move, keeping each crawl's export in the directory ``keep`` (by default ``<ns>.format1``
    in the working directory; it must not exist). Run again, finish a migration that stopped
    half way (a move in the directory it began with)."""
    move = redis_format_move(url)
    try:
        version, began, fingerprint = move.state()
        if began == INDEXING or (began is None and version == 2):
            return Moved(_index(move, fingerprint), None)
        if began is None and version == 3:
            return Moved(None, None)
        kept = Path(began or keep or f"{move.address.ns}.format1").absolute()
        if version == 1:
            if fingerprint < FINGERPRINT_VERSION:
                raise OlderFormat(
                    f"{move.address} holds fingerprint version {fingerprint}: open it once for "
                    "writing with partitioned=0 in its URL (which moves its fingerprints), then "
                    "move it; nothing was changed"
                )
            if began is None and kept.exists():
                raise InvalidArgument(f"{kept} exists: the exports go to a new directory")
            move.begin(str(kept))
            try:
                _export_all(move, kept)
            except BaseException:
                if began is None:  # this run began the move, and changed nothing yet
                    move.abandon()
                    shutil.rmtree(kept, ignore_errors=True)
                raise
        else:
            _check_kept(kept)  # a move stopped in its loads: from an empty namespace again
        move.switch()
        writing = move.writing()
        with Store(writing, system_clock) as new:
            crawls = []
            for path in _exports(kept):
                crawls.append(new.load(_records(path)))
                bits = path.with_name(path.name.split(".")[0] + ".bloom")
                if bits.exists():
                    move.put_bloom(writing, crawls[-1], bits.read_bytes())
        move.finish()
        return Moved(crawls, kept)
    finally:
        move.close()


def _index(move: FormatMove, fingerprint: int) -> list[str]:
    """Write the indexes of a store of format 2 in place, from its records (again, where a
    migration stopped half way: each write of them is one a second leaves as it is), then
    say format 3. The crawls."""
    move.begin_indexing()
    with Store(move.indexing(fingerprint), system_clock) as store:
        crawls = index_crawls(store)
        if fingerprint < FINGERPRINT_VERSION:
            migrate_fingerprints(store)  # (which moves the revisits counted by fingerprint)
    move.finish_indexing()
    return crawls


def _export_all(move: FormatMove, kept: Path) -> None:
    """Each crawl's export (and Bloom filter) into ``kept``, then the list of what it holds
    (``crawls.json``, written last: a directory without it is not complete), synced."""
    kept.mkdir(exist_ok=True)
    reading = move.reading()
    with Store(reading, system_clock) as old:
        crawls = old.crawls()
        for number, crawl in enumerate(crawls, 1):
            _write(old, crawl, kept / f"{number}.jsonl.gz")
            bloom = move.bloom(reading, crawl)
            if bloom is not None:
                _write_bytes(kept / f"{number}.bloom", bloom)
    sync_directory(kept)
    _write_bytes(kept / _LIST, json.dumps({"crawls": crawls}).encode())
    sync_directory(kept)


def _check_kept(kept: Path) -> None:
    """The exports a move began with are all in ``kept``: else ``StoreError``, before the
    store is touched."""
    try:
        crawls = json.loads((kept / _LIST).read_text())["crawls"]
    except (OSError, ValueError, KeyError) as exc:
        raise StoreError(
            f"the exports this move loads are not in {kept} ({exc}): put the directory back "
            "where it was, then run the move again; nothing was changed"
        ) from None
    missing = [f"{n}.jsonl.gz" for n in range(1, len(crawls) + 1)
               if not (kept / f"{n}.jsonl.gz").is_file()]  # fmt: skip
    if missing:
        raise StoreError(f"{kept} lacks {', '.join(missing)} of the move's exports: put them "
                         "back, then run the move again; nothing was changed")  # fmt: skip


def _write(store: Store, crawl: str, path: Path) -> None:
    part = _part(path)
    with open_text(str(part), "w") as out:
        for record in store.export(crawl=crawl):
            out.write(to_line(record) + "\n")
    _synced(part, path)


def _write_bytes(path: Path, data: bytes) -> None:
    part = _part(path)
    part.write_bytes(data)
    _synced(part, path)


def _part(path: Path) -> Path:
    return path.with_name(path.name + ".part")


def _synced(part: Path, path: Path) -> None:
    """``part``, written, synced to disk and renamed ``path`` (the directory is synced by
    the caller once every file is in)."""
    with open(part, "rb") as f:
        os.fsync(f.fileno())
    os.replace(part, path)


def _exports(kept: Path) -> list[Path]:
    return sorted(kept.glob("*.jsonl.gz"), key=lambda p: int(p.name.split(".")[0]))


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with read_export(str(path)) as export:
        yield from export.records()
