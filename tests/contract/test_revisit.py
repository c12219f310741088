"""Recrawls: intervals on the tag type, the revisit facade, adaptive intervals."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import MakeFrontier, drain, path_of, seed

from crawlstore import (
    Backoff,
    Cancelled,
    Done,
    Empty,
    Failed,
    InMemFrontier,
    ManualClock,
    Ready,
    Retry,
    RetryPolicy,
    Seed,
    Skipped,
    Store,
    Wait,
)
from crawlstore.errors import InvalidInterval
from crawlstore.frontier import Frontier
from crawlstore.revisit import Adapt, Revisit, RevisitTags, once, parse_interval, revisit


class Page(RevisitTags):
    LISTING = revisit("1h")
    PRODUCT = revisit("1d")
    FAST = revisit("90s")
    ABOUT = once()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("1h30m", 5400), ("1d", 86400), ("2h", 7200), ("1d2h3m4s", 93784),
     ("0.5s", 0.5), ("1h 30m", 5400), ("45m", 2700)],
)  # fmt: skip
def test_intervals_parse(text: str, seconds: float) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "0s", "0h0m", "-1h", "1x", "h", "1m1h", "1h1h", "1 h", "1h-", "ten minutes"]
)
def test_bad_intervals_are_rejected_naming_the_string(text: str) -> None:
    with pytest.raises(InvalidInterval) as info:
        parse_interval(text)
    assert repr(text) in str(info.value) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("text", ["soon", "0s", "-5m"])
def test_a_bad_interval_fails_the_class_definition(text: str) -> None:
    with pytest.raises(InvalidInterval, match=rf"Broken\.B: interval '{text}'"):

        class Broken(RevisitTags):
            A = revisit("1h")
            B = revisit(text)


def test_interval_of_each_member() -> None:
    assert Page.interval("LISTING") == 3600 and Page.interval("PRODUCT") == 86400
    assert Page.interval("ABOUT") is None and Page.interval("nope") is None
    assert Page.interval(None) is None
    assert Page.LISTING is not Page.PRODUCT and len(Page) == 4  # equal values never alias
    assert isinstance(Page, Revisit)


class FromConfig:
    """An interval known only at runtime: the same protocol, written by hand."""

    def __init__(self, config: dict[str, str]) -> None:
        self.seconds = {tag: parse_interval(text) for tag, text in config.items()}

    def interval(self, tag: str | None) -> float | None:
        return self.seconds.get(tag) if tag is not None else None


def pop_seed(f: Frontier) -> Seed:
    popped = f.pop()
    assert isinstance(popped, Ready), popped
    return popped.seed


def test_done_and_failed_are_crawled_again(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().revisit(Page)
    f.push_many([seed("a", tag=Page.LISTING), seed("b", tag=Page.FAST)])
    a, b = pop_seed(f), pop_seed(f)
    f.report(Done(a))
    f.report(Failed(b))
    assert f.stats().scheduled == 2
    assert f.pop() == Wait(clock() + 90)  # only revisits wait: Wait, not Empty
    clock.advance(90)
    again = pop_seed(f)
    assert path_of(Ready(again)) == "b" and again.attempt == 1
    f.report(Done(again))
    clock.advance(3600)
    assert drain(f) == ["b", "a"]  # in due order: b's second revisit came due first


def test_a_revisit_starts_on_the_first_attempt(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().revisit(Page).retry_with(RetryPolicy(1, base_delay=1, jitter=0))
    f.push(seed("a", tag=Page.FAST))
    f.report(Retry(pop_seed(f)))
    clock.advance(1)
    second = pop_seed(f)
    assert second.attempt == 2
    f.report(Retry(second))  # out of retries: failed, and so revisited
    assert f.stats().failed == 1
    clock.advance(90)
    assert pop_seed(f).attempt == 1


@pytest.mark.parametrize("case", ["skipped", "untagged", "outside", "once", "cancelled"])
def test_crawled_once(make_frontier: MakeFrontier, clock: ManualClock, case: str) -> None:
    f = make_frontier().revisit(Page)
    tag = {"untagged": None, "outside": "OTHER", "once": Page.ABOUT}.get(case, Page.FAST)
    f.push(seed("a", tag=tag))
    s = pop_seed(f)
    f.report(Skipped(s) if case == "skipped" else Cancelled(s) if case == "cancelled" else Done(s))
    assert f.stats().scheduled == 0
    if case == "cancelled":
        assert drain(f) == ["a"]  # back in the queue, not scheduled
    else:
        assert f.pop() is Empty


def test_one_revisit_per_page(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().revisit(Page)
    f.push(seed("a", tag=Page.FAST))
    f.report(Done(pop_seed(f)))
    assert f.stats().scheduled == 1 and f.pop() == Wait(clock() + 90)
    clock.advance(90)
    again = pop_seed(f)
    f.report(Done(again.with_tag(Page.LISTING)))  # visited again: its new revisit replaces
    assert f.stats().scheduled == 1
    assert f.pop() == Wait(clock() + 3600)


def test_dedup_does_not_refuse_revisits(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().revisit(Page).dedup()
    f.push(seed("a", tag=Page.FAST))
    f.report(Done(pop_seed(f)))
    assert not f.push(seed("a", tag=Page.FAST))  # pushing again is a duplicate...
    clock.advance(90)
    assert path_of(Ready(pop_seed(f))) == "a"  # ...but the revisit comes out


def test_facades_above_apply_to_revisits(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().revisit(Page).tag_backoff()
    f.push(seed("a", tag=Page.FAST))
    f.report(Done(pop_seed(f)))
    f.report(Backoff(Page.FAST, until=clock() + 500))
    clock.advance(90)
    assert f.pop() == Wait(clock() + 410)  # the due revisit is parked by the pause


def test_runtime_intervals(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().revisit(FromConfig({"news": "10m"}))
    f.push(seed("a", tag="news"))
    f.report(Done(pop_seed(f)))
    assert f.pop() == Wait(clock() + 600)


def test_waiting_helper_sleeps_until_the_next_revisit(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().revisit(Page)
    f.push(seed("a", tag=Page.FAST))
    f.report(Done(pop_seed(f)))
    start = clock()
    again = f.next_seed(sleep=clock.sleep)
    assert again is not None and clock() == start + 90
    f.report(Done(again))
    assert f.next_seed(timeout=30, sleep=clock.sleep) is None  # a time limit stops it
    assert clock() == start + 120


def test_revisit_belongs_directly_on_a_storage() -> None:
    with pytest.raises(TypeError, match="goes first in the chain"):
        InMemFrontier.fifo().dedup().revisit(Page)
    with pytest.raises(TypeError, match="RevisitTags"):
        InMemFrontier.fifo().revisit(object())  # type: ignore[arg-type]


def test_snapshot_keeps_revisits_with_their_times(clock: ManualClock) -> None:
    f = InMemFrontier.fifo(clock=clock).revisit(Page)
    f.push(seed("a", tag=Page.FAST))
    f.report(Done(pop_seed(f)))
    snap = f.snapshot()
    assert [(at - clock(), s.url) for at, s in snap.revisits] == [(90, seed("a").url)]
    restored = InMemFrontier.restore(snap, clock=clock).revisit(Page)
    assert restored.pop() == Wait(clock() + 90)


# -- the store ----------------------------------------------------------------------------------


def test_the_schedule_survives_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path, clock=clock, durability="nosync") as store:
        f = store.frontier("fifo").revisit(Page).dedup_with(store.seen())
        f.push_many([seed("a", tag=Page.FAST), seed("b", tag=Page.LISTING)])
        f.report(Done(pop_seed(f)))
        f.report(Done(pop_seed(f)))
    clock.advance(100)
    with Store.open(path, clock=clock, durability="nosync") as store:
        f = store.frontier().revisit(Page).dedup_with(store.seen())
        assert drain(f) == ["a"]  # due 10 s ago: absolute due times
        assert f.pop() == Wait(clock() + 90)  # a again; b at +3600


def test_a_crawl_without_revisit_does_the_due_ones_and_ends(
    tmp_path: Path, clock: ManualClock
) -> None:
    with Store.open(tmp_path / "s.lmdb", clock=clock, durability="nosync") as store:
        f = store.frontier("fifo").revisit(Page)
        f.push_many([seed("a", tag=Page.FAST), seed("b", tag=Page.LISTING)])
        f.report(Done(pop_seed(f)))
        f.report(Done(pop_seed(f)))
        clock.advance(100)
        plain = store.frontier()  # no revisit(): crawls what is due, does not wait for b
        crawled = []
        while (s := plain.next_seed(sleep=clock.sleep)) is not None:
            crawled.append(path_of(Ready(s)))
            plain.report(Done(s))
        assert crawled == ["a"] and clock() == 1_700_000_100
        assert plain.stats().scheduled == 1  # b still waits for a revisiting crawl


# -- adaptive intervals -------------------------------------------------------------------------


def test_adapt_factors() -> None:
    adapt = Adapt(min_factor=0.25, max_factor=4, grow=2, shrink=0.5)
    assert adapt.next_factor(1, False) == 2 and adapt.next_factor(4, False) == 4
    assert adapt.next_factor(1, True) == 0.5 and adapt.next_factor(0.25, True) == 0.25
    assert adapt.next_factor(3, None) == 3
    for bad in [dict(min_factor=2), dict(max_factor=0.5), dict(grow=0.5), dict(shrink=2)]:
        with pytest.raises(ValueError):
            Adapt(**bad)  # type: ignore[arg-type]


def test_unchanged_pages_wait_longer_changed_ones_less(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().revisit(Page, adapt=Adapt(grow=2, shrink=0.5, max_factor=4))
    f.push(seed("a", tag=Page.FAST))
    waits = []
    for unchanged in [True, True, True, False, None]:
        f.report(Done(pop_seed(f), unchanged=unchanged))
        due = f.pop()
        assert isinstance(due, Wait)
        waits.append(due.until - clock())
        clock.advance(due.until - clock())
    assert waits == [180, 360, 360, 180, 180]


def test_content_hash_tells_a_change_without_validators(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().revisit(Page, adapt=Adapt(grow=2, shrink=0.5))
    f.push(seed("a", tag=Page.FAST))
    waits = []
    for digest in ["v1", "v1", "v2", "v2"]:
        f.report(Done(pop_seed(f), content_hash=digest))
        due = f.pop()
        assert isinstance(due, Wait)
        waits.append(due.until - clock())
        clock.advance(due.until - clock())
    assert waits == [90, 180, 90, 180]  # the first visit has nothing to compare with


def test_tag_intervals_from_runtime_values() -> None:
    from crawlstore.errors import InvalidInterval
    from crawlstore.revisit import TagIntervals

    intervals = TagIntervals({"news": "10m", "feed": 90})
    assert (intervals.interval("news"), intervals.interval("feed")) == (600.0, 90.0)
    assert intervals.interval("other") is None and intervals.interval(None) is None
    for bad in (0, -1, True, "soon", None):
        with pytest.raises(InvalidInterval):
            TagIntervals({"x": bad})  # type: ignore[dict-item]
