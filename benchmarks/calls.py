"""The ``calls`` workload: Python calls a page of the crawl loop, per contender. Every function
call (Python and C, as ``cProfile`` counts them) in every thread of the loop, the seeding
excluded, divided by the pages: what a page costs the interpreter, whatever the machine's
speed. Beside it, what a page costs the disk: the bytes the process wrote to storage in the
same loop (Linux's ``/proc/self/io``), in 4 KiB pages. Counts, not times: one run each."""

from __future__ import annotations

import itertools
import sys
import threading
from types import FrameType
from typing import Any

from .contenders import Contender, by_key
from .links import Links, start_urls
from .suite import Plan, Progress, Row, Scratch, Table

#: The rows: crawlstore's ways to run the loop, and what they are measured against.
KEYS = [
    "crawlstore-by-hand",
    "crawlstore-worker-async",
    "crawlstore-worker-threads",
    "crawlstore-safe",
    "crawlstore-memory",
    "sqlite-hosts-normal",
    "lmdb-floor-64",
    "scrapy-memory",
]
COLUMN = "calls a page"
WRITTEN = "4 KiB written a page"


def _written() -> int | None:
    """Bytes this process (every thread) caused to be written to storage so far; None where
    the system does not say (not Linux)."""
    try:
        with open("/proc/self/io", encoding="ascii") as io:
            fields = dict(line.split(": ", 1) for line in io.read().splitlines())
        return int(fields["write_bytes"])
    except (OSError, KeyError, ValueError):
        return None


def calls_a_page(cls: type[Contender], pages: int, path: str) -> tuple[float, float | None]:
    """Function calls a page of ``cls``'s crawl loop, in every thread it runs, and 4 KiB
    pages written to storage a page (None where the system does not count them)."""
    links = Links(pages)
    contender = cls()
    contender.open(path)
    contender.seed(start_urls())
    counter = itertools.count()
    tick = counter.__next__

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            tick()

    before = _written()
    threading.setprofile(count)  # type: ignore[arg-type]
    sys.setprofile(count)  # type: ignore[arg-type]
    try:
        contender.crawl(pages, links)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    after = _written()
    contender.close()
    written = (after - before) / 4096 / pages if before is not None and after is not None else None
    return next(counter) / pages, written


def calls(plan: Plan, scratch: Scratch, progress: Progress, _ctx: Any) -> list[Table]:
    pages = 2_000 if plan.mode != "smoke" else 200
    table = Table("calls", "Python calls a page of the crawl loop (cProfile's count: Python "
                  "and C functions, every thread), and what it writes", "page", "",
                  columns=[COLUMN, WRITTEN],
                  timed=False)  # fmt: skip
    progress.start("calls a page", len(KEYS))
    for key in KEYS:
        cls = by_key(key)
        row = Row(key, cls.label, ops=pages)
        missing = cls.missing()
        if missing:
            row.skipped = f"skipped: {', '.join(missing)} not installed"
        else:
            with scratch.dir() as path:
                counted, written = calls_a_page(cls, pages, path)
            row.extra[COLUMN] = f"{counted:,.0f}"
            row.extra[WRITTEN] = "n/a" if written is None else f"{written:.1f}"
        table.rows.append(row)
        progress.advance(key)
    table.notes += [
        f"{pages:,} pages after the crawl loop's 1,000 start URLs; each row as in the crawl "
        "loop's table. Counted with a profile function in every thread (`sys.setprofile`, "
        "`threading.setprofile`), so the writer thread of the group-commit rows counts too.",
        "4 KiB written a page: the bytes the process sent to storage during the loop "
        "(`write_bytes` of Linux's `/proc/self/io`, every thread; the seeding excluded), "
        "over the pages, in 4 KiB pages. Memory contenders write nothing.",
    ]
    return [table]
