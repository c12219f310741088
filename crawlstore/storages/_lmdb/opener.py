"""Opening a store in a file."""

from __future__ import annotations

import os
import sys
from typing import Any

from ...errors import InvalidArgument
from ...frontier.protocol import check_time
from ...frontier.spi import Durability
from .engine import Engine
from .storage import LmdbStorage

__all__ = ["open_file"]

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
    if check_time("flush_interval", flush_interval, minimum=0) == 0:
        raise InvalidArgument("flush_interval must be more than 0 seconds")
    engine = Engine.acquire(
        path,
        durability=durability,
        readonly=readonly,
        map_size=min(map_size, max_map_size),
        max_map_size=max_map_size,
        flush_interval=flush_interval,
    )
    return LmdbStorage(engine)
