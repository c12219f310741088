"""Listing and counting a crawl's URLs by their last outcome, over every storage: a crawl that
revisits holds its failed pages as scheduled, and the filters on the last outcome find them."""

from __future__ import annotations

import pytest
from helpers import MakeFrontier, seed

from crawlstore import Done, Failed, ManualClock, Ready, Skipped
from crawlstore.errors import InvalidArgument
from crawlstore.frontier import Frontier, URLStatus
from crawlstore.revisit import RevisitTags, revisit


class Tag(RevisitTags):
    PAGE = revisit("60s")


def _paths(statuses: list[URLStatus]) -> list[str]:
    return sorted(s.url.rsplit("/", 1)[1] for s in statuses)


@pytest.fixture
def revisiting(make_frontier: MakeFrontier) -> Frontier:
    """A crawl that revisits: ``ok`` done (200), ``gone`` failed (404), ``dns`` failed (a
    reason), all three scheduled for their revisit; ``robots`` skipped; ``new`` queued."""
    f = make_frontier("fifo").revisit(Tag)
    names = ["ok", "gone", "dns", "robots"]
    f.push_many([seed(name, tag=Tag.PAGE) for name in names])
    f.push(seed("new"))
    ready = [f.pop() for _ in names]
    assert all(isinstance(r, Ready) for r in ready)
    ok, gone, dns, robots = (r.seed for r in ready)  # type: ignore[union-attr]
    f.report_many([Done(ok, status=200), Failed(gone, status=404), Failed(dns, reason="dns"),
                   Skipped(robots, reason="robots.txt")])  # fmt: skip
    return f


def test_failed_pages_are_scheduled_and_found_by_their_outcome(revisiting: Frontier) -> None:
    f = revisiting
    assert f.urls(state="failed") == []  # scheduled again: the state does not say it failed
    failed = f.urls(outcome="failed")
    assert _paths(failed) == ["dns", "gone"] and {s.state for s in failed} == {"scheduled"}
    assert _paths(f.urls(state="scheduled", outcome="failed")) == ["dns", "gone"]
    assert _paths(f.urls(outcome="done")) == ["ok"]
    assert _paths(f.urls(outcome="skipped")) == ["robots"]
    assert f.count(outcome="failed") == 2 and f.count(outcome="skipped") == 1
    assert f.count(state="queued") == 1 and f.count() == 5  # the gauges, as before


def test_status_and_reason_filters(revisiting: Frontier) -> None:
    f = revisiting
    assert _paths(f.urls(http_status=404)) == ["gone"]
    assert _paths(f.urls(http_status=200)) == ["ok"]
    assert _paths(f.urls(reason="dns")) == ["dns"]
    assert _paths(f.urls(outcome="skipped", reason="robots.txt")) == ["robots"]
    assert f.urls(outcome="done", http_status=404) == []
    assert f.urls(reason="dn") == []  # a reason matches exactly
    assert f.count(http_status=404) == 1 and f.count(reason="dns", contains="/dns") == 1
    queue = f.urls(outcome="failed")[0].queue
    assert queue is not None and f.count(queue=queue, outcome="failed") == 2


def test_the_filter_is_on_the_last_outcome(revisiting: Frontier, clock: ManualClock) -> None:
    f = revisiting
    clock.advance(61)  # the revisits are due
    while isinstance(ready := f.pop(), Ready):
        f.report(Done(ready.seed, status=200))
    assert f.urls(outcome="failed") == [] and f.count(outcome="failed") == 0
    assert _paths(f.urls(http_status=200)) == ["dns", "gone", "new", "ok"]


def test_pages_of_a_filtered_listing(revisiting: Frontier) -> None:
    f = revisiting
    first = f.urls(outcome="failed", limit=1)
    rest = f.urls(outcome="failed", after=bytes(first[-1].fingerprint), limit=10)
    assert _paths(first + rest) == ["dns", "gone"] and len(first) == 1
    assert f.urls(limit=0) == [] and f.urls(outcome="failed", limit=0) == []


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"outcome": "failure"}, "'failure'"),
        ({"outcome": "queued"}, "'queued'"),  # a state, not an outcome
        ({"http_status": 99}, "99"),
        ({"http_status": 600}, "600"),
        ({"http_status": "404"}, "'404'"),
        ({"http_status": True}, "True"),
        ({"reason": ""}, "''"),
        ({"reason": 5}, "5"),
        ({"state": "in-flight"}, "'in-flight'"),
        ({"contains": b"x"}, "b'x'"),
    ],
)
def test_bad_filters_are_named(
    make_frontier: MakeFrontier, arguments: dict[str, object], named: str
) -> None:
    f = make_frontier("fifo")
    for call in (f.urls, f.count):
        with pytest.raises(InvalidArgument, match=named.replace("(", r"\(")):
            call(**arguments)
