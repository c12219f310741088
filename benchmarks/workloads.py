"""The suite's workloads. Each takes (plan, scratch, progress, context) and returns tables."""

from __future__ import annotations

import gc
import os
import random
import shutil
import sqlite3
import statistics
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from crawlstore import BloomSeen, Fingerprint, InMemSeen, InMemValidators, Seed, Store, Validator

from . import crash
from .calls import calls
from .contenders import Contender, crawl_contenders
from .contenders.crawlstore_ import NOSYNC, SAFE, STORE_FILE, StoreByHand, StoreNosync, StoreSafe
from .contenders.sqlite_ import DB_FILE, SqliteFrontier
from .harness import label, timed
from .links import START, Links, start_urls, url
from .suite import Plan, Progress, Row, Scratch, Table, alternate

GROUP = 1000  # operations a commit in the grouped rows and the seen sets


@dataclass
class Context:
    """What workloads share: the crash column measured by the crawl loop."""

    crash: dict[str, str] = field(default_factory=dict)
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)


def _row(cls: type[Contender], ctx: Context, **kwargs: Any) -> Row:
    row = Row(cls.key, cls.label, note=cls.note, **kwargs)
    missing = cls.missing()
    if missing:
        row.skipped = f"skipped: {', '.join(missing)} not installed"
    row.crash = ctx.crash.get(cls.key, "all (memory only)" if cls.memory else "")
    return row


# -- 1. the crawl loop ---------------------------------------------------------------------------


def _calibrate(cls: type[Contender], plan: Plan, links: Links, scratch: Scratch,
               starts: list[str]) -> int:  # fmt: skip
    """Pages for a run of about ``plan.run_seconds`` (an untimed trial run, also a warm-up)."""
    trial = cls.trial_pages or (20 if cls.syncs else 100)
    with scratch.dir() as path:
        c = cls()
        c.open(path)
        c.seed(starts)
        seconds = timed(lambda: c.crawl(trial, links))
        c.close()
    pages = int(plan.run_seconds / max(seconds / trial, 1e-7))
    return max(plan.min_pages, cls.trial_pages, min(plan.max_pages, len(links.pages), pages))


def calibrated_rounds(table: Table, by_key: dict[str, type[Contender]], plan: Plan,
                      links: Links, scratch: Scratch, progress: Progress,
                      starts: list[str]) -> None:  # fmt: skip
    """Calibrate each row's pages (``table.columns[0]`` says them), then run ``plan.rounds``
    rounds: a run opens a contender, seeds it with ``starts``, times its crawl loop, and
    closes it."""
    for row in table.rows:
        if row.skipped:
            continue
        try:
            row.ops = _calibrate(by_key[row.key], plan, links, scratch, starts)
            row.extra[table.columns[0]] = f"{row.ops:,}"
        except Exception as exc:
            row.skipped = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        progress.advance(row.key)

    def run(row: Row, _round: int) -> float:
        with scratch.dir() as path:
            c = by_key[row.key]()
            c.open(path)
            c.seed(starts)
            seconds = timed(lambda: c.crawl(row.ops, links))
            c.close()
        return seconds

    alternate(table.rows, plan.rounds, run, progress)


def crawl_loop(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    classes = crawl_contenders()
    table = Table(
        "crawl",
        "Crawl loop: pop a page, report it done, push its 10 links (5 new, 5 seen), 200 hosts",
        "page",
        "scrapy-jobdir",
        columns=["pages a run"],
    )
    rows = {cls.key: _row(cls, ctx) for cls in classes}
    table.rows = list(rows.values())
    by_key = {cls.key: cls for cls in classes}
    links = Links(plan.max_pages)
    live = [r for r in table.rows if not r.skipped]
    probed = [r for r in live if not by_key[r.key].memory]
    progress.start("crawl loop", len(live) * (plan.rounds + 1) + len(probed))
    calibrated_rounds(table, by_key, plan, links, scratch, progress, start_urls())
    rng = random.Random()
    for row in probed:
        if row.skipped:
            continue
        with scratch.dir() as path:
            try:
                result = crash.probe(row.key, path, plan.kill_after, rng)
            except Exception as exc:
                result = {"phrase": "probe failed", "error": f"{type(exc).__name__}: {exc}"}
        ctx.probes[row.key] = result
        ctx.crash[row.key] = str(result["phrase"])
        row.crash = ctx.crash[row.key]
        progress.advance(f"crash probe {row.key}")
    table.notes += [
        f"{START:,} start URLs pushed before the timed loop; each contender builds its "
        "request objects (Scrapy `Request(url)`, crawlstore `Seed.get(url)`) from the URL "
        "strings inside it. Pages a run: calibrated per contender by a trial run to about "
        f"{plan.run_seconds:g} s, between {plan.min_pages:,} and {plan.max_pages:,}.",
        "Crash safety: one `kill -9` of a child process running the loop after a random "
        f"number ({plan.kill_after[0]}-{plan.kill_after[1]}) of acknowledged pages, then the "
        "state reopened in a new process (crawlstore: `reap()` requeues the dead process's "
        "leases; SQLite by hand and the floor: the startup code requeues leases). 'nothing': "
        "every acknowledged push is queued or was handed out, the seed in flight is queued "
        "again, no done page is queued again. Memory contenders are not killed: they lose all.",
        "Scrapy has no 'done' report (a page leaves the scheduler when it is taken); its "
        "JOBDIR state is written at `close()`, so a kill loses the queue. The SQLite, "
        "persist-queue, queuelib and diskcache rows queue URL strings: the string is their "
        "request object. queuelib's seen set is a Python set and is not persisted.",
    ]
    for key, result in ctx.probes.items():
        if "error" in result:
            table.notes.append(f"crash probe of {key}: {result['error']}")
    return [table]


# -- 2. push only, pop + report only --------------------------------------------------------------


def push_pop(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    classes = [c for c in crawl_contenders() if not c.loop_only]
    tables = []
    for what in ("push", "pop"):
        for grouped in (False, True):
            name = "push through dedup" if what == "push" else "pop + report done"
            t = Table(
                f"{what}-{'grouped' if grouped else 'each'}",
                f"{name}, {'1000 a commit' if grouped else 'a commit each'}",
                "op",
                "sqlite-normal" if grouped else "scrapy-jobdir",
            )
            for cls in classes:
                if grouped and (cls.memory or not cls.grouping):
                    continue
                row = _row(cls, ctx)
                row.note = ""
                if not grouped and cls.memory:
                    row.note = "no commits (one row)"
                elif not grouped and cls.key.startswith("scrapy"):
                    row.note = "no commits: JOBDIR state is written at close (one row)"
                elif not grouped and not cls.grouping:
                    row.note = "a commit per call, no grouping (one row)"
                row.ops = plan.ops if grouped or not cls.syncs else plan.sync_ops
                t.rows.append(row)
            tables.append(t)
    by_key = {cls.key: cls for cls in classes}
    progress.start("push / pop", sum(len(t.rows) for t in tables) * plan.rounds)
    for t in tables:
        what, grouping = t.workload.split("-")
        batch = GROUP if grouping == "grouped" else 1

        def run(row: Row, _round: int, what: str = what, batch: int = batch) -> float:
            with scratch.dir() as path:
                c = by_key[row.key]()
                c.open(path)
                urls = [url(START + i) for i in range(row.ops)]
                if what == "push":
                    seconds = timed(lambda: c.push(urls, batch))
                else:
                    c.seed(urls)
                    seconds = timed(lambda: c.pop_report(row.ops, batch))
                c.close()
            return seconds

        alternate(t.rows, plan.rounds, run, progress)
        t.notes.append(
            "push: new URLs through each contender's dedup, request objects built in the loop;"
            " pop + report: from a queue holding as many seeds (pushed untimed). crawlstore: "
            "host queues, `dedup_with(store.seen())`; the grouped pops are `pop_many` + "
            "`report_many` in one transaction."
        )
    return tables


# -- 3. seen sets --------------------------------------------------------------------------------


def _fps(n: int, salt: int) -> list[Fingerprint]:
    rng = random.Random(salt)
    return [Fingerprint(rng.randbytes(16)) for _ in range(n)]


@dataclass(frozen=True)
class _Seen:
    """One seen-set contender (``_seen_run`` runs it by its key)."""

    key: str
    label: str
    persisted: bool


def _rbloom(n: int) -> Any:
    import rbloom

    return rbloom.Bloom(n, 0.01, lambda fp: int.from_bytes(fp, "big", signed=True))


def seen_sets(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    specs = [
        _Seen("set", "Python set of 16-byte fingerprints", False),
        _Seen("store-seen", 'crawlstore store.seen() (exact, in the store, "safe")', True),
        _Seen("store-bloom", "crawlstore store.seen(bloom=(n, 0.01))", True),
        _Seen("inmem-seen", "crawlstore InMemSeen", False),
        _Seen("bloom-seen", "crawlstore BloomSeen(n, 0.01)", False),
        _Seen("rbloom", "rbloom.Bloom(n, 0.01), hash: the fingerprint's 128 bits", False),
    ]
    have_rbloom = True
    try:
        import rbloom  # noqa: F401
    except ImportError:
        have_rbloom = False
    cols = ["bytes/URL at rest", "compacted backup", "high-water", "false positives"]
    tables = []
    absent = _fps(100_000, 99)
    progress.start("seen sets", len(plan.seen_sizes) * (len(specs) * (plan.heavy_rounds + 1)))
    last_time: dict[str, tuple[int, float]] = {}
    for n in plan.seen_sizes:
        fps = _fps(n, n)
        t = Table(f"seen-{label(n)}", f"Seen sets, {label(n)} fingerprints: check + add",
                  "URL", "set", columns=cols)  # fmt: skip
        facts: dict[str, dict[str, str]] = {s.key: {} for s in specs}
        for s in specs:
            row = Row(s.key, s.label, ops=n)
            row.crash = "nothing (committed 1000 a txn)" if s.persisted else "all (memory only)"
            if s.key == "rbloom" and not have_rbloom:
                row.skipped = "skipped: rbloom not installed"
            prev = last_time.get(s.key)
            if prev and prev[1] / prev[0] * n > plan.budget:
                row.skipped = (f"not run at {label(n)}: about {prev[1] / prev[0] * n:.0f} s a "
                               f"run, over the budget of {plan.budget:.0f} s; ran at "
                               f"{label(prev[0])}")  # fmt: skip
            t.rows.append(row)

        def run(row: Row, rnd: int, n: int = n, fps: list[Fingerprint] = fps,
                facts: dict[str, dict[str, Any]] = facts) -> float:  # fmt: skip
            with scratch.dir() as path:
                return _seen_run(row.key, n, fps, absent, path, facts[row.key], rnd == 0)

        alternate(t.rows, plan.heavy_rounds, run, progress)
        for row in t.rows:
            if row.skipped:
                progress.advance()
                continue
            if not row.key.startswith("store"):
                facts[row.key]["bytes/URL at rest"] = _memory_bytes(row.key, fps) / n
            f = facts[row.key]
            row.extra = {
                "bytes/URL at rest": f"{f['bytes/URL at rest']:.1f}" if "bytes/URL at rest" in f
                else "",
                "compacted backup": f"{f['compacted']:.1f}" if "compacted" in f else "",
                "high-water": f"{f['high']:.1f}" if "high" in f else "",
                "false positives": f"{f['fp']:.2%}" if "fp" in f else "0 (exact)",
            }  # fmt: skip
            if not row.key.startswith("store"):
                row.extra["bytes/URL at rest"] += " (memory)"
            if row.per_op:
                last_time[row.key] = (n, statistics.median(row.times))
            progress.advance()
        t.notes += [
            f"Fingerprints: 16 random bytes (deterministic); store rows: {GROUP} inserts a "
            "transaction, a new store each run. Bytes per URL: store rows, the file's size "
            "after close (LMDB never shrinks it) and the size of `store.backup(path)` (compacted)"
            ", and the high-water mark (the largest file size while writing); memory rows, "
            "tracemalloc's count (rbloom: its bit array). False positives: measured on 1e5 "
            "absent fingerprints.",
        ]
        tables.append(t)
        del fps
        gc.collect()
    return tables


def _memory_bytes(key: str, fps: list[Fingerprint]) -> float:
    n = len(fps)
    if key == "rbloom":
        return float(_rbloom(n).size_in_bits / 8)
    if key == "bloom-seen":
        b = BloomSeen(n, 0.01)
        return float(b.nbytes)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    # A set keeps alive the fingerprint objects it holds (a crawler keeps no other copy):
    # count them, as fresh bytes made inside the traced section.
    if key == "set":
        s: Any = set()
        for fp in fps:
            s.add(bytes(fp))
    else:
        s = InMemSeen()
        for fp in fps:
            s.insert(Fingerprint(bytes(fp)))
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del s
    return float(used)


def _seen_run(key: str, n: int, fps: list[Fingerprint], absent: list[Fingerprint], path: str,
              facts: dict[str, Any], first: bool) -> float:  # fmt: skip
    if key in ("store-seen", "store-bloom"):
        file = os.path.join(path, "seen.lmdb")
        store = Store.open(file, durability=SAFE)
        seen = store.seen(bloom=(n, 0.01)) if key == "store-bloom" else store.seen()
        insert, transaction = seen.insert, store.transaction
        high = [0]

        def go() -> None:
            size = os.path.getsize
            for i in range(0, n, GROUP):
                with transaction():
                    for fp in fps[i : i + GROUP]:
                        insert(fp)
                high[0] = max(high[0], size(file))

        seconds = timed(go)
        if first:
            facts["high"] = high[0] / n
            if key == "store-bloom":
                facts["fp"] = sum(fp in seen for fp in absent) / len(absent)
            backup = os.path.join(path, "backup.lmdb")
            store.backup(backup)
            facts["compacted"] = os.path.getsize(backup) / n
        store.close()
        if first:
            facts["bytes/URL at rest"] = os.path.getsize(file) / n
        return seconds
    if key == "set":
        s: Any = set()

        def go() -> None:
            add = s.add
            for fp in fps:
                if fp not in s:
                    add(fp)

    elif key == "rbloom":
        s = _rbloom(n)

        def go() -> None:
            add = s.add
            for fp in fps:
                if fp not in s:
                    add(fp)

    else:
        s = InMemSeen() if key == "inmem-seen" else BloomSeen(n, 0.01)

        def go() -> None:
            insert = s.insert
            for fp in fps:
                insert(fp)

    seconds = timed(go)
    if first and key in ("rbloom", "bloom-seen"):
        facts["fp"] = sum(fp in s for fp in absent) / len(absent)
    return seconds


# -- 4. open time and first pop ------------------------------------------------------------------


def _fill_store(path: str, n: int) -> None:
    """A store of ``n`` seeds queued (host queues, through dedup), pushed fast."""
    with Store.open(path, durability=NOSYNC) as store:
        f = store.frontier("fifo", queues="host").dedup_with(store.seen())
        for start in range(0, n, 100_000):
            seeds = [Seed.get(url(i)) for i in range(start, min(n, start + 100_000))]
            with store.transaction():
                f.push_many(seeds)
        if len(f) != n:
            raise RuntimeError(f"filled {len(f)} seeds, expected {n}")


def _fill_sqlite(path: str, n: int) -> None:
    """The SQLite contender's file with ``n`` URLs queued (and seen), in one transaction."""
    f = SqliteFrontier(path, "NORMAL")
    with f.transaction():
        for start in range(0, n, 100_000):
            f.fill([(u, u) for u in map(url, range(start, min(n, start + 100_000)))])
    f.close()


def open_time(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    t = Table("open", "Open a store and pop its first seed, against the store's size", "open",
              f"sqlite-{label(plan.open_sizes[0])}")  # fmt: skip
    progress.start("open + first pop", len(plan.open_sizes) * (2 * plan.heavy_rounds + 2))
    for n in plan.open_sizes:
        with scratch.dir() as path:
            store_file = os.path.join(path, STORE_FILE)
            sqlite_file = os.path.join(path, DB_FILE)
            started = time.perf_counter()
            _fill_store(store_file, n)
            fill_seconds = time.perf_counter() - started
            progress.advance(f"filled {label(n)}")
            _fill_sqlite(sqlite_file, n)
            progress.advance()
            ours = Row(f"crawlstore-{label(n)}", f"crawlstore Store.open + frontier().pop(), "
                       f"{label(n)} seeds", ops=1, baseline=f"sqlite-{label(n)}")  # fmt: skip
            ours.note = (f"file {os.path.getsize(store_file) / 1e6:,.0f} MB; filled in "
                         f"{fill_seconds:.0f} s (untimed)")  # fmt: skip
            ours.crash = "nothing"
            theirs = Row(f"sqlite-{label(n)}", f"SQLite WAL frontier: connect + pop, {label(n)} "
                         "URLs", ops=1)  # fmt: skip
            theirs.note = f"file {os.path.getsize(sqlite_file) / 1e6:,.0f} MB"
            theirs.crash = "nothing"

            def run(row: Row, _round: int, store_file: str = store_file,
                    sqlite_file: str = sqlite_file) -> float:  # fmt: skip
                opened: list[Any] = []
                if row.key.startswith("crawlstore"):

                    def go() -> None:
                        s = Store.open(store_file)
                        opened.append(s)
                        s.frontier().pop()

                else:

                    def go() -> None:
                        f = SqliteFrontier(sqlite_file, "NORMAL")
                        opened.append(f)
                        f.pop()

                seconds = timed(go)
                while opened:
                    opened.pop().close()
                return seconds

            alternate([ours, theirs], plan.heavy_rounds, run, progress)
            t.rows += [ours, theirs]
    t.notes.append(
        "Built once per size (untimed: `push_many` of 100,000 seeds a transaction), closed, "
        "then timed: `Store.open(path)` + `frontier().pop()` (host queues, 200 hosts), warm "
        "page cache. Each crawlstore row's ratio is to SQLite at the same size; the baseline "
        "row is SQLite at the smallest size."
    )
    return [t]


# -- 5. scaling ----------------------------------------------------------------------------------


def scaling(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    from .contenders.crawlstore_ import GROUP_COMMIT_CONTENDERS

    classes: list[type[StoreSafe]] = [StoreSafe, StoreNosync, StoreByHand,
                                      *GROUP_COMMIT_CONTENDERS]  # type: ignore[list-item]  # fmt: skip
    small = plan.scale_sizes[0]
    t = Table("scaling", "Scaling: the crawl loop with the store holding more queued seeds",
              "page", f"{classes[0].key}@{label(small)}")  # fmt: skip
    progress.start("scaling", len(plan.scale_sizes) * (1 + len(classes) * plan.heavy_rounds))
    for n in plan.scale_sizes:
        with scratch.dir() as template_dir:
            template = os.path.join(template_dir, STORE_FILE)
            _fill_store(template, n)
            progress.advance(f"filled {label(n)}")
            links = Links(max(plan.scale_pages, *(c.trial_pages for c in classes)), start=n)
            rows = []
            by_key = {}
            for cls in classes:
                row = Row(f"{cls.key}@{label(n)}", f"{cls.label}, {label(n)} queued",
                          ops=max(cls.trial_pages,
                                  plan.scale_sync_pages if cls.syncs else plan.scale_pages),
                          baseline=f"{cls.key}@{label(small)}")  # fmt: skip
                row.crash = ctx.crash.get(cls.key, "")
                by_key[row.key] = cls
                rows.append(row)

            def run(row: Row, _round: int, template: str = template, links: Links = links,
                    by_key: dict[str, type[StoreSafe]] = by_key) -> float:  # fmt: skip
                with scratch.dir() as path:
                    shutil.copyfile(template, os.path.join(path, STORE_FILE))
                    os.sync()  # the copy's writeback must not land in the run's fsyncs
                    c = by_key[row.key]()
                    c.open(path)
                    seconds = timed(lambda: c.crawl(row.ops, links))
                    c.close()
                return seconds

            alternate(rows, plan.heavy_rounds, run, progress)
            t.rows += rows
    t.notes.append(
        "The store is filled once per size (untimed, through dedup, host queues) and copied "
        "into a fresh directory for each run (then `sync`, untimed); the links continue the "
        "URL numbering after the queued seeds (half new, half seen). Ratio: to the same "
        f"contender at {label(small)} queued."
    )
    return [t]


# -- 6. validators -------------------------------------------------------------------------------


class _SqliteValidators:
    def __init__(self, path: str, synchronous: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, cached_statements=32)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("CREATE TABLE IF NOT EXISTS validators (fp BLOB PRIMARY KEY, etag TEXT, "
                        "last_modified TEXT, at REAL) WITHOUT ROWID")  # fmt: skip

    def page(self, fp: bytes, v: Validator) -> None:
        execute = self.db.execute
        execute("BEGIN IMMEDIATE")
        execute("SELECT etag, last_modified FROM validators WHERE fp = ?", (fp,)).fetchone()
        execute("INSERT OR REPLACE INTO validators VALUES (?, ?, ?, ?)",
                (fp, v.etag, v.last_modified, time.time()))  # fmt: skip
        execute("COMMIT")

    def close(self) -> None:
        self.db.close()


def validators(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    rows = [
        Row("sqlite-normal", "SQLite WAL table, synchronous=NORMAL, a transaction a page",
            ops=plan.validator_pages),
        Row("sqlite-full", "SQLite WAL table, synchronous=FULL, a transaction a page",
            ops=plan.validator_sync_pages),
        Row("inmem", "crawlstore InMemValidators", ops=plan.validator_pages),
        Row("store-safe", f'crawlstore store.validators(), "{SAFE}", a transaction a page',
            ops=plan.validator_sync_pages),
        Row("store-nosync", f'crawlstore store.validators(), "{NOSYNC}", a transaction a page',
            ops=plan.validator_pages),
        Row("store-grouped", f'crawlstore store.validators(), "{SAFE}", {GROUP} pages a '
            "transaction", ops=plan.validator_pages),
    ]  # fmt: skip
    for r in rows:
        r.crash = "all (memory only)" if r.key == "inmem" else "nothing"
    t = Table("validators", "Validators: a lookup and a record per page", "page",
              "sqlite-normal", rows=rows)  # fmt: skip
    fps = [Seed.get(url(i)).fingerprint for i in range(plan.validator_pages)]
    v = Validator('"a-fairly-typical-etag-value"', "Mon, 01 Jan 2024 00:00:00 GMT")
    progress.start("validators", len(rows) * plan.rounds)

    def run(row: Row, _round: int) -> float:
        page_fps = fps[: row.ops]
        with scratch.dir() as path:
            if row.key.startswith("sqlite"):
                s = _SqliteValidators(os.path.join(path, "v.sqlite"), row.key[7:].upper())

                def go() -> None:
                    for fp in page_fps:
                        s.page(fp, v)

                closer: Callable[[], None] = s.close
            elif row.key == "inmem":
                m = InMemValidators()

                def go() -> None:
                    get, put = m.get, m.put
                    for fp in page_fps:
                        get(fp)
                        put(fp, v)

                def closer() -> None:
                    pass

            else:
                mode = NOSYNC if row.key == "store-nosync" else SAFE
                store = Store.open(os.path.join(path, STORE_FILE), durability=mode)
                sv, transaction = store.validators(), store.transaction
                step = GROUP if row.key == "store-grouped" else 1

                def go() -> None:
                    get, put = sv.get, sv.put
                    for i in range(0, len(page_fps), step):
                        with transaction():
                            for fp in page_fps[i : i + step]:
                                get(fp)
                                put(fp, v)

                closer = store.close
            seconds = timed(go)
            closer()
        return seconds

    alternate(rows, plan.rounds, run, progress)
    t.notes.append("Each page: look up its fingerprint's validators (absent), then record an "
                   "ETag and a Last-Modified.")  # fmt: skip
    return [t]


# -- 7. seeds: a request object and its fingerprint, from a URL string ---------------------------


def seeds(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    n = plan.ops * 2
    rng = random.Random(7)
    params = ["page=2", "sort=asc", "utm_source=feed", "q=red+lamp", "ref=home"]
    urls = [f"https://www.site{i % 50}.example/path/to/item-{i}"
            + (f"?{'&'.join(rng.sample(params, k))}" if (k := i % 3) else "")
            for i in range(n)]  # fmt: skip
    rows = [Row("scrapy", "Scrapy Request(url) + its default request fingerprint", ops=n),
            Row("w3lib", "w3lib canonicalize_url + SHA-1 (Scrapy's dupefilter's form)", ops=n),
            Row("seed-get", "crawlstore Seed.get(url) (parses, checks, canonical fingerprint)",
                ops=n),
            Row("fingerprint", "crawlstore fingerprint('GET', url)", ops=n)]  # fmt: skip
    try:
        from scrapy import Request
        from scrapy.utils.request import RequestFingerprinter
        from w3lib.url import canonicalize_url

        fingerprinter = RequestFingerprinter()
    except ImportError as exc:
        for r in rows[:2]:
            r.skipped = f"not installed ({exc.name})"
    t = Table("seeds", "Seeds: a request object and its fingerprint, from a URL", "URL",
              "scrapy", rows=rows)  # fmt: skip
    progress.start("seeds", len(rows) * plan.rounds)

    def run(row: Row, _round: int) -> float:
        import hashlib

        from crawlstore import fingerprint

        if row.key == "scrapy":
            return timed(lambda: [fingerprinter.fingerprint(Request(u)) for u in urls])
        if row.key == "w3lib":
            return timed(lambda: [hashlib.sha1(b"GET" + canonicalize_url(u).encode()).digest()
                                  for u in urls])  # fmt: skip
        if row.key == "seed-get":
            return timed(lambda: [Seed.get(u) for u in urls])
        return timed(lambda: [fingerprint("GET", u) for u in urls])

    alternate([r for r in rows if not r.skipped], plan.rounds, run, progress)
    t.notes.append(
        "URLs: 50 hosts, a third with no query, the others with one or two parameters (one of "
        "them sometimes a tracking one). w3lib's canonical form keeps tracking parameters and "
        "default ports; crawlstore's drops them, and its fingerprint is a 128-bit mmh3 of the "
        "canonical request, Scrapy's a SHA-1."
    )
    return [t]


# -- 8. Scrapy's schedulers: driven directly, killed and resumed, in a whole crawl --------------


def scrapy_(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    from . import scrapy_crawls, scrapy_direct

    resume = scrapy_crawls.kill_and_resume(plan, scratch, progress)  # first: the crash column
    crash = {row.key: row.crash for row in resume.rows if row.crash}
    return [scrapy_direct.direct_table(plan, scratch, progress, crash), resume,
            scrapy_crawls.real_crawl(plan, scratch, progress, crash)]  # fmt: skip


def urlfrontier_(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    from .urlfrontier import urlfrontier

    return urlfrontier(plan, scratch, progress)


def redis_(plan: Plan, scratch: Scratch, progress: Progress, ctx: Context) -> list[Table]:
    from .redis import redis_tables

    return redis_tables(plan, progress)


WORKLOADS: dict[str, Callable[[Plan, Scratch, Progress, Context], list[Table]]] = {
    "crawl": crawl_loop,
    "calls": calls,
    "push-pop": push_pop,
    "seen": seen_sets,
    "open": open_time,
    "scaling": scaling,
    "seeds": seeds,
    "validators": validators,
    "scrapy": scrapy_,
    "urlfrontier": urlfrontier_,
    "redis": redis_,
}
