"""The demo's checks: what the store and the site's request log say, not what the crawler
printed about itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..frontier.protocol import URLStatus
from ..store import Store
from .runs import COMMITTED, Page, when
from .site import DemoSite

__all__ = ["Check", "check_crawl", "check_revisit", "round_visits"]

#: Seconds a page line's time may read early: it is to the millisecond.
SLACK = 0.05


@dataclass(frozen=True, slots=True)
class Check:
    what: str
    ok: bool
    detail: str = ""


def _visited(status: URLStatus) -> bool:
    return status.outcome is not None and status.outcome.state == "done"


def check_crawl(
    site: DemoSite, path: Path, first: list[Page], second: list[Page], revisit: float, budget: int
) -> list[Check]:
    """After the killed crawl (its lines: ``first``) and the resumed one (``second``)."""
    expected = site.expected()
    with Store.open(path, readonly=True) as store:
        frontier = store.frontier()
        status = {url: frontier.url(url) for url in expected | {p["url"] for p in first}}
        in_flight = frontier.stats().in_flight
    missing = sorted(url for url in expected if not _visited(status[url]))
    committed = {p["url"]: p for p in first if p.get("outcome") in COMMITTED}
    lost = sorted(url for url in committed if not _visited(status[url]))
    again = sorted(p["url"] for p in second if p["url"] in committed and "status" in p
                   and when(p) < when(committed[p["url"]]) + revisit - SLACK)  # fmt: skip
    private = site.count(path_prefix="/private/")
    with site.lock:
        calendar = len({path for _, _, path, _ in site.log if path.startswith("/calendar/")})
    return [
        Check(f"every page of the site was crawled ({len(expected) - len(missing)} of "
              f"{len(expected)})", not missing, f"missing: {missing[:5]}"),
        Check(f"nothing lost across the kill: the {len(committed)} pages the crawler logged as "
              "committed before it are in the store", not lost, f"lost: {lost[:5]}"),
        Check("nothing done twice: the resumed crawl fetched none of them again before its "
              "revisit was due", not again, f"fetched again: {again[:5]}"),
        Check("no seed left in flight (the kill's leases went back to their queues)",
              in_flight == 0, f"{in_flight} in flight"),
        Check("robots.txt obeyed: nothing under /private/ was requested", private == 0,
              f"{private} requests"),
        Check(f"the calendar trap was bounded ({calendar} pages requested for a budget of "
              f"{budget})",
              0 < calendar <= budget, f"{calendar} calendar pages"),
        _retried(site, "/flaky", 503, 0.0, "the flaky page was retried after its 503"),
        _retried(site, "/busy", 429, 1.0, "the 429 paused its host for its Retry-After: 1"),
    ]  # fmt: skip


def _retried(site: DemoSite, path: str, status: int, after: float, what: str) -> Check:
    answers = [(at, s) for at, _, p, s in site.log if p == path]
    ok = (len(answers) >= 2 and answers[0][1] == status and answers[-1][1] == 200
          and answers[1][0] - answers[0][0] >= after)  # fmt: skip
    return Check(what, ok, f"answers: {[s for _, s in answers]}")


def check_revisit(
    site: DemoSite, pages: list[Page], changed: list[str], due: Mapping[str, float],
    revisit: float,
) -> list[Check]:  # fmt: skip
    """After the revisit round (its lines: ``pages``), with ``changed`` pages new since and
    ``due``: when each revisit of the round was due, by URL."""
    last: dict[str, float] = {}
    early = []
    for page in (p for p in pages if p.get("outcome") in COMMITTED and p["url"] in due):
        url, at = page["url"], when(page)
        if at < (last[url] + revisit if url in last else due[url]) - SLACK:
            early.append(url)  # fetched before it was due (again, a revisit interval later)
        last[url] = at
    first = round_visits(pages, due)
    wrong = []
    for url, page in first.items():
        path = urlsplit(url).path
        known = site.pages.get(path)
        if known is None:
            continue  # a redirect, visited again: a 301 again
        expected = 304 if known.validators and path not in changed else 200
        if page["status"] != expected:
            wrong.append(f"{path}: {page['status']}, not {expected}")
    missed = sorted(set(due) - set(first))
    unseen = [path for path in changed if site.url(path) not in first]
    return [
        Check(f"every revisit came due and was fetched in the round, none before its time "
              f"({len(first)} of {len(due)})", not missed and not early,
              f"missed: {missed[:5]}, early: {early[:5]}"),
        Check("unchanged pages answered 304 to their stored validators, changed ones 200",
              not wrong and not unseen, f"{wrong[:5]} {unseen[:5]}"),
    ]  # fmt: skip


def round_visits(pages: list[Page], due: Mapping[str, float]) -> dict[str, Page]:
    """The visits of the revisit round: the first in ``pages`` of each URL in ``due``."""
    first: dict[str, Page] = {}
    for page in pages:
        if page.get("outcome") in COMMITTED and page["url"] in due:
            first.setdefault(page["url"], page)
    return first
