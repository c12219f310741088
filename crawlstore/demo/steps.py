"""The demo's steps, each a crawl stopped when the step is over: killed part way, resumed until
the first pass is over, one round of revisits. Each shows its progress and its result."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import NoReturn

from .checks import round_visits
from .progress import Progress
from .runs import COMMITTED, Crawl, Page, run_crawl, when
from .state import first_pass_over, statuses
from .summary import equation, revisits_by_status

__all__ = ["StartOver", "kill_part_way", "resume", "revisit_round", "say", "start_over"]


class StartOver(Exception):
    """A pass over the site takes too long here for the revisit interval: start over with
    ``interval``."""

    def __init__(self, interval: float) -> None:
        super().__init__(interval)
        self.interval = interval


def start_over(one_pass: str, longer: float, revisit: float) -> NoReturn:
    """A pass over the site takes ``one_pass`` here, too long for revisits every ``revisit``
    seconds (they would hold the pass back): start over with revisits every ``longer``."""
    interval = float(math.ceil(longer))
    say(f"   a pass over the site takes {one_pass} here, too long for revisits every "
        f"{revisit:g}s: starting over with revisits every {interval:g}s\n")  # fmt: skip
    raise StartOver(interval)


def kill_part_way(args: list[str], log: Path, at: int, within: float) -> tuple[Crawl, float]:
    """The first crawl, killed with SIGKILL once ``at`` pages are committed or ``within``
    seconds after its first page (before a revisit can fall due); with the seconds it took a
    page, the pace of this machine."""
    say(f"1. crawl, killed with SIGKILL once {at} pages are committed (or {within:g}s after its "
        "first page)")  # fmt: skip
    progress = Progress(at, "pages committed")
    committed, times = 0, []

    def step(page: Page) -> bool:
        nonlocal committed
        times.append(when(page))
        committed += page.get("outcome") in COMMITTED
        progress.update(committed)
        return committed >= at or times[-1] - times[0] >= within

    try:
        first = run_crawl(args, log, step, kill=True)
    finally:
        progress.close()
    return first, (times[-1] - times[0]) / max(committed - 1, 1)


def resume(
    args: list[str], log: Path, path: Path, expected: set[str], before: tuple[set[str], float],
    revisit: float,
) -> Crawl:  # fmt: skip
    """The same crawl again (it resumes), stopped once every page of the site (``expected``)
    is visited and what is left is revisits. ``before``: the URLs visited before it, and when
    the first crawl began; more revisits than the site has pages mean the interval is too
    short for a pass: the demo starts over."""
    say("2. the same command again: it resumes; stopped once the first pass is over (what is "
        "left is revisits)")  # fmt: skip
    done, began = before
    missing, seen, revisits = expected - done, set(done), 0
    progress = Progress(len(expected), "pages of the site", done=len(expected) - len(missing))

    def step(page: Page) -> bool:
        nonlocal revisits
        if page.get("outcome") in COMMITTED:
            missing.discard(page["url"])
            revisits += page["url"] in seen
            seen.add(page["url"])
        if revisits > len(expected):
            progress.close()
            so_far = when(page) - began
            start_over(f"more than {so_far:.0f}s", max(2 * so_far, 2 * revisit), revisit)
        progress.update(len(expected) - len(missing))
        return not missing and first_pass_over(statuses(path))

    try:
        return run_crawl(args, log, step, kill=False)
    finally:
        progress.close()


def revisit_round(args: list[str], log: Path, due: dict[str, float], changed: int) -> Crawl:
    """Once the first of the revisits ``due`` falls due, the crawl again, stopped once each of
    them is visited: one round."""
    wait = max(0.0, min(due.values(), default=0.0) - time.time())
    say(f"3. changed {changed} pages; {len(due)} revisits to come, the first due in "
        f"{wait:.1f}s: one round of them, then a stop")  # fmt: skip
    time.sleep(wait)
    pending = set(due)
    progress = Progress(len(due), "revisits")

    def step(page: Page) -> bool:
        if page.get("outcome") in COMMITTED:
            pending.discard(page["url"])
        progress.update(len(due) - len(pending))
        return not pending

    try:
        third = run_crawl(args, log, step, kill=False)
    finally:
        progress.close()
    visits = round_visits(third.pages, due).values()
    say(f"   the round took {third.seconds:.1f}s: "
        + equation("", len(visits), revisits_by_status(visits)).lstrip() + "\n")  # fmt: skip
    return third


def say(line: str) -> None:
    print(line, flush=True)
