"""Migrating a store file of an older format to this one: ``python -m crawlstore.store.migrate
PATH``, or opening it for writing.

The old file is read (in a child process: a damaged file can abort LMDB, never the caller),
its crawls are written through the export stream into a new file beside it, and the new file
is renamed into place; the old one stays beside it as ``PATH.v1``. Nothing is changed when
any step fails.

Format 1 (before the frontier core) kept no per-URL records, no crawl policy and no per-queue
counters: finished URLs are known to the seen set only; a crawl whose queues had keys gets
the ``host`` queue mode when its keys are its seeds' hosts (else a mode named ``migrated``,
to register before opening it); per-queue counters start at zero, the crawl's totals carry on.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import can_ada
import lmdb
import lmdb.verify
import msgpack

from ..errors import CorruptStore, StoreError
from .access import lock_holder, lock_path
from .child import run_child

__all__ = ["migrate"]

_V1_TABLES = ("meta", "crawls", "queues", "qnames", "pending", "ready", "leases", "schedule",
              "due", "seen", "bloom", "validators", "state")  # fmt: skip
_LEASE_HEADER = 28  # queue id (4), expiry (8), pid (8), process start (8)


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
    kept = path.with_name(path.name + ".v1")
    for leftover in (new, lock_path(new)):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    if kept.exists():
        raise StoreError(f"{kept} exists: a migration keeps the old file there; move it away")
    done = run_child("crawlstore.store.migrate:_child", str(path), str(new), timeout=86400)
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


def _child(source: str, target: str) -> None:
    """Read the old file, write the new one (run in a child process)."""
    from ..frontier.export import with_end
    from . import Store

    env = lmdb.open(source, subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        dbs = {name: env.open_db(name.encode(), create=False) for name in _V1_TABLES
               if _has(env, name)}  # fmt: skip
        with env.begin() as txn:
            meta = msgpack.unpackb(txn.get(b"meta", db=dbs["meta"]), raw=False)
            if meta.get("format") != 1:
                raise StoreError(f"{source} has format {meta.get('format')}, not 1")
            crawls = [
                bytes(k).decode() for k in txn.cursor(db=dbs["crawls"]).iternext(values=False)
            ]
        with Store.open(target, durability="safe") as store:
            for name in crawls:
                with env.begin() as txn:
                    store.load(with_end(_export_v1(txn, dbs, name)), crawl=name)
    finally:
        env.close()
    print(json.dumps({"migrated": crawls}))


def _has(env: lmdb.Environment, name: str) -> bool:
    with env.begin() as txn:
        return txn.get(name.encode()) is not None


def _scan(txn: lmdb.Transaction, db: Any, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    cursor = txn.cursor(db=db)
    if cursor.set_range(prefix):
        for key, value in cursor:
            if bytes(key[: len(prefix)]) != prefix:
                return
            yield bytes(key), bytes(value)


def unpack(raw: Any) -> Any:
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def _host(url: str) -> str:
    host: str = can_ada.parse(url).host
    return host


def _export_v1(txn: lmdb.Transaction, dbs: dict[str, Any], name: str) -> Iterator[dict[str, Any]]:
    """A format-1 crawl as export records."""
    record = unpack(txn.get(name.encode(), db=dbs["crawls"]))
    prefix = int(record["id"]).to_bytes(4, "big")
    counters = unpack(txn.get(prefix, db=dbs["queues"]) or msgpack.packb({}))
    queues: dict[int, dict[str, Any]] = {}
    for key, raw in _scan(txn, dbs["queues"], prefix):
        if len(key) == 8:
            queues[int.from_bytes(key[4:], "big")] = unpack(raw)
    entries: list[tuple[int, list[int] | None, Any]] = []  # (qid, order, seed): one a URL
    held: set[bytes] = set()
    for _, raw in _scan(txn, dbs["leases"], prefix):
        fp, seed = unpack(raw[_LEASE_HEADER:])
        if fp not in held:
            held.add(fp)
            entries.append((int.from_bytes(raw[:4], "big"), None, seed))
    for key, raw in _scan(txn, dbs["pending"], prefix):
        fp, seed = unpack(raw)
        if fp not in held:
            held.add(fp)
            order = [int.from_bytes(key[8:12], "big"), key[12], int.from_bytes(key[13:21], "big")]
            entries.append((int.from_bytes(key[4:8], "big"), order, seed))
    keyed = [q["k"] for q in queues.values() if q["k"]]
    hosts = all(_host(s[1]) == queues[qid]["k"] for qid, _, s in entries if queues[qid]["k"])
    mode = "single" if not keyed else ("host" if hosts else "migrated")
    gauges = ("queued", "in_flight", "scheduled", "revisits")
    totals = {k: v for k, v in counters.items()
              if isinstance(v, int) and k not in ("seq", "seen", "validators")}  # fmt: skip
    yield {"type": "crawl", "v": 1, "name": name, "created": float(record["created"]),
           "policy": {"order": record.get("order") or "priority", "queues": mode},
           "totals": {k: v for k, v in totals.items() if k not in gauges}}  # fmt: skip
    for _, q in sorted(queues.items()):
        yield {"type": "queue", "key": q["k"], "created": float(record["created"]),
               "delay": q.get("d"), "cap": q.get("cap"), "blocked": float(q.get("blk") or 0),
               "limit": None, "last": float(q.get("last", -math.inf)), "counts": {}}  # fmt: skip
    created = float(record["created"])
    for qid, place, seed in entries:
        yield {"type": "url", "seed": seed, "state": "queued", "queue": queues[qid]["k"],
               "kind": None, "created": created, "outcome": None, "order": place}  # fmt: skip
    for key, raw in _scan(txn, dbs["schedule"], prefix):
        at, seq, seed, kind = unpack(raw)
        if key[4:] in held:
            continue
        queue = "" if mode == "single" else _host(seed[1])
        yield {"type": "url", "seed": seed, "state": "scheduled", "queue": queue,
               "kind": "revisit" if kind else "retry", "created": created, "outcome": None,
               "at": float(at), "seq": int(seq)}  # fmt: skip
    for key, raw in _scan(txn, dbs["state"], prefix):
        namespace, _, rest = key[4:].partition(b"\x00")
        value = unpack(raw)
        if rest[:1] == b"\xff":
            yield {"type": "state", "namespace": namespace.decode(), "key": value[0],
                   "value": value[1]}  # fmt: skip
        else:
            yield {"type": "state", "namespace": namespace.decode(), "key": rest.decode(),
                   "value": value}  # fmt: skip
    cursor = txn.cursor(db=dbs["seen"])
    if cursor.set_key(prefix):
        fps = [bytes(fp) for fp in cursor.iternext_dup()]
        for i in range(0, len(fps), 4096):
            yield {"type": "seen", "fps": fps[i : i + 4096]}
    for key, raw in _scan(txn, dbs["bloom"], prefix):
        if key[4:5] == b"\x00":
            yield {"type": "bloom", "params": unpack(raw)}
        else:
            yield {"type": "bloom_chunk", "chunk": int.from_bytes(key[5:9], "big"), "bits": raw}
    for key, raw in _scan(txn, dbs["validators"], prefix):
        etag, last_modified, stored_at = unpack(raw)
        yield {"type": "validator", "fp": key[4:], "etag": etag, "last_modified": last_modified,
               "stored_at": stored_at}  # fmt: skip
