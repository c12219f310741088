"""The frontier protocol on every storage: orders, reports, scheduling, stats, snapshots."""

from __future__ import annotations

import pytest
from helpers import MakeFrontier, drain, ordered_across_queues, path_of, seed

from crawlstore import (
    Admission,
    Backoff,
    Cancelled,
    Done,
    Empty,
    Failed,
    InMemFrontier,
    ManualClock,
    Ready,
    Reason,
    Retry,
    Seed,
    Skipped,
    Snapshot,
    Store,
    Wait,
)
from crawlstore.errors import InvalidSnapshot, NotInFlight
from crawlstore.frontier.protocol import Reschedule


def test_fifo_pops_in_push_order(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo")
    f.push_many([seed("a"), seed("b"), seed("c")])
    assert drain(f) == ["a", "b", "c"]


def test_lifo_pops_most_recent_first(make_frontier: MakeFrontier) -> None:
    f = make_frontier("lifo")
    f.push_many([seed("a"), seed("b"), seed("c")])
    assert drain(f) == ["c", "b", "a"]


def test_priority_pops_highest_first_ties_in_push_order(make_frontier: MakeFrontier) -> None:
    f = make_frontier("priority")
    f.push_many([seed("a"), seed("b", priority=5), seed("c", priority=5), seed("d", priority=-1)])
    assert drain(f) == ["b", "c", "a", "d"]


def test_priority_extremes(make_frontier: MakeFrontier) -> None:
    f = make_frontier("priority")
    f.push_many([seed("min", priority=-(2**31)), seed("max", priority=2**31 - 1), seed("zero")])
    assert drain(f) == ["max", "zero", "min"]


def test_the_default_order_is_the_same_on_every_storage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # priority: equal priorities come in push order, so a crawl that sets none is breadth first
    with Store.open(tmp_path / "s.lmdb") as store:
        assert InMemFrontier().order == store.frontier().order == "priority"
    with pytest.raises(ValueError, match="order"):
        InMemFrontier("random")


def test_push_admits_and_counts(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    admission = f.push(seed("a"))
    assert admission and admission.accepted and admission.reason is None
    assert f.stats().admitted == 1 and f.stats().queued == 1 and len(f) == 1


def test_pop_on_empty_frontier_is_empty(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    assert f.pop() is Empty
    assert not Empty


def test_popped_seed_is_in_flight_until_reported(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    f.push(seed("a"))
    popped = f.pop()
    assert isinstance(popped, Ready)
    s = f.stats()
    assert (s.queued, s.in_flight, s.popped, len(f)) == (0, 1, 1, 1)
    assert f.pop() is Empty
    f.report(Done(popped.seed))
    s = f.stats()
    assert (s.in_flight, s.done, len(f)) == (0, 1, 0)


@pytest.mark.parametrize(
    ("kind", "counter"), [(Done, "done"), (Failed, "failed"), (Skipped, "skipped")]
)
def test_final_reports_remove_the_seed(
    make_frontier: MakeFrontier, kind: type, counter: str
) -> None:
    f = make_frontier()
    f.push(seed("a"))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(kind(popped.seed))
    assert getattr(f.stats(), counter) == 1
    assert len(f) == 0 and f.pop() is Empty


def test_cancelled_goes_back_to_the_front_of_the_queue(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo")
    f.push_many([seed("a"), seed("b")])
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Cancelled(popped.seed))
    assert f.stats().cancelled == 1
    assert drain(f) == ["a", "b"]


def test_retry_without_a_retry_facade_fails_the_seed(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    f.push(seed("a"))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Retry(popped.seed, after=1.0))
    assert f.stats().failed == 1 and f.stats().retried == 0 and len(f) == 0


def test_backoff_without_tag_backoff_is_ignored(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    f.push(seed("a", tag="t"))
    f.report(Backoff("t", until=f.clock() + 100))
    assert drain(f) == ["a"]


def test_report_of_a_seed_not_in_flight_raises(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    f.push(seed("a"))
    with pytest.raises(NotInFlight, match=r"example\.com/a"):
        f.report(Done(seed("a")))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Done(popped.seed))
    with pytest.raises(NotInFlight):
        f.report(Done(popped.seed))
    assert f.stats().done == 1


def test_a_url_is_held_once_and_pushed_again_once_finished(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    assert f.push_many([seed("a"), seed("a")]) == [Admission(), Admission(Reason.DUPLICATE)]
    popped = f.pop()
    assert isinstance(popped, Ready) and not f.push(seed("a"))  # in flight: still held
    assert f.stats().refused == {"duplicate": 2} and f.stats().in_flight == 1
    f.report(Done(popped.seed))
    assert f.push(seed("a"))  # finished: it may be crawled again
    assert f.url(seed("a").url).state == "queued" and f.stats().admitted == 2


def test_scheduled_seed_waits_until_due(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    f.core.schedule(seed("later"), clock() + 10)
    assert f.pop() == Wait(clock() + 10)
    assert f.stats().scheduled == 1 and len(f) == 1
    clock.advance(10)
    assert path_of(f.pop()) == "later"


def test_one_schedule_per_fingerprint(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    f.core.schedule(seed("x", tag="old"), clock() + 10)
    f.core.schedule(seed("x", tag="new"), clock() + 20)
    assert f.stats().scheduled == 1
    assert f.pop() == Wait(clock() + 20)
    clock.advance(20)
    popped = f.pop()
    assert isinstance(popped, Ready) and popped.seed.tag == "new"
    f.report(Done(popped.seed))
    assert f.pop() is Empty


def test_due_seeds_come_before_queued_ones(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier("fifo")
    f.push(seed("queued"))
    f.core.schedule(seed("due2"), clock() + 2)
    f.core.schedule(seed("due1"), clock() + 1)
    clock.advance(5)
    assert drain(f) == ["due1", "due2", "queued"]


def test_priority_order_applies_to_due_seeds(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier("priority")
    f.push(seed("high", priority=9))
    f.push(seed("low", priority=0))
    f.core.schedule(seed("mid", priority=5), clock())
    assert drain(f) == ["high", "mid", "low"]


def test_reschedule_ends_the_lease_and_schedules(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier()
    f.push(seed("a"))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Reschedule(popped.seed.with_attempt(2), clock() + 3, retried=True))
    s = f.stats()
    assert (s.in_flight, s.scheduled, s.retried) == (0, 1, 1)
    clock.advance(3)
    again = f.pop()
    assert isinstance(again, Ready) and again.seed.attempt == 2


def test_stats_pushed_is_admitted_plus_refused(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    f.push(seed("a"))
    f.refuse(seed("b"), Reason.FILTERED)
    s = f.stats()
    assert s.pushed == 2 and s.refused == {"filtered": 1}


def _fill(f: object, clock: ManualClock) -> None:
    from crawlstore.frontier import Frontier

    assert isinstance(f, Frontier)
    f.push_many([seed("a", priority=1), seed("b", priority=3), seed("c"), seed("d", priority=3)])
    popped = f.pop()
    assert isinstance(popped, Ready)  # one in flight
    f.core.schedule(seed("s2"), clock() + 20)
    f.core.schedule(seed("s1"), clock() + 10)


def test_a_snapshot_lists_a_batch_pushed_over_several_queues_in_its_order(
    make_frontier: MakeFrontier,
) -> None:
    """A batch takes its sequence numbers in its own order, whatever queue each seed joins: a
    snapshot (which lists every queue's seeds together) gives the push order back."""
    f = make_frontier("fifo", queues="host")
    urls = ["https://a.example/1", "https://b.example/1", "https://a.example/2",
            "https://c.example/1", "https://b.example/2"]  # fmt: skip
    f.push_many([Seed.get(u) for u in urls])
    queued = [s.url for s in f.snapshot().queued]
    if not ordered_across_queues(f):  # a batch's sequence numbers are each partition's
        assert sorted(queued) == sorted(urls)
        urls = [u for u in urls if u.startswith("https://a.")]
        queued = [u for u in queued if u.startswith("https://a.")]
    assert queued == urls


@pytest.mark.parametrize("order", ["fifo", "lifo", "priority"])
def test_snapshot_holds_everything_and_restores_in_order(
    make_frontier: MakeFrontier, clock: ManualClock, order: str
) -> None:
    f = make_frontier(order)
    _fill(f, clock)
    snap = f.snapshot()
    assert len(snap) == len(f) == 6
    assert {path_of(Ready(s)) for s in snap} == {"a", "b", "c", "d", "s1", "s2"}
    assert [at - clock() for at, _ in snap.scheduled] == [10, 20]

    decoded = Snapshot.from_bytes(snap.to_bytes())
    assert decoded == snap
    restored = InMemFrontier.restore(decoded, clock=clock)
    expected = [path_of(Ready(s)) for s in (*snap.in_flight, *snap.queued)]
    assert drain(restored) == expected
    clock.advance(20)
    assert drain(restored) == ["s1", "s2"]


def test_restore_continues_in_the_same_order_as_the_original(clock: ManualClock) -> None:
    for order in ("fifo", "lifo", "priority"):
        original = InMemFrontier(order, clock=clock)
        original.push_many([seed(str(i), priority=i % 3) for i in range(12)])
        restored = InMemFrontier.restore(original.snapshot(), clock=clock)
        assert drain(restored) == drain(original), order


@pytest.mark.parametrize(
    "data",
    [b"", b"\xc1", b"\x93\x01\x02\x03", b"\x81\xa1v\x02",
     Snapshot("fifo").to_bytes().replace(b"fifo", b"xxxx")],
)  # fmt: skip
def test_snapshot_from_garbage_raises_typed_error(data: bytes) -> None:
    with pytest.raises(InvalidSnapshot):
        Snapshot.from_bytes(data)


def test_snapshot_with_an_invalid_seed_raises_typed_error() -> None:
    good = Snapshot("fifo", queued=(seed("a"),)).to_bytes()
    bad = good.replace(b"https://example.com/a", b"ftp://example.com/aaa")
    with pytest.raises(InvalidSnapshot, match="invalid seed"):
        Snapshot.from_bytes(bad)


def test_extend_lease_through_facades(make_frontier: MakeFrontier) -> None:
    f = make_frontier().dedup().retry(2)
    f.push(seed("a"))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.extend_lease(popped.seed, 60)
    f.report(Done(popped.seed))
    with pytest.raises(NotInFlight):
        f.extend_lease(popped.seed)


def test_a_lease_extended_twice_to_one_time_ends_once(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier("fifo", lease_time=30).core
    f.push(seed("a"))
    (ready,) = f.pop_many(1)
    f.extend_lease(ready.seed, 1)
    f.extend_lease(ready.seed, 1)  # the same expiry again
    clock.advance(1)
    (again,) = f.pop_many(5)
    assert again.seed.url == ready.seed.url
    assert f.stats().in_flight == 1 and f.stats().queued == 0
