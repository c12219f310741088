"""The demo's summary: the store's counters (what ``crawlstore stats`` shows), each split into
its parts (``total = part + part``), from the store's URLs and the crawls' page lines."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..frontier.protocol import Stats, URLStatus
from ..store import Store
from .runs import COMMITTED, Crawl, Page
from .state import PENDING, visited

__all__ = ["Visits", "commands", "equation", "revisits_by_status", "summary"]

_STATUSES = {304: "unchanged (304)", 200: "sent in full (200)", 301: "redirects (301)"}


def equation(label: str, total: int, parts: Iterable[tuple[int, str]]) -> str:
    """``label  total = n what + n what``, leaving out the parts that are 0."""
    shown = [f"{n:,} {what}" for n, what in parts if n]
    return f"{label:<15}{total:>6,}" + (f" = {' + '.join(shown)}" if shown else "")


def revisits_by_status(pages: Iterable[Page]) -> list[tuple[int, str]]:
    """How many of ``pages`` answered each status, in the order unchanged, in full, redirect."""
    counts = Counter(page["status"] for page in pages)
    order = [*_STATUSES, *sorted(set(counts) - set(_STATUSES))]
    return [(counts[s], _STATUSES.get(s, f"answered {s}")) for s in order]


@dataclass(frozen=True, slots=True)
class Visits:
    """The crawls' visits: ``before`` each crawl, the URLs the store had visited; a visit of
    a URL visited already is a revisit."""

    crawls: list[Crawl]
    before: list[set[str]]

    def revisits(self) -> list[Page]:
        """The page lines of the revisits."""
        found = []
        for crawl, before in zip(self.crawls, self.before, strict=True):
            seen = set(before)
            for page in crawl.pages:
                if page.get("outcome") in COMMITTED:
                    if page["url"] in seen:
                        found.append(page)
                    seen.add(page["url"])
        return found


def summary(path: Path, found: list[URLStatus], expected: set[str], visits: Visits) -> list[str]:
    """The summary's lines: each counter of the store, and what it is made of."""
    with Store.open(path, readonly=True) as store:
        stats = store.frontier().stats()
    done = visited(found)
    skipped = Counter(s.outcome.reason or "" for s in found if s.state == "skipped" and s.outcome)
    failed = sum(1 for s in found if s.state == "failed")
    waiting = sum(1 for s in found if s.url not in done and s.state in PENDING)
    calendar = sum(1 for url in done if "/calendar/" in url)
    site = len(done & expected)
    revisits = visits.revisits()
    retries = Counter(f"answered {p['status']}" if "status" in p else str(p.get("error"))
                      for c in visits.crawls for p in c.pages
                      if p.get("outcome") == "retry")  # fmt: skip
    refused = sorted(stats.refused.items())
    return [
        equation("URLs admitted", stats.admitted, [(len(done), "visited"),
                 (sum(skipped.values()), "skipped"), (failed, "failed"),
                 (waiting, "not visited yet")]),
        equation("skipped", sum(skipped.values()),
                 [(n, _skipped(r)) for r, n in sorted(skipped.items())]),
        equation("visited", len(done), [(site, "pages of the site"), (calendar, "calendar pages"),
                 (len(done) - site - calendar, "others")]),
        equation("", len(done), [(len(visits.before[1]), "before the kill"),
                 (len(done) - len(visits.before[1]), "after it")]),
        equation("done", stats.done, [(len(done), "first visits"), (len(revisits), "revisits")]),
        equation("revisits", len(revisits), revisits_by_status(revisits)),
        equation("retried", stats.retried, [(n, why) for why, n in sorted(retries.items())]),
        equation("links refused", sum(n for _, n in refused), [(n, r) for r, n in refused]),
        equation("left", _left(stats), [(stats.scheduled, "scheduled (revisits)"),
                 (stats.queued, "queued"), (stats.in_flight, "in flight")]),
    ]  # fmt: skip


def _skipped(reason: str) -> str:
    return {"robots.txt": "by robots.txt", "trap": "past the trap budget"}.get(reason, reason)


def _left(stats: Stats) -> int:
    return stats.queued + stats.in_flight + stats.scheduled


def commands(path: Path) -> list[str]:
    """The commands that show the store."""
    quoted = shlex.quote(str(path))
    return [f"crawlstore stats {quoted}", f"crawlstore urls {quoted} --status skipped",
            f"crawlstore peek {quoted} -n 5"]  # fmt: skip
