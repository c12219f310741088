"""Issue 3's benchmarks: the LMDB store against a raw py-lmdb floor and a careful sqlite3 frontier.

At N seeds (``--store N [N ...]``; 1e5 by default, 1e4 with ``--quick``), side by side in one run:

- push through dedup (``store.frontier("fifo").dedup_with(store.seen())``) and pop + ``Done``:
  one operation per transaction (into, or from, a store that holds N seeds) and 1000 per
  transaction (N seeds into an empty store, then all of them out), at durability "safe" and
  "nosync". The first row of each group is the floor (``contenders.floor.LmdbFloor``): raw
  py-lmdb doing the same puts and deletes per transaction with the same environment flags.
  Beside it, the hand-written SQLite frontier (``contenders.sqlite_.SqliteFrontier``).
- file bytes per URL of the exact seen set and of the persisted Bloom filter;
- at N > 1e5: the throughput with N seeds queued against 1e5 queued (target: at least 0.70x);
- opening a store of N seeds (and of 1e6; 1e7 with ``--long``): target under 0.1 s.

Files go to temporary directories on the normal disk and are removed afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import lmdb
import mmh3
import msgpack

from crawlstore import Done, Fingerprint, Ready, Seed, Store
from crawlstore.storages._lmdb.backup import copy_compacted
from crawlstore.storages._lmdb.engine import DATABASES

from .contenders.floor import SEEN_TABLES, FloorSeen, LmdbFloor, used_bytes
from .contenders.sqlite_ import SqliteFrontier
from .harness import Result, label, measure, timed
from .suite import Scratch

BATCH = 1000  # operations per transaction in the grouped rows
SMALL = 100_000  # the queue the scaling rows compare against
OPEN_EXTRA = 1_000_000  # the open test always covers a store of this many seeds (not --quick)
OPEN_LONG = 10_000_000  # and, with --long, this many


@dataclass(frozen=True)
class Plan:
    """How many operations each kind of row runs at one store size."""

    n: int
    sync_ops: int = 2_000  # 1 op/txn rows of the "safe" groups (an fsync a commit)
    nosync_ops: int = 10_000  # 1 op/txn rows of the "nosync" groups
    scale_ops: int = 20_000  # grouped rows of the scaling comparison
    repeat: int = 3  # best of, for the rows above and the open rows
    cycle_repeat: int = 3  # best of, for the grouped rows that push and pop all n seeds

    @classmethod
    def make(cls, n: int, quick: bool) -> Plan:
        if quick:
            return cls(n, min(200, n), min(1_000, n), min(2_000, n), repeat=1, cycle_repeat=1)
        return cls(n, cycle_repeat=3 if n <= 200_000 else 1)


# -- inputs and files ----------------------------------------------------------------------------

_HOSTS = [f"www.site{i}.example" for i in range(50)]
_PARAMS = ["page=2", "sort=asc", "utm_source=feed", "q=red+lamp", "ref=home"]


class SeedSource:
    """Pre-built seeds whose URLs all differ within a run, so every push into a store is new."""

    def __init__(self) -> None:
        self._next = 0
        self._rng = random.Random(3)

    def take(self, k: int) -> list[Seed]:
        start, self._next = self._next, self._next + k
        rng = self._rng
        seeds = []
        for i in range(start, start + k):
            query = "&".join(rng.sample([f"id={i}", *_PARAMS], rng.randrange(0, 4)))
            url = f"https://{_HOSTS[i % 50]}/path/to/item-{i}" + (f"?{query}" if query else "")
            seeds.append(Seed.get(url))
        gc.freeze()  # the benchmark's own inputs stay out of the collector's full passes
        return seeds


def _live_bytes(path: str, name: bytes) -> int:
    """Bytes of the pages that the named database holds in the file at ``path`` (closed)."""
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        with env.begin() as txn:
            st = txn.stat(env.open_db(name, txn=txn, create=False))
        return int((st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"]) * st["psize"])
    finally:
        env.close()


def _compacted_bytes(path: str, tables: dict[str, dict[str, Any]]) -> int:
    """Bytes of a compacted copy of the file at ``path`` (closed), as ``Store.backup`` writes
    it: what the file costs at rest, without the pages that older commits freed."""
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=32)
    copy = Path(path + ".compact")
    try:
        with env.begin() as txn:
            handles = {
                name: (env.open_db(name.encode(), txn=txn, create=False, **flags), flags)
                for name, flags in tables.items()
            }
            copy_compacted(txn, handles, copy, used_bytes(env))
        return copy.stat().st_size
    finally:
        env.close()
        copy.unlink(missing_ok=True)


# -- the frontiers -------------------------------------------------------------------------------


class Runner(Protocol):
    """One frontier implementation opened on one file, driven the same way as the others: the
    shape of a contender's ``push`` and ``pop_report``, over seeds built beforehand.
    ``contenders.floor.LmdbFloor`` is one as it is."""

    def push_seeds(self, seeds: Sequence[Seed], batch: int) -> None:
        """Push every seed through dedup, ``batch`` to a transaction (1: a commit each)."""

    def pop_report(self, k: int, batch: int) -> None:
        """Pop a seed and report it done, ``k`` times: with ``batch`` 1 the pop and the report
        a transaction each, else ``batch`` pairs to a transaction."""

    def held(self) -> int:
        """Seeds queued or in flight."""

    def close(self) -> None: ...


class CrawlstoreRunner:
    def __init__(self, path: str, durability: str) -> None:
        self.store = Store.open(path, durability=durability)
        self.frontier = self.store.frontier("fifo").dedup_with(self.store.seen())

    def push_seeds(self, seeds: Sequence[Seed], batch: int) -> None:
        push, transaction = self.frontier.push, self.store.transaction
        if batch == 1:
            for seed in seeds:
                push(seed)
            return
        for i in range(0, len(seeds), batch):
            with transaction():
                for seed in seeds[i : i + batch]:
                    push(seed)

    def pop_report(self, k: int, batch: int) -> None:
        pop, report, transaction = self.frontier.pop, self.frontier.report, self.store.transaction
        for i in range(0, k, batch):
            with transaction() if batch > 1 else contextlib.nullcontext():
                for _ in range(min(batch, k - i)):
                    popped = pop()
                    if not isinstance(popped, Ready):
                        raise RuntimeError(f"crawlstore popped {popped!r}")
                    report(Done(popped.seed))

    def held(self) -> int:
        return len(self.frontier)

    def close(self) -> None:
        self.store.close()


class CrawlstoreBatchRunner(CrawlstoreRunner):
    """The same store, grouped through the batch calls: push_many, pop_many + report_many."""

    def push_seeds(self, seeds: Sequence[Seed], batch: int) -> None:
        push_many = self.frontier.push_many
        for i in range(0, len(seeds), batch):
            push_many(seeds[i : i + batch])

    def pop_report(self, k: int, batch: int) -> None:
        pop_many, report_many = self.frontier.pop_many, self.frontier.report_many
        for i in range(0, k, batch):
            with self.store.transaction():
                seeds = [ready.seed for ready in pop_many(min(batch, k - i))]
                report_many([Done(seed) for seed in seeds])
            if len(seeds) != min(batch, k - i):
                raise RuntimeError(f"crawlstore popped {len(seeds)} seeds")


class SqliteRunner:
    """``contenders.sqlite_.SqliteFrontier`` keyed by fingerprint, queueing each seed's
    msgpack record (decoded at each pop), as the floor does."""

    def __init__(self, path: str, synchronous: str) -> None:
        self.frontier = SqliteFrontier(path, synchronous)

    def push_seeds(self, seeds: Sequence[Seed], batch: int) -> None:
        push, packb, transaction = self.frontier.push, msgpack.packb, self.frontier.transaction
        for i in range(0, len(seeds), batch):
            with transaction():
                for seed in seeds[i : i + batch]:
                    push(seed.fingerprint, packb(seed.to_record(), use_bin_type=True))

    def pop_report(self, k: int, batch: int) -> None:
        f, unpackb = self.frontier, msgpack.unpackb
        for i in range(0, k, batch):  # batch 1: the pop and the report a transaction each
            with f.transaction() if batch > 1 else contextlib.nullcontext():
                for _ in range(min(batch, k - i)):
                    popped = f.pop()
                    if popped is None:
                        raise RuntimeError("the sqlite queue is empty")
                    unpackb(popped[1])
                    f.report(popped[0])

    def held(self) -> int:
        return len(self.frontier)

    def close(self) -> None:
        self.frontier.close()


@dataclass(frozen=True)
class Subject:
    """A row: an implementation at one durability."""

    name: str
    note: str  # what a commit does
    durability: str  # "safe" or "nosync": its groups, and the op count of its 1 op/txn rows
    family: str  # subjects of one family share the prefilled file of the 1 op/txn rows
    file: str
    open: Callable[[str], Runner]


SAFE_NOTE = "fdatasync per commit, meta page unsynced"
GROUP_NOTE = "no fsync per commit; a flusher thread syncs every 1 s"
FLOOR_SAFE = Subject(
    "raw py-lmdb floor, sync=True metasync=False",
    SAFE_NOTE,
    "safe",
    "floor",
    "floor.lmdb",
    lambda path: LmdbFloor(path, sync=True),
)
FLOOR_GROUP = Subject(
    "raw py-lmdb floor, sync=False",
    "no fsync",
    "nosync",
    "floor",
    "floor.lmdb",
    lambda path: LmdbFloor(path, sync=False),
)
STORE_SAFE = Subject(
    'crawlstore fifo().dedup_with(seen()), "safe"',
    SAFE_NOTE,
    "safe",
    "store",
    "store.lmdb",
    lambda path: CrawlstoreRunner(path, "safe"),
)
STORE_GROUP = Subject(
    'crawlstore fifo().dedup_with(seen()), "nosync"',
    GROUP_NOTE,
    "nosync",
    "store",
    "store.lmdb",
    lambda path: CrawlstoreRunner(path, "nosync"),
)
SQLITE_NORMAL = Subject(
    "SqliteFrontier, WAL + synchronous=NORMAL",
    "no fsync per commit (WAL fsynced at checkpoints)",
    "safe",
    "sqlite",
    "frontier.sqlite",
    lambda path: SqliteRunner(path, "NORMAL"),
)
SQLITE_FULL = Subject(
    "SqliteFrontier, WAL + synchronous=FULL",
    "fsync of the WAL per commit",
    "safe",
    "sqlite",
    "frontier.sqlite",
    lambda path: SqliteRunner(path, "FULL"),
)
STORE_SAFE_BATCH = Subject(
    'crawlstore, push_many / pop_many + report_many, "safe"',
    SAFE_NOTE,
    "safe",
    "store",
    "store.lmdb",
    lambda path: CrawlstoreBatchRunner(path, "safe"),
)
STORE_GROUP_BATCH = Subject(
    'crawlstore, push_many / pop_many + report_many, "nosync"',
    GROUP_NOTE,
    "nosync",
    "store",
    "store.lmdb",
    lambda path: CrawlstoreBatchRunner(path, "nosync"),
)
SUBJECTS = [FLOOR_SAFE, STORE_SAFE, SQLITE_NORMAL, SQLITE_FULL, FLOOR_GROUP, STORE_GROUP]
#: Grouped rows only: a batch call is the same thing as one operation at a time.
BATCH_SUBJECTS = [STORE_SAFE_BATCH, STORE_GROUP_BATCH]

PUSH, POP = "push via dedup", "pop + report Done"
EACH, GROUPED = "1 op/txn", f"{BATCH} ops/txn"


def _group(size: str, workload: str, grouping: str, durability: str) -> str:
    return f"{size}: {workload}, {grouping}, {durability}"


def _expect(runner: Runner, expected: int, what: str) -> None:
    held = runner.held()
    if held != expected:
        raise RuntimeError(f"{what}: {held} seeds held, expected {expected}")


# -- frontier rows -------------------------------------------------------------------------------


def _cycle(subject: Subject, seeds: Sequence[Seed], scratch: Scratch, plan: Plan) -> list[Result]:
    """Push every seed, BATCH to a txn, into a new file, then pop and report all: best of."""
    n, size = len(seeds), label(len(seeds))
    best_push = best_pop = float("inf")
    for _ in range(plan.cycle_repeat):
        path = scratch.path(subject.file)
        runner = subject.open(path)
        try:
            best_push = min(best_push, timed(functools.partial(runner.push_seeds, seeds, BATCH)))
            _expect(runner, n, subject.name)
            best_pop = min(best_pop, timed(functools.partial(runner.pop_report, n, BATCH)))
            _expect(runner, 0, subject.name)
        finally:
            runner.close()
            scratch.drop(path)
    best = f"best of {plan.cycle_repeat}"
    return [
        Result(
            _group(size, PUSH, GROUPED, subject.durability),
            subject.name,
            n,
            best_push,
            f"{GROUPED}, 0 -> {size} queued; {subject.note}; {best}",
        ),
        Result(
            _group(size, POP, GROUPED, subject.durability),
            subject.name,
            n,
            best_pop,
            f"{BATCH} pairs/txn, {size} -> 0 queued; {subject.note}; {best}",
        ),
    ]


def _prefill(subject: Subject, seeds: Sequence[Seed], scratch: Scratch) -> str:
    path = scratch.path(subject.file)
    runner = subject.open(path)
    try:
        runner.push_seeds(seeds, BATCH)
        _expect(runner, len(seeds), subject.name)
    finally:
        runner.close()
    return path


def _each(
    subject: Subject, path: str, ops: int, source: SeedSource, plan: Plan, size: str, group: str
) -> list[Result]:
    """``ops`` pushes, one txn each, into the store at ``path``; then ``ops`` pop + report
    pairs, a txn each: best of ``plan.repeat``. The store holds as many seeds afterwards."""
    batches = iter([source.take(ops) for _ in range(plan.repeat)])
    runner = subject.open(path)
    try:
        held = runner.held()
        note = f"{subject.note}; best of {plan.repeat}"
        push = measure(
            _group(size, PUSH, EACH, group),
            subject.name,
            ops,
            lambda: runner.push_seeds(next(batches), 1),
            repeat=plan.repeat,
            note=f"1 push/txn into {label(held)} queued; {note}",
        )
        pop = measure(
            _group(size, POP, EACH, group),
            subject.name,
            ops,
            lambda: runner.pop_report(ops, 1),
            repeat=plan.repeat,
            note=f"pop and report a txn each, from {label(held)} queued; {note}",
        )
        _expect(runner, held, subject.name)
    finally:
        runner.close()
    return [push, pop]


def _scale(
    subject: Subject, path: str, plan: Plan, source: SeedSource, kind: str, size: str
) -> list[Result]:
    """Grouped and 1 op/txn push and pop at durability "safe" on the store at ``path``."""
    runner = subject.open(path)
    try:
        held = runner.held()
        queued = label(held)
        rows = []
        for workload, grouping, ops in [
            (PUSH, GROUPED, plan.scale_ops),
            (POP, GROUPED, plan.scale_ops),
            (PUSH, EACH, plan.sync_ops),
            (POP, EACH, plan.sync_ops),
        ]:
            rows.append(
                _scale_row(runner, workload, grouping, ops, plan, source, kind, size, queued)
            )
        _expect(runner, held, subject.name)
    finally:
        runner.close()
    return rows


def _scale_row(
    runner: Runner,
    workload: str,
    grouping: str,
    ops: int,
    plan: Plan,
    source: SeedSource,
    kind: str,
    size: str,
    queued: str,
) -> Result:
    group = f"scale{kind}: {workload}, {grouping}, safe, {label(SMALL)} vs {size} queued"
    name = f"{'raw py-lmdb floor' if kind else 'crawlstore'}, {queued} queued"
    target = "; target >= 0.70x" if not kind and queued != label(SMALL) else ""
    note = f"{grouping} into/from {queued} queued; best of {plan.repeat}{target}"
    batch = BATCH if grouping == GROUPED else 1
    if workload == PUSH:
        batches = iter([source.take(ops) for _ in range(plan.repeat)])
        return measure(group, name, ops, lambda: runner.push_seeds(next(batches), batch),
                       repeat=plan.repeat, note=note)  # fmt: skip
    return measure(group, name, ops, lambda: runner.pop_report(ops, batch), repeat=plan.repeat,
                   note=note)  # fmt: skip


# -- seen sets -----------------------------------------------------------------------------------


class SeenFile(Protocol):
    """A seen set in a new file: ``contenders.floor.FloorSeen``, or ``StoreSeenFile``."""

    def insert(self, fps: Sequence[bytes], batch: int) -> None:
        """Each fingerprint, ``batch`` to a transaction."""

    def grown(self) -> int:
        """Bytes the file grew by since the set was created."""

    def close(self) -> None: ...


class StoreSeenFile:
    """``store.seen()``, or ``store.seen(bloom=...)``, of a new store (durability "safe")."""

    def __init__(self, path: str, bloom: tuple[int, float] | None) -> None:
        self.store = Store.open(path)
        self.seen = self.store.seen(bloom=bloom)
        self.before = self.store.file_size()

    def insert(self, fps: Sequence[bytes], batch: int) -> None:
        add, transaction = self.seen.insert, self.store.transaction
        for i in range(0, len(fps), batch):
            with transaction():
                for fp in fps[i : i + batch]:
                    add(fp)

    def grown(self) -> int:
        return self.store.file_size() - self.before

    def close(self) -> None:
        self.store.close()


class _SeenRun:
    """State of one seen-set row across ``measure``'s runs: each run gets a new file."""

    def __init__(self, scratch: Scratch, make: Callable[[str], SeenFile]) -> None:
        self.scratch, self.make = scratch, make
        self.path = ""
        self.file: SeenFile | None = None
        self.grown = 0

    def setup(self) -> None:
        self.drop()
        self.path = self.scratch.path("seen.lmdb")
        self.file = self.make(self.path)

    def run(self, fps: Sequence[bytes]) -> None:
        assert self.file is not None
        self.file.insert(fps, BATCH)
        self.grown = self.file.grown()

    def drop(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
            self.scratch.drop(self.path)


def _empty_compacted(
    scratch: Scratch, make: Callable[[str], SeenFile], tables: dict[str, dict[str, Any]]
) -> int:
    """The compacted size of the same kind of file holding no fingerprint."""
    path = scratch.path("empty.lmdb")
    try:
        make(path).close()
        return _compacted_bytes(path, tables)
    finally:
        scratch.drop(path)


def _seen_rows(plan: Plan, scratch: Scratch) -> list[Result]:
    n, size = plan.n, label(plan.n)
    fps = [Fingerprint(mmh3.mmh3_x64_128_digest(b"in" + i.to_bytes(8, "big"))) for i in range(n)]
    absent = [
        Fingerprint(mmh3.mmh3_x64_128_digest(b"out" + i.to_bytes(8, "big"))) for i in range(10_000)
    ]
    group = f"{size}: seen set, {size} fingerprints into a new crawl, {BATCH}/txn, safe"
    exact, bloom = "crawlstore store.seen() insert", "crawlstore store.seen(bloom=(N, 0.01)) insert"
    cases: list[tuple[str, Callable[[str], SeenFile], float, bytes]] = [
        ("raw py-lmdb dupsort+dupfixed put (the layout of store.seen())", FloorSeen, 48, b"seen"),
        (exact, lambda path: StoreSeenFile(path, None), 48, b"seen"),
        (bloom, lambda path: StoreSeenFile(path, (n, 0.01)), 1.3, b"bloom"),
    ]
    results = []
    for name, make, target, db in cases:
        state = _SeenRun(scratch, make)
        extra = ""
        try:
            result = measure(
                group,
                name,
                n,
                functools.partial(state.run, fps),
                setup=state.setup,
                repeat=plan.cycle_repeat,
            )
            last = state.file
            assert last is not None
            if isinstance(last, StoreSeenFile):
                if any(fp not in last.seen for fp in fps[:: max(1, n // 2_000)]):
                    raise RuntimeError(f"{name}: a fingerprint it holds is missing")
                if name == bloom:
                    rate = sum(fp in last.seen for fp in absent) / len(absent)
                    extra = f"; measured fp {rate:.2%}"
            last.close()
            state.file = None
            live = _live_bytes(state.path, db)
            tables = SEEN_TABLES if name.startswith("raw") else DATABASES
            at_rest = _compacted_bytes(state.path, tables) - _empty_compacted(scratch, make, tables)
        finally:
            state.drop()
            scratch.drop(state.path)
        result.note = (
            f"file at rest +{at_rest / n:.2f} B/URL (target <= {target:g}); its table's pages "
            f"{live / n:.2f} B/URL; high-water mark while writing +{state.grown / n:.2f} "
            f"B/URL{extra}; best of {plan.cycle_repeat}"
        )
        results.append(result)
    return results


# -- opening -------------------------------------------------------------------------------------


def _open_rows(path: str, size: str, repeat: int) -> list[Result]:
    """Open the store at ``path`` (closed), find the crawl and count its seeds: the raw floor
    (``lmdb.open`` + the crawl record + its counters) against ``Store.open`` + ``frontier()``
    + ``len()``. Warm page cache."""
    group = f"{size}: open a store of {size} seeds"
    opened: list[Callable[[], None]] = []
    counts: list[int] = []

    def close() -> None:
        while opened:
            opened.pop()()

    def raw() -> None:
        env = lmdb.open(
            path,
            subdir=False,
            map_size=64 * 2**20,
            max_dbs=16,
            sync=True,
            metasync=False,
            max_spare_txns=0,
            lib_version=0,
        )
        opened.append(env.close)
        crawls = env.open_db(b"crawls", create=False)
        counters = env.open_db(b"queues", create=False)
        with env.begin() as txn:
            crawl = msgpack.unpackb(txn.get(b"default", db=crawls))
            c = msgpack.unpackb(
                txn.get(crawl["id"].to_bytes(4, "big"), db=counters), strict_map_key=False
            )
        counts.append(c.get("queued", 0) + c.get("in_flight", 0) + c.get("scheduled", 0))

    def store() -> None:
        s = Store.open(path)
        opened.append(s.close)
        counts.append(len(s.frontier()))

    try:
        floor = measure(
            group,
            "raw py-lmdb: lmdb.open + crawl record + counters",
            1,
            raw,
            setup=close,
            repeat=repeat,
        )
        close()
        ours = measure(
            group,
            "crawlstore Store.open(path) + frontier() + len()",
            1,
            store,
            setup=close,
            repeat=repeat,
        )
    finally:
        close()
    if len(set(counts)) != 1:
        raise RuntimeError(f"the open rows counted different seeds: {sorted(set(counts))}")
    held, file_bytes = counts[0], os.path.getsize(path)
    info = f"{held:,} seeds, file {file_bytes / 1e6:,.0f} MB ({file_bytes / held:.0f} B/seed)"
    floor.note = f"{info}; warm page cache; best of {repeat}"
    ours.note = f"target < 0.1 s; {info}; warm page cache; best of {repeat}"
    return [floor, ours]


def _fill(path: str, n: int, source: SeedSource) -> None:
    """A store of ``n`` queued seeds (plain FIFO frontier), pushed 10,000 to a transaction."""
    with Store.open(path, durability="nosync") as store:
        frontier = store.frontier("fifo")
        for start in range(0, n, 100_000):
            seeds = source.take(min(100_000, n - start))
            for i in range(0, len(seeds), 10_000):
                with store.transaction():
                    for seed in seeds[i : i + 10_000]:
                        frontier.push(seed)
            del seeds
        if len(frontier) != n:
            raise RuntimeError(f"filled {len(frontier)} seeds, expected {n}")


# -- entry points --------------------------------------------------------------------------------


def _size(text: str) -> int:
    try:
        value = int(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of seeds: {text!r}") from None
    if value < BATCH:
        raise argparse.ArgumentTypeError(f"at least {BATCH} seeds: {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        nargs="+",
        type=_size,
        metavar="N",
        help="store benchmark sizes in seeds, e.g. 100000 1e6 (default: N)",
    )
    parser.add_argument(
        "--long",
        action="store_true",
        help="also open a store of 1e7 seeds (filling it takes minutes)",
    )


def _log(message: str) -> None:
    print(f"[store] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def bench_size(plan: Plan, source: SeedSource, scratch: Scratch) -> list[Result]:
    """Every store row at ``plan.n`` seeds."""
    size = label(plan.n)
    _log(f"{size}: building {plan.n:,} seeds")
    base = source.take(plan.n)
    rows: dict[str, list[Result]] = {}

    def add(results: list[Result]) -> None:
        for r in results:
            rows.setdefault(r.group, []).append(r)

    for workload in (PUSH, POP):  # the group order of the table
        for grouping in (EACH, GROUPED):
            for durability in ("safe", "nosync"):
                rows[_group(size, workload, grouping, durability)] = []
    for subject in [*SUBJECTS, *BATCH_SUBJECTS]:
        _log(f"{size}: {GROUPED}, {subject.name}")
        add(_cycle(subject, base, scratch, plan))
    _log(f"{size}: prefilling a store of each kind")
    families = {}
    for subject in SUBJECTS:
        if subject.family not in families:
            families[subject.family] = _prefill(subject, base, scratch)
    if plan.n > SMALL:
        for subject, kind in ((STORE_SAFE, ""), (FLOOR_SAFE, " (raw floor)")):
            _log(f"{size}: scaling, {subject.name}")
            small = _prefill(subject, base[:SMALL], scratch)
            add(_scale(subject, small, plan, source, kind, size))
            scratch.drop(small)
            add(_scale(subject, families[subject.family], plan, source, kind, size))
    for subject in SUBJECTS:
        _log(f"{size}: {EACH}, {subject.name}")
        ops = plan.sync_ops if subject.durability == "safe" else plan.nosync_ops
        add(_each(subject, families[subject.family], ops, source, plan, size, subject.durability))
    _log(f"{size}: seen sets")
    add(_seen_rows(plan, scratch))
    _log(f"{size}: opening")
    add(_open_rows(families["store"], size, max(plan.repeat, 3)))
    for path in families.values():
        scratch.drop(path)
    return [r for group in rows.values() for r in group]


def bench_open(n: int, source: SeedSource, scratch: Scratch) -> list[Result]:
    """Only the open rows, on a store filled with ``n`` seeds for them."""
    _log(f"{label(n)}: filling a store for the open rows")
    path = scratch.path("store.lmdb")
    try:
        _fill(path, n, source)
        return _open_rows(path, label(n), 3)
    finally:
        scratch.drop(path)


def bench(args: argparse.Namespace, n: int) -> list[Result]:
    """The store rows at each ``--store`` size (default ``n``), then the extra open rows."""
    quick = bool(args.quick)
    sizes = args.store or [n]
    opens = [] if quick or OPEN_EXTRA in sizes else [OPEN_EXTRA]
    if args.long and OPEN_LONG not in sizes:
        opens.append(OPEN_LONG)
    source, scratch = SeedSource(), Scratch()
    results = []
    try:
        for size in sizes:
            results += bench_size(Plan.make(size, quick), source, scratch)
        for size in opens:
            results += bench_open(size, source, scratch)
    finally:
        scratch.close()
        gc.unfreeze()
    return results
