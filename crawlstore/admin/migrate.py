"""The child process of a file's migration (``crawlstore.storages._lmdb.migrate``, which runs
it): it reads the old file and writes the new one through a ``Store``.

An older fingerprint version (the canonical form changed): a copy of the file whose URLs move
to their new fingerprints (``frontier/refingerprint.py``), each crawl in one transaction, the
new fingerprints put beside the old ones in its seen set and validators.

Format 2: its URL records move to their queues' key ranges (``storages/_lmdb/upgrade.py``),
then as format 3.

Format 3: a copy of the file with each crawl's indexes (recent failures, revisits by minute,
blocked trap prefixes in their own namespace) written from its records (``frontier/reindex``),
then its URLs at their new fingerprints when the file holds an older version.

Format 1: its crawls are written through the export stream into the new file. Format 1 (before
the frontier core) kept no per-URL records, no crawl policy and no per-queue counters: finished
URLs are known to the seen set only; a crawl whose queues had keys gets the ``host`` queue mode
when its keys are its seeds' hosts (else a mode named ``migrated``, to register before opening
it); per-queue counters start at zero, the crawl's totals carry on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import can_ada
import lmdb
import msgpack

from ..seed import Seed
from ..storages import read_file_meta as read_meta
from ..storages import upgrade_file_format_2
from ..url import FINGERPRINT_VERSION

__all__ = ["child"]

_V1_TABLES = ("meta", "crawls", "queues", "qnames", "pending", "ready", "leases", "schedule",
              "due", "seen", "bloom", "validators", "state")  # fmt: skip
_LEASE_HEADER = 28  # queue id (4), expiry (8), pid (8), process start (8)


def child(source: str, target: str) -> None:
    """Read the old file, write the new one (run in a child process)."""
    meta = read_meta(Path(source))
    if meta.get("format") == 1:
        crawls = _from_format_1(source, target)
    elif meta.get("format") == 2:
        crawls = _from_format_2(source, target, meta.get("fingerprint", FINGERPRINT_VERSION))
    elif meta.get("format") == 3:
        crawls = _from_format_3(source, target, meta.get("fingerprint", FINGERPRINT_VERSION))
    else:  # an older fingerprint version (``_kept_suffix`` checked)
        crawls = _refingerprint(source, target, meta["fingerprint"])
    print(json.dumps({"migrated": crawls}))


def _from_format_1(source: str, target: str) -> list[str]:
    from ..frontier.export import with_end
    from ..store import Store, carry_fingerprints

    env = lmdb.open(source, subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        dbs = {name: env.open_db(name.encode(), create=False) for name in _V1_TABLES
               if _has(env, name)}  # fmt: skip
        with env.begin() as txn:
            crawls = [
                bytes(k).decode() for k in txn.cursor(db=dbs["crawls"]).iternext(values=False)
            ]
        with Store.open(target, durability="safe") as store:
            for name in crawls:
                moved: dict[bytes, bytes] = {}
                with env.begin() as txn:
                    store.load(with_end(_export_v1(txn, dbs, name, moved)), crawl=name)
                carry_fingerprints(store, name, moved)
    finally:
        env.close()
    return crawls


def _from_format_2(source: str, target: str, version: int) -> list[str]:
    """Format 2's URL records moved to their queues' ranges (format 3), then as format 3."""
    middle = target + ".format3"
    try:
        upgrade_file_format_2(source, middle)
        return _from_format_3(middle, target, version)
    finally:
        Path(middle).unlink(missing_ok=True)


def _from_format_3(source: str, target: str, version: int) -> list[str]:
    """A copy of a file of format 3 with each crawl's indexes written (format 4), then (an
    older fingerprint version) its URLs at their new fingerprints."""
    from ..clock import system_clock
    from ..storages import open_file_copy
    from ..store import Store, index_crawls, migrate_fingerprints

    with Store(open_file_copy(source, target, fingerprint=version, format_from=3),
               system_clock) as store:  # fmt: skip
        names = index_crawls(store)
        if version < FINGERPRINT_VERSION:
            return migrate_fingerprints(store)
        return names


def _refingerprint(source: str, target: str, version: int) -> list[str]:
    """A copy of the file with every crawl's URLs at this crawlstore's fingerprints."""
    from ..clock import system_clock
    from ..storages import open_file_copy
    from ..store import Store, migrate_fingerprints

    with Store(open_file_copy(source, target, fingerprint=version), system_clock) as store:
        return migrate_fingerprints(store)


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


def _export_v1(txn: lmdb.Transaction, dbs: dict[str, Any], name: str,
               moved: dict[bytes, bytes]) -> Iterator[dict[str, Any]]:  # fmt: skip
    """A format-1 crawl as export records (its seeds get this crawlstore's fingerprints as
    they load: ``moved`` gets the old and new of those that change)."""
    record = unpack(txn.get(name.encode(), db=dbs["crawls"]))
    prefix = int(record["id"]).to_bytes(4, "big")
    counters = unpack(txn.get(prefix, db=dbs["queues"]) or msgpack.packb({}))
    queues: dict[int, dict[str, Any]] = {}
    for key, raw in _scan(txn, dbs["queues"], prefix):
        if len(key) == 8:
            queues[int.from_bytes(key[4:], "big")] = unpack(raw)
    entries: list[tuple[int, list[int] | None, Any]] = []  # (qid, order, seed): one a URL
    held: set[bytes] = set()
    pages: set[bytes] = set()  # this crawlstore's fingerprints of the URLs kept

    def first(fp: bytes, seed: Any) -> bool:
        """Whether the URL is the first of its page (two spellings may be one page now)."""
        new = Seed.from_record(seed).fingerprint
        if new != fp:
            moved[fp] = new
        if fp in held or new in pages:
            return False
        held.add(fp)
        pages.add(new)
        return True

    for _, raw in _scan(txn, dbs["leases"], prefix):
        fp, seed = unpack(raw[_LEASE_HEADER:])
        if first(fp, seed):
            entries.append((int.from_bytes(raw[:4], "big"), None, seed))
    for key, raw in _scan(txn, dbs["pending"], prefix):
        fp, seed = unpack(raw)
        if first(fp, seed):
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
        if key[4:] in held or not first(key[4:], seed):
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
