"""Migrating a store file of an older format or fingerprint version to this crawlstore's:
``crawlstore migrate PATH``, or opening it for writing.

The old file is read (in a child process: a damaged file can abort LMDB, never the caller),
a new file is written beside it, and the new file is renamed into place; the old one stays
beside it as ``PATH.v1`` (format 1), ``PATH.v2``, ``PATH.v3`` (formats 2 and 3) or ``PATH.fp1``
(fingerprint version 1). Nothing is changed when any step fails.

Format 2: its URL records move to their queues' key ranges (``upgrade.py``), then as format 3.

Format 3: its crawls' bounded indexes (recent failures, revisits by the minute, blocked trap
prefixes apart) are written from their records, then, when it holds an older fingerprint
version, its URLs move to their new fingerprints.

An older fingerprint version (the canonical form changed): a copy of the file whose URLs move
to their new fingerprints (``frontier/refingerprint.py``), each crawl in one transaction, the
new fingerprints put beside the old ones in its seen set and validators.

Format 1: its crawls are written through the export stream into the new file.

Format 1 (before the frontier core) kept no per-URL records, no crawl policy and no per-queue
counters: finished URLs are known to the seen set only; a crawl whose queues had keys gets
the ``host`` queue mode when its keys are its seeds' hosts (else a mode named ``migrated``,
to register before opening it); per-queue counters start at zero, the crawl's totals carry on.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import lmdb
import lmdb.verify
import msgpack

from ...errors import CorruptStore, StoreError
from ...url import FINGERPRINT_VERSION
from .access import lock_holder, lock_path
from .child import run_child

__all__ = ["migrate", "read_meta"]


def migrate(path: str | os.PathLike[str]) -> Path:
    """Migrate the store at ``path`` to this crawlstore's format, in place; where the old file
    was kept. ``StoreError`` (the store unchanged) when another process has it open, or when
    it cannot be read."""
    path = Path(path)
    holder = lock_holder(path)
    if holder is not None:
        raise StoreError(f"{path} is open in process {holder}: close it everywhere to migrate")
    problems = lmdb.verify.verify(str(path), subdir=False)  # type: ignore[no-untyped-call]
    if problems:
        raise CorruptStore(f"{path} is damaged, so it is not migrated: {problems[0]} (and "
                           f"{len(problems) - 1} more problems); see verify()")  # fmt: skip
    new = path.with_name(path.name + ".migrating")
    kept = path.with_name(path.name + _kept_suffix(path))
    for leftover in (new, lock_path(new)):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    if kept.exists():
        raise StoreError(f"{kept} exists: a migration keeps the old file there; move it away")
    done = run_child("crawlstore.admin.migrate:child", str(path), str(new), timeout=86400)
    if done.returncode != 0:
        with contextlib.suppress(FileNotFoundError):
            new.unlink()
        with contextlib.suppress(FileNotFoundError):
            lock_path(new).unlink()
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise StoreError(f"{path} could not be migrated (it is unchanged): {said[:500]}")
    os.chmod(new, path.stat().st_mode & 0o7777)
    os.link(path, kept)  # the old file stays, under its new name...
    os.replace(new, path)  # ...and the new one takes its place in one step
    with contextlib.suppress(FileNotFoundError):
        lock_path(new).unlink()
    return kept


def read_meta(path: Path) -> dict[str, Any]:
    env = lmdb.open(str(path), subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        with env.begin() as txn:
            meta: dict[str, Any] = msgpack.unpackb(
                txn.get(b"meta", db=env.open_db(b"meta", txn=txn, create=False)), raw=False
            )
        return meta
    finally:
        env.close()


def _kept_suffix(path: Path) -> str:
    """Where the old file stays: ``.v1`` for format 1 (``.v2``, ``.v3`` for 2 and 3), ``.fp1``
    for fingerprint version 1."""
    meta = read_meta(path)
    if meta.get("format") in (1, 2, 3):
        return f".v{meta['format']}"
    if meta.get("fingerprint", FINGERPRINT_VERSION) >= FINGERPRINT_VERSION:
        raise StoreError(f"{path} has this crawlstore's format and fingerprint version: "
                         "nothing to migrate")  # fmt: skip
    return f".fp{meta.get('fingerprint')}"
