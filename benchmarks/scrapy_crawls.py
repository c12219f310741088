"""The ``scrapy`` workload's real crawls: ``python -m benchmarks.scrapy_spider`` crawls a demo
site (``crawlstore.demo.site.DemoSite``, served on loopback addresses by this process) in a
process of its own, with each contender's scheduler settings:

- a whole crawl, timed by Scrapy itself (``elapsed_time_seconds``: from the spider opened to
  the spider closed, the scheduler's ``close`` included, the interpreter's start not);
- a crawl SIGKILLed once the site answered a third of its pages (by the site's handler, as
  it logs that page), then the same crawl run again to its end: the pages never fetched
  across both runs are lost, the pages fetched in both were fetched twice.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from crawlstore.demo.site import DemoSite

from .contenders.scrapy_ import JOBDIR
from .crash import ROOT, child_env
from .scrapy_direct import DirectCrawlstore, DirectJobdir, DirectJobdirSqlite
from .suite import Plan, Progress, Row, Scratch, Table, alternate

TIMEOUT = 300.0  # seconds a crawl may take
HOSTS = 4
SLOW = 0.01  # seconds the site's /slow page takes


class Setup:
    """A contender: the settings of its crawls, on a directory kept across a kill."""

    key = ""
    label = ""
    settings: dict[str, Any] = {}  # noqa: RUF012
    modules: tuple[str, ...] = ("scrapy",)

    def missing(self) -> str:
        gone = [m for m in self.modules if importlib.util.find_spec(m) is None]
        return f"skipped: {', '.join(gone)} not installed" if gone else ""

    @contextlib.contextmanager
    def crawl_settings(self, path: str) -> Iterator[dict[str, Any]]:
        yield {**self.settings, "JOBDIR": os.path.join(path, JOBDIR)}


class Jobdir(Setup):
    key = DirectJobdir.key
    label = DirectJobdir.label
    settings = {"SCHEDULER": "scrapy.core.scheduler.Scheduler"}  # noqa: RUF012


class JobdirSqlite(Setup):
    key = DirectJobdirSqlite.key
    label = DirectJobdirSqlite.label
    settings = {**Jobdir.settings, **DirectJobdirSqlite.settings}  # noqa: RUF012

    def missing(self) -> str:
        gone = ", ".join(DirectJobdirSqlite.missing())
        return f"skipped: {gone} not installed" if gone else ""


class Redis(Setup):
    """scrapy-redis with its queue kept (``SCHEDULER_PERSIST``), on a ``redis-server`` of its
    own for each crawl (or killed crawl and its resumption), which no kill touches."""

    key = "scrapy-redis"
    label = "scrapy-redis scheduler + RFPDupeFilter, SCHEDULER_PERSIST, a local redis-server"
    settings = {"SCHEDULER": "scrapy_redis.scheduler.Scheduler",  # noqa: RUF012
                "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
                "SCHEDULER_PERSIST": True}  # fmt: skip
    modules = ("scrapy", "scrapy_redis")

    def missing(self) -> str:
        if shutil.which("redis-server") is None or super().missing():
            return "not run: no Redis (needs a redis-server binary and scrapy_redis)"
        return ""

    @contextlib.contextmanager
    def crawl_settings(self, path: str) -> Iterator[dict[str, Any]]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", path],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 10
            while True:  # an external server: wait until it accepts connections
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("redis-server did not start") from None
                    time.sleep(0.05)
            yield {**self.settings, "REDIS_URL": f"redis://127.0.0.1:{port}"}
        finally:
            server.terminate()
            server.wait()


class Crawlstore(Setup):
    key = DirectCrawlstore.key
    label = 'crawlstore.scrapy.Scheduler, durability "safe" (store in JOBDIR)'
    settings = DirectCrawlstore.settings


SETUPS: list[Setup] = [Jobdir(), JobdirSqlite(), Redis(), Crawlstore()]
COUNTS = ["pages", "fetched before the kill", "fetched by the resumed run",
          "lost (never fetched)", "fetched twice", "resumed run"]  # fmt: skip


# -- a crawl -------------------------------------------------------------------------------------


@dataclass
class Run:
    returncode: int
    stats: dict[str, Any]  # Scrapy's, once the crawl ended by itself; {} when killed
    log: str  # its stderr
    answered: Counter[str]  # pages the site answered (200)

    def outcome(self) -> str:
        """How a run that was not killed ended."""
        if self.returncode != 0 or not self.stats:
            last = self.log.strip().splitlines()[-1:] or ["no output"]
            return f"crashed (exit {self.returncode}): {last[0][:160]}"
        said = f"finished ({self.stats.get('finish_reason')})"
        errors = int(self.stats.get("log_count/ERROR", 0))
        if not errors:
            return said
        first = next((line for line in self.log.splitlines() if _EXCEPTION.match(line)), "?")
        return f"{said}, {errors} errors logged (the first: {first[:120]})"


_EXCEPTION = re.compile(r"^[\w.]*(error|exception)\w*: ", re.IGNORECASE)  # a traceback's end


class _Tripwire(list[tuple[float, str, str, int]]):
    """The site's log, calling ``kill`` (once) as it logs the ``at``-th page answered."""

    def __init__(self, entries: list[Any], pages: dict[str, Any], at: int,
                 kill: Callable[[], None]) -> None:  # fmt: skip
        super().__init__(entries)
        self.pages, self.left, self.kill = pages, at, kill

    def append(self, entry: tuple[float, str, str, int]) -> None:
        super().append(entry)
        if entry[2] in self.pages and entry[3] == 200:
            self.left -= 1
            if self.left == 0:
                self.kill()


def crawl(site: DemoSite, settings: dict[str, Any], path: str, name: str,
          kill_after: int | None = None) -> Run:  # fmt: skip
    """One crawl of ``site`` from its first page, in a new process; SIGKILLed once the site
    answered ``kill_after`` pages, when given."""
    items, result, log = (os.path.join(path, f"{name}.{ext}") for ext in ("jsonl", "json", "log"))
    start = site.url(site.page_path(0))
    argv = [sys.executable, "-m", "benchmarks.scrapy_spider", start, items, result,
            json.dumps(settings)]  # fmt: skip
    before = len(site.log)
    with open(log, "w") as err:
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT,
                                 env=child_env())  # fmt: skip
    if kill_after is not None:  # installed before the child's first request (its start: 0.3 s)
        with site.lock:
            site.log = _Tripwire(site.log, site.pages, kill_after, child.kill)
    try:
        child.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
        raise RuntimeError(f"a crawl took more than {TIMEOUT:.0f} s") from None
    with site.lock:
        entries = site.log[before:]
    stats: dict[str, Any] = {}
    if os.path.exists(result):
        with open(result) as f:
            stats = json.load(f)
    with open(log) as f:
        text = f.read()
    answered = Counter(p for _, _, p, status in entries if p in site.pages and status == 200)
    return Run(child.returncode, stats, text, answered)


def _site(pages: int) -> DemoSite:
    return DemoSite(pages=pages, hosts=HOSTS, seed=7, slow=SLOW)


# -- kill and resume -----------------------------------------------------------------------------


def _kill_and_resume(setup: Setup, pages: int, scratch: Scratch, row: Row) -> None:
    with _site(pages) as site, scratch.dir() as path, setup.crawl_settings(path) as settings:
        total = len(site.pages)
        first = crawl(site, settings, path, "killed", kill_after=total // 3)
        if first.returncode != -9:
            row.skipped = f"not killed: {first.outcome()}"
            return
        second = crawl(site, settings, path, "resumed")
    answered = first.answered + second.answered
    lost = sum(1 for p in site.pages if not answered[p])
    twice = sum(1 for n in answered.values() if n > 1)
    row.extra = {
        "pages": f"{total:,}",
        "fetched before the kill": f"{sum(first.answered.values()):,}",
        "fetched by the resumed run": f"{sum(second.answered.values()):,}",
        "lost (never fetched)": f"{lost:,}",
        "fetched twice": f"{twice:,}",
        "resumed run": second.outcome(),
    }
    loses = f"{lost:,} of {total:,} pages never fetched" if lost else "no page"
    row.crash = loses + (f"; {twice:,} fetched twice" if twice else "")


def kill_and_resume(plan: Plan, scratch: Scratch, progress: Progress) -> Table:
    table = Table(
        "scrapy-resume",
        f"Scrapy crawls of a {plan.scrapy_pages}-page site SIGKILLed after a third of its "
        "pages, then run again to the end",
        "page",
        "",
        columns=COUNTS,
        timed=False,
    )
    table.rows = [Row(s.key, s.label, skipped=s.missing()) for s in SETUPS]
    progress.start("scrapy: kill and resume", len(SETUPS))
    for setup, row in zip(SETUPS, table.rows, strict=True):
        if not row.skipped:
            try:
                _kill_and_resume(setup, plan.scrapy_pages, scratch, row)
            except Exception as exc:
                row.skipped = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        progress.advance(row.key)
    table.notes += [
        f"The site: {plan.scrapy_pages} pages and 3 special ones (a 503 then 200, a 429 then "
        f"200, a slow one) on {HOSTS} loopback hosts, 301 redirects among them; the spider "
        "follows every link. The site's handler SIGKILLs the crawler as it answers the "
        "third of its pages; the crawl then runs again on the same JOBDIR (scrapy-redis: the "
        "same Redis) to its end. One kill each: another kill point can give other counts.",
        "Lost: pages of the site answered in neither run. Fetched twice: pages answered in "
        "both (the resumed run fetches the start URL again when the scheduler does not know "
        "it, and the pages in flight at the kill when the scheduler gives them back).",
    ]
    return table


# -- a whole crawl -------------------------------------------------------------------------------


def real_crawl(plan: Plan, scratch: Scratch, progress: Progress, crash: dict[str, str]) -> Table:
    table = Table(
        "scrapy-crawl",
        f"A whole Scrapy crawl of a {plan.scrapy_pages}-page site on loopback, by scheduler",
        "page",
        Jobdir.key,
    )
    for setup in SETUPS:
        row = Row(setup.key, setup.label, skipped=setup.missing(), crash=crash.get(setup.key, ""))
        table.rows.append(row)
    by_key = {s.key: s for s in SETUPS}
    progress.start("scrapy: whole crawls", plan.scrapy_rounds * len(SETUPS))

    def run(row: Row, rnd: int) -> float:
        with (_site(plan.scrapy_pages) as site, scratch.dir() as path,
              by_key[row.key].crawl_settings(path) as settings):  # fmt: skip
            done = crawl(site, settings, path, "crawl")
        if done.returncode != 0 or not done.stats:
            raise RuntimeError(done.outcome())
        if set(done.answered) != set(site.pages):
            raise RuntimeError(f"incomplete: {len(done.answered)} of {len(site.pages)} pages")
        row.ops = len(site.pages)
        return float(done.stats["elapsed_time_seconds"])

    alternate(table.rows, plan.scrapy_rounds, run, progress)
    table.notes += [
        "Each run: a new site, a new JOBDIR, a new process; timed by Scrapy's own "
        "`elapsed_time_seconds` (the spider opened to closed, the scheduler's close "
        "included). Every run must fetch every page of the site. CONCURRENT_REQUESTS 16, "
        "no delay, an item pipeline writing JSON lines.",
        "Scrapy's engine caps every scheduler: the download loop, the parsing and the item "
        "pipeline cost far more than a scheduler's push and pop, so ratios here stay near 1 "
        "unless a scheduler blocks the reactor (a commit a request, say). The crash column "
        "is the kill-and-resume table's.",
    ]
    return table
