"""Opening a store in a file."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import lmdb

from ...errors import InvalidArgument
from ...frontier.spi import Durability
from .engine import FORMAT_VERSION, Engine
from .storage import LmdbStorage
from .upgrade import mark_format

__all__ = ["open_file", "open_file_copy"]

_DEFAULT_MAP = 64 * 2**20
_DEFAULT_MAX_MAP = 2**40 if sys.maxsize > 2**32 else 2**30
_OPTIONS = ("map_size", "max_map_size", "flush_interval")


def open_file(path: str | os.PathLike[str], *, durability: Durability, readonly: bool,
              options: dict[str, Any]) -> LmdbStorage:  # fmt: skip
    """The storage of the file at ``path``, created when missing. ``options``: ``map_size``
    (where the memory map starts, 64 MiB), ``max_map_size`` (how far it grows, 1 TiB) and
    ``flush_interval`` (seconds between flushes in the "nosync" durability, 1)."""
    for name in options:
        if name not in _OPTIONS:
            raise InvalidArgument(f"a store in a file takes no option {name!r}")
    map_size = options.get("map_size", _DEFAULT_MAP)
    max_map_size = options.get("max_map_size", _DEFAULT_MAX_MAP)
    flush_interval = options.get("flush_interval", 1.0)
    if map_size <= 0 or max_map_size <= 0:
        raise InvalidArgument(f"map sizes must be positive: {map_size}, {max_map_size}")
    if not isinstance(flush_interval, int | float) or not 0 < flush_interval < float("inf"):
        raise InvalidArgument(
            f"flush_interval must be more than 0 seconds: {flush_interval!r:.100}"
        )
    engine = Engine.acquire(
        path,
        durability=durability,
        readonly=readonly,
        map_size=min(map_size, max_map_size),
        max_map_size=max_map_size,
        flush_interval=flush_interval,
    )
    return LmdbStorage(engine)


def open_file_copy(source: str, target: str, *, fingerprint: int,
                   format_from: int | None = None) -> LmdbStorage:  # fmt: skip
    """A compacted copy of the file at ``source``, opened at ``target`` (for this process only)
    at the fingerprint version it holds: for a migration to move its URLs. ``format_from``:
    the copy is of that older format, whose layout this one only adds tables to, and is
    marked with this format for the migration to write what they hold."""
    env = lmdb.open(source, subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        env.copy(target, compact=True)
    finally:
        env.close()
    if format_from is not None:
        mark_format(target, format_from, FORMAT_VERSION)
    engine = Engine(Path(target), durability=Durability.SAFE, readonly=False,
                    map_size=Path(source).stat().st_size * 2 + 2**20, max_map_size=2**40,
                    flush_interval=1.0, fingerprint=fingerprint)  # fmt: skip
    engine.refs = 1
    return LmdbStorage(engine)
