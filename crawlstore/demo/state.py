"""What the demo reads from the store between and during its crawls (read-only, while a crawl
writes): every URL of the crawl with its state and last outcome."""

from __future__ import annotations

import time
from pathlib import Path

from ..frontier.protocol import URLStatus
from ..store import Store

__all__ = ["PENDING", "first_pass_over", "revisits_due", "statuses", "visited"]

#: The states of a URL that is still to be crawled (again).
PENDING = ("queued", "in_flight", "scheduled")


def statuses(path: Path) -> list[URLStatus]:
    """Every URL of the store's crawl."""
    with Store.open(path, readonly=True) as store:
        frontier = store.frontier()
        found: list[URLStatus] = []
        while page := frontier.urls(after=found[-1].fingerprint if found else None, limit=1000):
            found += page
    return found


def _visited(status: URLStatus) -> bool:
    return status.outcome is not None and status.outcome.state == "done"


def visited(found: list[URLStatus]) -> set[str]:
    """The URLs visited at least once."""
    return {status.url for status in found if _visited(status)}


def first_pass_over(found: list[URLStatus]) -> bool:
    """Whether every URL was visited, skipped or failed: what is left is revisits."""
    return not any(s.state in PENDING and not _visited(s) for s in found)


def revisits_due(found: list[URLStatus]) -> dict[str, float]:
    """The revisits to come, by URL, with when each is due: the visited URLs scheduled again,
    and those queued again (due already)."""
    now = time.time()
    return {s.url: s.at if s.state == "scheduled" and s.at is not None else now
            for s in found if s.state in PENDING and _visited(s)}  # fmt: skip
