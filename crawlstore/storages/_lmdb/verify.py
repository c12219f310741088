"""``verify``: check a store file offline: LMDB's structure, then every record and counter.

python -m crawlstore.storages._lmdb.verify crawl.lmdb

It never takes the caller down, whatever the file holds: the structure is walked in pure Python
(py-lmdb's offline verifier, which never hands the file to the engine), and the records, which
LMDB itself must read, are read in a child process, where an abort of LMDB on a damaged page
becomes a problem in the list.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import lmdb.verify

from ...errors import CrawlstoreError, OlderFormat
from ...frontier.spi import QUEUE_FIELDS, Durability, QueueRecord, tend_at
from .._records import decode_failure, decode_url, ms_up
from . import keys
from .child import run_child
from .codec import scan, unpack
from .context import COUNTERS

__all__ = ["verify"]

#: Seconds the records of one file may take to read in the child before it is stopped.
_TIMEOUT = 3600


def verify(path: str | os.PathLike[str], *, isolated: bool = True) -> list[str]:
    """Problems found in the store file at ``path``; an empty list means none.

    First LMDB's own offline check of every page, then (on a sound file) every record is
    decoded and every crawl's counters are compared with what its tables hold. ``isolated``
    (the default) reads the records in a child process, so that a file damaged in a way the
    page check misses cannot abort this one; ``isolated=False`` reads them here (faster, for
    files you trust, such as your own backups).
    """
    try:
        found = lmdb.verify.verify(os.fspath(path), subdir=False)  # type: ignore[no-untyped-call]
    except (lmdb.verify.VerifyError, OSError) as exc:
        return [f"not a readable LMDB file: {exc}"]
    if found:
        return [f"lmdb: {p}" for p in found]
    if not isolated:
        return check_records(path)
    return _check_in_child(Path(path))


def _check_in_child(path: Path) -> list[str]:
    try:
        done = run_child("crawlstore.storages._lmdb.verify:_child", str(path), timeout=_TIMEOUT)
    except subprocess.TimeoutExpired:
        return [f"reading the records took longer than {_TIMEOUT} s: stopped"]
    table, problems = "the file's tables", None
    for line in done.stdout.splitlines():
        with contextlib.suppress(ValueError, TypeError, KeyError):
            message = json.loads(line)
            table = message.get("reading", table)
            problems = message.get("problems", problems)
    if done.returncode == 0 and isinstance(problems, list):
        return [str(p) for p in problems]
    if done.returncode < 0:
        how = f"was killed by {signal.Signals(-done.returncode).name}"
    else:
        how = f"exited with status {done.returncode}"
    said = (done.stderr.strip().splitlines() or ["nothing"])[-1][:300]
    return [f"damaged: LMDB aborted reading table {table} (the reading process {how}; "
            f"it said: {said})"]  # fmt: skip


def _child(path: str) -> None:
    """The child's side: progress (the table being read) and the problems, as JSON lines."""

    def reading(table: str) -> None:
        print(json.dumps({"reading": table}), flush=True)

    print(json.dumps({"problems": check_records(path, reading)}), flush=True)


def check_records(
    path: str | os.PathLike[str], reading: Callable[[str], object] = str
) -> list[str]:
    """Decode every record and compare every crawl's counters with its tables (through LMDB:
    call it on a file whose pages passed the offline check). ``reading(table)`` is called as
    each table's walk begins."""
    from .opener import open_file

    try:
        storage = open_file(path, durability=Durability.SAFE, readonly=True, options={})
    except OlderFormat:
        return []  # an older format, sound as far as its pages go: migrating reads it
    except CrawlstoreError as exc:
        return [f"{type(exc).__name__}: {exc}"]
    try:
        engine = storage.engine
        crawls = storage.view(storage.crawls)
        return engine.read(lambda txn: _check_contents(txn, engine.dbs, crawls, reading))
    except CrawlstoreError as exc:
        return [f"{type(exc).__name__}: {exc}"]
    finally:
        storage.close()


#: Every table but the seen set (its duplicates are counted on their own), msgpack ones first.
#: Tables whose values are msgpack records, decoded to check them; then those of raw values.
_RECORD_TABLES = ("crawls", "queues", "urls", "validators", "state", "meta")
_TABLES = (*_RECORD_TABLES, "pending", "leases", "schedule", "expiries", "ready", "loads",
           "wakes", "qnames", "fingerprints", "bloom")  # fmt: skip


def _check_contents(
    txn: lmdb.Transaction, dbs: dict[str, Any], crawls: list[str], reading: Callable[[str], object]
) -> list[str]:
    problems: list[str] = []
    held: dict[str, Counter[bytes]] = {}
    by_queue: dict[str, Counter[bytes]] = {}
    revisits: Counter[bytes] = Counter()
    for name in _TABLES:
        reading(name)
        counts: Counter[bytes] = Counter()
        queues: Counter[bytes] = Counter()
        decoded = name in _RECORD_TABLES
        for key, raw in txn.cursor(db=dbs[name]):
            if decoded:
                try:
                    if name == "urls":
                        problems += _check_url(txn, dbs, bytes(key), bytes(raw), revisits)
                    else:
                        unpack(name, key, raw)
                except CrawlstoreError as exc:
                    problems.append(str(exc))
                except (TypeError, IndexError, KeyError):
                    problems.append(f"{name} record {bytes(key).hex()} is malformed")
            counts[bytes(key[keys.CRAWL])] += 1
            queues[bytes(key[keys.QUEUE])] += 1
        held[name] = counts
        by_queue[name] = queues
    reading("seen")
    seen: Counter[bytes] = Counter()
    cursor = txn.cursor(db=dbs["seen"])
    for key in cursor.iternext_nodup(values=False):
        cursor.set_key(key)  # each duplicate read, so that every page of the set is
        seen[bytes(key)] = sum(1 for _ in cursor.iternext_dup(keys=False))
    for name in crawls:
        try:
            record = unpack("crawls", name.encode(), txn.get(name.encode(), db=dbs["crawls"]))
            crawl = keys.u32(record["id"])
        except (CrawlstoreError, KeyError, TypeError, IndexError, ValueError) as exc:
            problems.append(f"crawl {name!r}: its record is malformed ({exc})")
            continue
        stored = txn.get(crawl, db=dbs[COUNTERS])
        try:
            counters = unpack(COUNTERS, crawl, stored) if stored is not None else {}
            dict(counters)
        except (CrawlstoreError, TypeError, ValueError) as exc:
            problems.append(f"crawl {name!r}: its counters are malformed ({exc})")
            continue
        expected = {
            "queued": held["pending"][crawl],
            "in_flight": held["leases"][crawl],
            "scheduled": held["schedule"][crawl],
            "revisits": revisits[crawl],
            "validators": held["validators"][crawl],
            "seen": seen[crawl],
            "queues": held["qnames"][crawl],
        }
        if held["urls"][crawl] != held["fingerprints"][crawl]:
            problems.append(f"crawl {name!r}: {held['urls'][crawl]} URL records, "
                            f"{held['fingerprints'][crawl]} fingerprints")  # fmt: skip
        if held["ready"][crawl] != held["loads"][crawl]:
            problems.append(f"crawl {name!r}: {held['ready'][crawl]} queues in ready, "
                            f"{held['loads'][crawl]} in loads")  # fmt: skip
        if held["leases"][crawl] != held["expiries"][crawl]:
            problems.append(f"crawl {name!r}: {held['leases'][crawl]} leases, "
                            f"{held['expiries'][crawl]} expiries")  # fmt: skip
        for counter, count in expected.items():
            if counters.get(counter, 0) != count:
                problems.append(
                    f"crawl {name!r}: counter {counter} is {counters.get(counter, 0)}, "
                    f"the tables hold {count}"
                )
        problems += _check_queues(txn, dbs, name, crawl, by_queue, held)
        problems += _check_indexes(txn, dbs, name, crawl, revisits[crawl])
    return problems


def _check_indexes(txn: lmdb.Transaction, dbs: dict[str, Any], name: str, crawl: bytes,
                   revisits: int) -> list[str]:  # fmt: skip
    """The crawl's bounded indexes: the revisits they count are those scheduled, and its
    recent failures decode and are as many as their count says."""
    problems: list[str] = []
    counted = 0
    for key, raw in scan(txn, dbs["revisits"], crawl):
        if len(key) != len(crawl) + 8 or len(raw) != 8:
            problems.append(f"revisits record {key.hex()} is malformed")
            continue
        counted += keys.read_u64(raw)
    if counted != revisits:
        problems.append(f"crawl {name!r}: the revisits index counts {counted}, the schedule "
                        f"holds {revisits}")  # fmt: skip
    held, entries = 0, 0
    for key, raw in scan(txn, dbs["failures"], crawl):
        try:
            if len(key) == len(crawl):
                held = int.from_bytes(raw, "big") if len(raw) == 4 else -1
            else:
                decode_failure(raw, key)
                entries += 1
        except CrawlstoreError as exc:
            problems.append(str(exc))
    if held != entries:
        problems.append(f"crawl {name!r}: the recent failures count {held}, {entries} are "
                        "kept")  # fmt: skip
    return problems


def _check_url(txn: lmdb.Transaction, dbs: dict[str, Any], key: bytes, raw: bytes,
               revisits: Counter[bytes]) -> list[str]:  # fmt: skip
    """A URL record: it decodes, and ``fingerprints`` names its key (no two records of one
    fingerprint, when the counts agree too)."""
    url = decode_url(raw[:16], raw[16:], key)
    url.seed  # noqa: B018  (decoded to check it)
    crawl = key[keys.CRAWL]
    revisits[crawl] += url.state == "scheduled" and url.kind == "revisit"
    found = txn.get(crawl + raw[:16], db=dbs["fingerprints"])
    if found is None or bytes(found) != key[keys.AFTER_CRAWL]:
        return [f"urls record {key.hex()}: fingerprints has {raw[:16].hex()} at "
                f"{bytes(found).hex() if found is not None else 'no place'}"]  # fmt: skip
    return []


def _check_queues(
    txn: lmdb.Transaction, dbs: dict[str, Any], name: str, crawl: bytes,
    by_queue: dict[str, Counter[bytes]], by_crawl: dict[str, Counter[bytes]],
) -> list[str]:  # fmt: skip
    """Each queue's gauges against its entries, leases and schedule, and its keys in the
    indexes by load and by ``tend_at`` against its record (``loads`` holds what ``ready`` does,
    by count)."""
    problems: list[str] = []
    cursor = txn.cursor(db=dbs["queues"])
    if not cursor.set_range(crawl):
        return problems
    wakes = 0
    for key, raw in cursor:
        if key[keys.CRAWL] != crawl:
            break
        if len(key) != keys.QUEUE.stop:  # a queue's record (the crawl's totals: its id only)
            continue
        qkey = bytes(key)
        try:
            *record, placed = unpack("queues", qkey, raw)
            fields = dict(zip(QUEUE_FIELDS, record, strict=False))
            qname = fields["key"]
            gauges = {name: fields[name] for name in ("queued", "in_flight", "scheduled")}
            at = tend_at(QueueRecord.from_record(record))
            load = keys.load_key(placed, gauges["in_flight"])
        except (CrawlstoreError, TypeError, ValueError, IndexError, KeyError):
            continue  # reported with the table
        qid = keys.read_u32(qkey, keys.CRAWL.stop)
        wake = keys.wake_key(crawl, qid, None if at is None else ms_up(at))
        for table, indexed in (("loads", load), ("wakes", wake)):
            if indexed is not None and txn.get(indexed, db=dbs[table]) is None:
                problems.append(f"crawl {name!r}, queue {qname!r}: {table} has no key "
                                f"{indexed.hex()}")  # fmt: skip
        wakes += wake is not None
        held = {"queued": by_queue["pending"][qkey], "scheduled": by_queue["schedule"][qkey],
                "in_flight": by_queue["leases"][qkey]}  # fmt: skip
        for gauge, count in held.items():
            if gauges[gauge] != count:
                problems.append(f"crawl {name!r}, queue {qname!r}: {gauge} is {gauges[gauge]}, "
                                f"the tables hold {count}")  # fmt: skip
    if wakes != by_crawl["wakes"][crawl]:
        problems.append(f"crawl {name!r}: {wakes} queues to tend, "
                        f"{by_crawl['wakes'][crawl]} in wakes")  # fmt: skip
    return problems
