"""The demo's checks: what the store and the site's request log say, not what the crawler
printed about itself."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..frontier.protocol import URLStatus
from ..store import Store
from .site import DemoSite

__all__ = ["Check", "check_crawl", "check_revisit"]

Page = dict[str, Any]
_COMMITTED = ("done", "unchanged", "redirect")


@dataclass(frozen=True, slots=True)
class Check:
    what: str
    ok: bool
    detail: str = ""


def _visited(status: URLStatus) -> bool:
    return status.outcome is not None and status.outcome.state == "done"


def _when(page: Page) -> float:
    return datetime.fromisoformat(page["at"]).timestamp()


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
    committed = {p["url"]: p for p in first if p.get("outcome") in _COMMITTED}
    lost = sorted(url for url in committed if not _visited(status[url]))
    again = sorted(p["url"] for p in second if p["url"] in committed and "status" in p
                   and _when(p) < _when(committed[p["url"]]) + revisit - 1)  # fmt: skip
    private = site.count(path_prefix="/private/")
    calendar = site.count(path_prefix="/calendar/")
    return [
        Check(f"every page of the site was crawled ({len(expected) - len(missing)} of "
              f"{len(expected)})", not missing, f"missing: {missing[:5]}"),
        Check(f"nothing lost across the kill: the {len(committed)} pages committed before it "
              "are in the store", not lost, f"lost: {lost[:5]}"),
        Check("nothing done twice: the resumed crawl fetched none of them again", not again,
              f"fetched again: {again[:5]}"),
        Check("no seed left in flight (the kill's leases went back to their queues)",
              in_flight == 0, f"{in_flight} in flight"),
        Check("robots.txt obeyed: nothing under /private/ was requested", private == 0,
              f"{private} requests"),
        Check(f"the calendar trap was bounded ({calendar} pages for a budget of {budget})",
              0 < calendar <= budget, f"{calendar} calendar pages"),
        _retried(site, "/flaky", 503, 0.0, "the flaky page was retried after its 503"),
        _retried(site, "/busy", 429, 1.0, "the 429 paused its host for its Retry-After: 1"),
    ]  # fmt: skip


def _retried(site: DemoSite, path: str, status: int, after: float, what: str) -> Check:
    answers = [(at, s) for at, _, p, s in site.log if p == path]
    ok = (len(answers) >= 2 and answers[0][1] == status and answers[-1][1] == 200
          and answers[1][0] - answers[0][0] >= after)  # fmt: skip
    return Check(what, ok, f"answers: {[s for _, s in answers]}")


def check_revisit(site: DemoSite, pages: list[Page], changed: list[str], due: int) -> list[Check]:
    """After the revisit pass (its lines: ``pages``), with ``changed`` pages new since."""
    fetched = [p for p in pages if "status" in p]
    wrong = []
    for page in fetched:
        path = urlsplit(page["url"]).path
        known = site.pages.get(path)
        if known is None:
            continue  # a redirect, visited again: a 301 again
        expected = 304 if known.validators and path not in changed else 200
        if page["status"] != expected:
            wrong.append(f"{path}: {page['status']}, not {expected}")
    revisited = {urlsplit(p["url"]).path for p in fetched}
    unseen = [path for path in changed if path not in revisited]
    return [
        Check(f"every revisit came due and was fetched once ({len(fetched)} of {due})",
              len(fetched) == due and len(revisited) == len(fetched), f"{len(fetched)}"),
        Check("unchanged pages answered 304 to their stored validators, changed ones 200",
              not wrong and not unseen, f"{wrong[:5]} {unseen[:5]}"),
    ]  # fmt: skip
