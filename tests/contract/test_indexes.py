"""A crawl's bounded indexes, over every storage: its recent failures (each partition keeps its
newest share) and its revisits counted by the minute they fall due."""

from __future__ import annotations

import pytest
from helpers import MakeFrontier

from crawlstore import Done, Failed, ManualClock, Ready, RecentFailure, Seed, Skipped
from crawlstore.errors import InvalidArgument
from crawlstore.frontier import indexes
from crawlstore.revisit import RevisitTags, revisit


class Page(RevisitTags):
    NEWS = revisit("10m")
    FEED = revisit("3h")


def _visit(frontier: object, urls: list[str], report: object, clock: ManualClock) -> None:
    """Push ``urls``, pop each and report it (``report(seed, i)``), a second apart."""
    for url in urls:
        frontier.push(Seed.get(url))  # type: ignore[attr-defined]
    for i in range(len(urls)):
        popped = frontier.pop()  # type: ignore[attr-defined]
        assert isinstance(popped, Ready), popped
        frontier.report(report(popped.seed, i))  # type: ignore[attr-defined]
        clock.advance(1.0)


def test_recent_failures_newest_first_with_status_and_reason(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier()
    urls = [f"https://a.example/{i}" for i in range(6)]

    def report(seed: Seed, i: int) -> object:
        if i % 3 == 0:
            return Done(seed, status=200)
        if i % 3 == 1:
            return Failed(seed, reason=f"timeout {i}")
        return Failed(seed, status=503, reason="http 503")

    _visit(f, urls, report, clock)
    f.push(Seed.get("https://a.example/skipped"))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Skipped(popped.seed, reason="robots"))
    start = clock() - 6.0
    got = f.core.recent_failures()
    assert got == [
        RecentFailure(start + 5, urls[5], "", 503, "http 503"),
        RecentFailure(start + 4, urls[4], "", None, "timeout 4"),
        RecentFailure(start + 2, urls[2], "", 503, "http 503"),
        RecentFailure(start + 1, urls[1], "", None, "timeout 1"),
    ]
    assert f.core.recent_failures(limit=1) == got[:1]
    assert f.core.recent_failures(limit=0) == []
    with pytest.raises(InvalidArgument, match="limit"):
        f.core.recent_failures(limit=-1)


def test_the_ring_keeps_the_newest_of_its_partition(
    make_frontier: MakeFrontier, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexes, "RECENT_FAILURES", 5)
    monkeypatch.setattr(indexes, "FAILURES_MIN", 2)
    f = make_frontier()  # one queue: one partition holds every failure
    urls = [f"https://a.example/{i}" for i in range(9)]
    _visit(f, urls, lambda seed, i: Failed(seed, reason="gone"), clock)
    kept = indexes.failures_kept(f.core.storage.capabilities.partitions)
    assert [x.url for x in f.core.recent_failures(limit=100)] == urls[::-1][:kept]


def test_a_failure_noted_twice_is_kept_once(
    make_frontier: MakeFrontier, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One URL failing twice in one millisecond is one failure: the ring still keeps its
    partition's newest, no fewer."""
    monkeypatch.setattr(indexes, "RECENT_FAILURES", 5)
    monkeypatch.setattr(indexes, "FAILURES_MIN", 2)
    f = make_frontier()
    again = "https://a.example/again"
    for _ in range(2):  # (finished, it is queued again: no dedup here)
        f.push(Seed.get(again))
        popped = f.pop()
        assert isinstance(popped, Ready)
        f.report(Failed(popped.seed, reason="gone"))
    assert [x.url for x in f.core.recent_failures()] == [again]
    clock.advance(1.0)
    urls = [f"https://a.example/{i}" for i in range(9)]
    _visit(f, urls, lambda seed, i: Failed(seed, reason="gone"), clock)
    kept = indexes.failures_kept(f.core.storage.capabilities.partitions)
    assert [x.url for x in f.core.recent_failures(limit=100)] == urls[::-1][:kept]


def test_a_queue_longer_than_a_unit_reads_at_once(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    """Listing, deleting and uncounting a queue reach every URL of it, however many (a store
    on Redis reads a sorted set of a few hundred members whole, and a longer one by pages)."""
    f = make_frontier(delay=0.0).revisit(Page)
    n = 600
    f.push_many([Seed.get(f"https://a.example/{i}").with_tag(Page.NEWS) for i in range(n)])
    for popped in f.pop_many(n // 2):
        f.report(Done(popped.seed))
    core = f.core
    assert core.revisits_due(clock() + 3600) == n // 2
    assert len(core.urls(queue="", limit=10 * n)) == n == core.count()
    assert core.delete_queue("") == n
    assert core.count() == 0 and core.urls(limit=10) == []
    assert core.revisits_due(clock() + 1e6) == 0


def test_a_failure_revisited_stays_among_the_recent_ones(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    """The ring is what happened, not the URLs' state now: a failure revisited and done since
    stays in it."""
    f = make_frontier().revisit(Page)
    f.push(Seed.get("https://a.example/x").with_tag(Page.NEWS))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Failed(popped.seed, status=500))
    clock.advance(601)
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Done(popped.seed, status=200))
    assert [(x.url, x.status) for x in f.core.recent_failures()] == [("https://a.example/x", 500)]


def test_revisits_due_by_the_minute(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier(delay=0.0).revisit(Page)
    news = [Seed.get(f"https://a.example/n{i}").with_tag(Page.NEWS) for i in range(3)]
    feeds = [Seed.get(f"https://a.example/f{i}").with_tag(Page.FEED) for i in range(2)]
    for seed in news + feeds + [Seed.get("https://a.example/once")]:
        f.push(seed)
    now = clock()
    for _ in range(6):
        popped = f.pop()
        assert isinstance(popped, Ready)
        f.report(Done(popped.seed))
    core = f.core
    assert core.revisits_due(now + 3600) == 3  # the news pages, in 10 minutes
    assert core.revisits_due(now + 4 * 3600) == 5
    assert core.revisits_due(now + 60) == 0
    assert core.stats().scheduled == 5
    clock.advance(601)  # the news pages are due: counted until they leave the schedule
    assert core.revisits_due(clock()) == 3
    popped = f.pop()  # which moves every due one of the queue to its entries
    assert isinstance(popped, Ready)
    assert core.revisits_due(clock()) == 0
    f.report(Done(popped.seed))  # scheduled again, 10 minutes on
    assert core.revisits_due(clock() + 540) == 0
    assert core.revisits_due(clock() + 600) == 1
    assert core.revisits_due(clock() + 1e6) == 3
    assert core.delete_queue("") > 0
    assert core.revisits_due(clock() + 1e6) == 0
    assert core.stats().scheduled == 0


def test_a_crawl_without_indexes_yet(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    assert f.core.recent_failures() == []
    assert f.core.revisits_due(clock() + 3600) == 0
    with pytest.raises(InvalidArgument, match="until"):
        f.core.revisits_due(float("nan"))
