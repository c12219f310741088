"""``verify``: check a store file offline: LMDB's structure, then every record and counter.

python -m crawlstore.store.verify crawl.lmdb
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import Counter
from typing import Any

import lmdb
import lmdb.verify

from ..errors import CrawlstoreError
from . import keys
from .engine import COUNTERS, unpack

__all__ = ["verify"]


def verify(path: str | os.PathLike[str]) -> list[str]:
    """Problems found in the store file at ``path``; an empty list means none.

    First LMDB's own offline check of every page (it never hands the file to the engine, so a
    torn or garbled file cannot crash the interpreter); then, on a sound file, every record is
    decoded and every crawl's counters are compared with what its tables hold.
    """
    try:
        found = lmdb.verify.verify(os.fspath(path), subdir=False)  # type: ignore[no-untyped-call]
        problems = [f"lmdb: {p}" for p in found]
    except (lmdb.verify.VerifyError, OSError) as exc:
        return [f"not a readable LMDB file: {exc}"]
    if problems:
        return problems
    from . import Store

    try:
        with Store.open(path, readonly=True) as store:
            engine = store._engine
            return engine.read(lambda txn: _check_contents(txn, engine.dbs, store.crawls()))
    except CrawlstoreError as exc:
        return [f"{type(exc).__name__}: {exc}"]


def _check_contents(txn: lmdb.Transaction, dbs: dict[str, Any], crawls: list[str]) -> list[str]:
    problems: list[str] = []
    held: dict[str, Counter[bytes]] = {}
    for name in ("pending", "leases", "schedule", "validators", "state", "queues", "crawls"):
        counts: Counter[bytes] = Counter()
        for key, raw in txn.cursor(db=dbs[name]):
            if name not in ("leases",):  # a lease is a binary header, then msgpack
                try:
                    unpack(name, key, raw)
                except CrawlstoreError as exc:
                    problems.append(str(exc))
            counts[bytes(key[:4])] += 1
        held[name] = counts
    revisits: Counter[bytes] = Counter()
    for key, raw in txn.cursor(db=dbs["schedule"]):
        with contextlib.suppress(CrawlstoreError, IndexError, TypeError):  # reported above
            revisits[bytes(key[:4])] += unpack("schedule", key, raw)[3]
    seen: Counter[bytes] = Counter()
    cursor = txn.cursor(db=dbs["seen"])
    for key in cursor.iternext_nodup(values=False):
        cursor.set_key(key)
        seen[bytes(key)] = cursor.count()
    for name in crawls:
        record = unpack("crawls", name.encode(), txn.get(name.encode(), db=dbs["crawls"]))
        crawl = keys.u32(record["id"])
        stored = txn.get(crawl, db=dbs[COUNTERS])
        counters = unpack(COUNTERS, crawl, stored) if stored is not None else {}
        expected = {
            "queued": held["pending"][crawl],
            "in_flight": held["leases"][crawl],
            "scheduled": held["schedule"][crawl],
            "revisits": revisits[crawl],
            "validators": held["validators"][crawl],
            "seen": seen[crawl],
        }
        for counter, count in expected.items():
            if counters.get(counter, 0) != count:
                problems.append(
                    f"crawl {name!r}: counter {counter} is {counters.get(counter, 0)}, "
                    f"the tables hold {count}"
                )
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m crawlstore.store.verify PATH", file=sys.stderr)
        return 2
    problems = verify(args[0])
    for problem in problems:
        print(problem)
    print(f"{args[0]}: {'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
