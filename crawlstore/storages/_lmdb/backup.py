"""A compacted copy of a store: every table written in key order into a new file.

LMDB's own compacting copy (``mdb_env_copy2`` with ``MDB_CP_COMPACT``, py-lmdb's
``env.copy(compact=True)``) kills the process with a segmentation fault once a ``dupfixed``
table holds a sub-database (LMDB 0.9.36, bundled with py-lmdb 3.0; the exact seen set of a few
hundred URLs is one). This copy reads one snapshot and appends each table's records in order, so
pages come out full, as the compacting copy would leave them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import lmdb

from ...errors import StoreError

#: Room in the copy's map beyond the source's used bytes (LMDB never fills a map's last page).
_SLACK = 1 << 20


def copy_compacted(
    source: lmdb.Transaction,
    tables: dict[str, tuple[Any, dict[str, Any]]],
    target: Path,
    used: int,
) -> None:
    """Write every table of ``source`` (a read snapshot; ``tables``: name -> its handle and
    flags; ``used``: the source's bytes in use, a bound on the copy) to a new LMDB file at
    ``target``. The file appears there only once complete, and never replaces a file."""
    partial = target.with_name(target.name + ".partial")
    try:  # claim the name: a second backup to the same target, or a stale one, is refused
        os.close(os.open(partial, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        raise StoreError(
            f"{partial} exists: another backup to {target} is running, or one was interrupted "
            "(remove it)"
        ) from None
    try:
        env = lmdb.open(
            str(partial), subdir=False, map_size=2 * used + _SLACK, max_dbs=len(tables) + 1,
            lock=False,
        )  # fmt: skip
        try:
            with env.begin(write=True) as txn:
                for name, (handle, flags) in tables.items():
                    db = env.open_db(name.encode(), txn=txn, **flags)
                    read, added = txn.cursor(db=db).putmulti(
                        source.cursor(db=handle).iternext(),
                        dupdata=bool(flags.get("dupsort")),
                        append=True,
                    )
                    if read != added:
                        raise StoreError(f"backup: table {name} lost {read - added} records")
            env.sync(True)
        finally:
            env.close()
        try:
            os.link(partial, target)  # unlike a rename, never replaces a file that appeared
        except FileExistsError:
            raise StoreError(f"{target} exists: a backup never overwrites a file") from None
        sync_directory(target.parent)
    finally:
        partial.unlink(missing_ok=True)


def sync_directory(path: Path) -> None:
    """Make a new name in ``path`` survive a power loss."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
