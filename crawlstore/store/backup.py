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


def copy_compacted(
    source: lmdb.Transaction,
    tables: dict[str, tuple[Any, dict[str, Any]]],
    target: Path,
    map_size: int,
) -> None:
    """Write every table of ``source`` (a read snapshot; ``tables``: name -> its handle and
    flags) to a new LMDB file at ``target``; the file appears there only once complete."""
    partial = target.with_name(target.name + ".partial")
    env = lmdb.open(
        str(partial), subdir=False, map_size=map_size, max_dbs=len(tables) + 1, lock=False
    )
    try:
        with env.begin(write=True) as txn:
            for name, (handle, flags) in tables.items():
                db = env.open_db(name.encode(), txn=txn, **flags)
                records = source.cursor(db=handle)
                txn.cursor(db=db).putmulti(
                    records.iternext(), dupdata=bool(flags.get("dupsort")), append=True
                )
        env.sync(True)
    except BaseException:
        env.close()
        partial.unlink(missing_ok=True)
        raise
    env.close()
    os.replace(partial, target)
