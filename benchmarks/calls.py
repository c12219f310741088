"""The ``calls`` workload: Python calls a page of the crawl loop, per contender. Every function
call (Python and C, as ``cProfile`` counts them) in every thread of the loop, the seeding
excluded, divided by the pages: what a page costs the interpreter, whatever the machine's
speed. Counts, not times: one run each."""

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


def calls_a_page(cls: type[Contender], pages: int, path: str) -> float:
    """Function calls a page of ``cls``'s crawl loop, in every thread it runs."""
    links = Links(pages)
    contender = cls()
    contender.open(path)
    contender.seed(start_urls())
    counter = itertools.count()
    tick = counter.__next__

    def count(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":
            tick()

    threading.setprofile(count)  # type: ignore[arg-type]
    sys.setprofile(count)  # type: ignore[arg-type]
    try:
        contender.crawl(pages, links)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    contender.close()
    return next(counter) / pages


def calls(plan: Plan, scratch: Scratch, progress: Progress, _ctx: Any) -> list[Table]:
    pages = 2_000 if plan.mode != "smoke" else 200
    table = Table("calls", "Python calls a page of the crawl loop (cProfile's count: Python "
                  "and C functions, every thread)", "page", "", columns=[COLUMN],
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
                row.extra[COLUMN] = f"{calls_a_page(cls, pages, path):,.0f}"
        table.rows.append(row)
        progress.advance(key)
    table.notes.append(
        f"{pages:,} pages after the crawl loop's 1,000 start URLs; each row as in the crawl "
        "loop's table. Counted with a profile function in every thread (`sys.setprofile`, "
        "`threading.setprofile`), so the writer thread of the group-commit rows counts too."
    )
    return [table]
