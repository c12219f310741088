"""What only a store in a file can do: its path, its size, a backup."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import lmdb

from ...errors import StoreError
from .backup import copy_compacted
from .engine import DATABASES

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["LmdbFile"]


class LmdbFile:
    """The file of an LMDB store (``StoreFile``)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def path(self) -> Path:
        return self._engine.path

    def size(self) -> int:
        return self._engine.used_bytes()

    def records_size(self) -> int:
        return self._engine.record_bytes()

    def backup(self, target: Path, *, compact: bool) -> None:
        engine = self._engine
        if not compact:
            try:
                engine.env.copy(str(target))
            except lmdb.Error as exc:
                raise StoreError(f"backup to {target} failed: {exc}") from None
            return
        tables = {
            name: (engine.dbs[name], flags)
            for name, flags in DATABASES.items()
            if name in engine.dbs  # a table an older file lacks is created when opened
        }

        def copy(txn: lmdb.Transaction) -> None:
            try:
                copy_compacted(txn, tables, target, engine.used_bytes())
            except lmdb.Error as exc:  # the copy's own errors, not the store's
                raise StoreError(f"backup to {target} failed: {exc}") from None

        engine.read_committed(copy)  # never the caller's uncommitted transaction
