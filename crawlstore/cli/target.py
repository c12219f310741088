"""The store an import writes to, all or nothing: a store that exists (a file, or one on
Redis) is left as it was by an import that fails (the import undoes its crawl); a new file
appears only once the import is done."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import StoreError
from ..storages import sync_directory
from ..store import Store

__all__ = ["import_target"]


@contextmanager
def import_target(path: str) -> Iterator[Store]:
    """The store to load into: one on Redis, or a file that exists; else a new file, which
    appears at ``path`` only once the block is done (a failed import leaves no file)."""
    if "://" in path or os.path.lexists(path):
        with Store.open(path) as store:
            yield store
        return
    target = Path(path)
    try:
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".import",
                                     dir=target.parent))  # fmt: skip
    except OSError as exc:
        raise StoreError(f"{path} cannot be created: {exc.strerror}") from None
    try:
        with Store.open(work / target.name) as store:
            yield store
        with open(work / target.name, "rb") as done:
            os.fsync(done.fileno())
        try:
            os.link(work / target.name, target)  # unlike a rename, never replaces a file
        except FileExistsError:
            raise StoreError(f"{path} appeared while the import ran: it is left as it is") from None
        sync_directory(target.parent)
    finally:
        shutil.rmtree(work, ignore_errors=True)
