"""``peek``: what pop will hand out, without handing it out, on every storage. The property:
whatever the crawl went through, the ready seeds of a peek are what that many pops then hand
out, in that order, and (each reported done at once) each later one is what a pop hands out
at its time."""

from __future__ import annotations

import itertools
import math

import pytest
from helpers import MakeFrontier, ordered_across_queues, seed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstore import (
    Cancelled,
    Done,
    Failed,
    InMemFrontier,
    ManualClock,
    Ready,
    Seed,
    Store,
    Upcoming,
)
from crawlstore.frontier import Frontier
from crawlstore.frontier.protocol import PEEK_REASONS, Reschedule

LEASE = 60.0


def page(host: int, path: str, priority: int = 0) -> Seed:
    return Seed.get(f"https://h{host}.test/{path}").with_priority(priority)


def check(frontier: Frontier, clock: ManualClock, k: int = 50) -> None:
    """Peek, then pop: the ready ones now, then (those reported done) each later one at its
    time, reported done at once (while no lease taken before the check could expire)."""
    before = (frontier.stats(), frontier.snapshot(), frontier.queues(limit=1000))
    upcoming = frontier.peek(k)
    assert (frontier.stats(), frontier.snapshot(), frontier.queues(limit=1000)) == before
    assert all(isinstance(u, Upcoming) and u.why in PEEK_REASONS for u in upcoming)
    assert len({u.seed.fingerprint for u in upcoming}) == len(upcoming)
    ready = [u for u in upcoming if u.ready]
    timed = [u for u in upcoming if u.at is not None]
    assert upcoming[: len(ready)] == ready and upcoming[: len(timed)] == timed
    assert all(u.at == clock() for u in ready)
    assert [u.at for u in timed] == sorted(u.at for u in timed)  # type: ignore[type-var]
    assert all(u.why in ("held", "limit") for u in upcoming[len(timed) :])
    start = clock()
    assert all(u.at >= start for u in timed[len(ready) :])  # type: ignore[operator]
    live = {s.fingerprint: s.at for s in frontier.urls(state="in_flight", limit=1000)
            if s.at is not None and s.at > start}  # fmt: skip
    assert not set(live) & {u.seed.fingerprint for u in upcoming}  # in flight: never listed
    horizon = min([math.inf, *live.values()])

    exact = ordered_across_queues(frontier)

    def pop(u: Upcoming) -> Ready:
        got = frontier.pop()
        assert isinstance(got, Ready), (u, got)
        if exact:
            assert (got.seed.with_lease(None), frontier.queue_for(got.seed)) == (u.seed, u.queue)
        return got

    def listed(group: list[Upcoming], got: list[Ready]) -> None:
        """Across partitions the seeds of one time may come in another order, never others
        (unless the peek cut that time's group short: then others of that time may come)."""
        cut = len(upcoming) == k and group and group[-1] is upcoming[-1]
        if not exact and not cut:
            key = sorted((r.seed.url, frontier.queue_for(r.seed)) for r in got)
            assert key == sorted((u.seed.url, u.queue) for u in group)

    handed = [pop(u) for u in ready]
    listed(ready, handed)
    if len(ready) < k:
        assert frontier.pop_many(1) == []  # every seed ready now was listed
    frontier.report_many([Done(r.seed) for r in handed])
    later = [u for u in timed[len(ready) :] if u.at is not None and u.at < horizon]
    for at, same in itertools.groupby(later, key=lambda u: u.at):
        assert at is not None
        clock.now = max(clock.now, at)
        group, got = list(same), []
        for u in group:
            got.append(pop(u))
            frontier.report(Done(got[-1].seed))
        listed(group, got)


@pytest.mark.parametrize("order", ["fifo", "lifo", "priority"])
def test_one_queue_in_each_order(make_frontier: MakeFrontier, clock: ManualClock,
                                 order: str) -> None:  # fmt: skip
    f = make_frontier(order)
    f.push_many([seed(str(i)).with_priority(i % 3) for i in range(12)])
    upcoming = f.peek(12)
    assert [u.why for u in upcoming] == ["ready"] * 12 and {u.queue for u in upcoming} == {""}
    assert f.peek(5) == upcoming[:5]
    check(f, clock, 12)  # pops those twelve, in that order
    assert f.peek(3) == [] and f.stats().done == 12


def test_peek_names_the_order_pop_follows(make_frontier: MakeFrontier) -> None:
    f = make_frontier("priority")
    f.push_many([seed("a"), seed("b").with_priority(5), seed("c")])
    assert [u.seed.url.rsplit("/", 1)[1] for u in f.peek()] == ["b", "a", "c"]
    lifo = make_frontier("lifo")
    lifo.push_many([seed("a"), seed("b"), seed("c")])
    assert [u.seed.url.rsplit("/", 1)[1] for u in lifo.peek(2)] == ["c", "b"]
    assert make_frontier("fifo").peek() == []  # a crawl that does not exist yet


def test_host_queues_round_robin_then_delays(make_frontier: MakeFrontier,
                                             clock: ManualClock) -> None:  # fmt: skip
    f = make_frontier("fifo", queues="host", delay=2.0, max_in_flight=None)
    f.push_many([page(h, str(i)) for i in range(3) for h in range(3)])
    upcoming = f.peek(9)
    now = clock()
    if not ordered_across_queues(f):  # each round's queues, in the order of their partitions
        upcoming.sort(key=lambda u: (u.at, u.queue))
    assert [(u.queue, u.at, u.why) for u in upcoming] == [
        (f"h{h}.test", now + 2.0 * i, "ready" if i == 0 else "delay")
        for i in range(3) for h in range(3)]  # fmt: skip
    check(f, clock, 9)
    assert f.stats().done == 9


def test_a_blocked_queue_and_a_schedule_come_later_marked(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier("fifo", queues="host", max_in_flight=None)
    f.push_many([page(0, "a"), page(1, "b"), page(2, "c")])
    now = clock()
    f.block_queue("h1.test", now + 50)
    first = f.pop_many(1, queue="h2.test")[0]
    f.report(Reschedule(first.seed, now + 20))
    assert [(u.seed.url, u.at, u.why) for u in f.peek()] == [
        ("https://h0.test/a", now, "ready"),
        ("https://h2.test/c", now + 20, "retry"),
        ("https://h1.test/b", now + 50, "blocked"),
    ]
    check(f, clock)
    assert f.stats().done == 3


def test_seeds_behind_a_seed_in_flight_are_held(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo", queues="host")  # one seed in flight a host
    f.push_many([page(0, "1"), page(0, "2"), page(1, "3"), page(0, "4")])
    assert isinstance(f.pop_many(1, queue="h0.test")[0], Ready)
    assert [(u.seed.url, u.at, u.why) for u in f.peek()] == [
        ("https://h1.test/3", f.clock(), "ready"),
        ("https://h0.test/2", None, "held"),
        ("https://h0.test/4", None, "held"),
    ]
    assert [u.seed.url for u in f.peek(1, queue="h0.test")] == ["https://h0.test/2"]
    assert f.peek(queue="nowhere.test") == []


def test_a_queue_at_its_limit(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo", queues="host", max_in_flight=None)
    f.push_many([page(0, str(i)) for i in range(3)])
    f.set_queue("h0.test", limit=1)
    ready = f.pop()
    assert isinstance(ready, Ready)
    assert [u.why for u in f.peek(queue="h0.test")] == ["limit", "limit"]
    f.report(Done(ready.seed))
    assert [(u.at, u.why) for u in f.peek(queue="h0.test")] == [(None, "limit")] * 2


def test_an_expired_lease_comes_first_as_pop_reclaims_it(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier("fifo", lease_time=10.0)
    f.push_many([seed("a"), seed("b")])
    assert isinstance(f.pop(), Ready)
    assert [u.seed.url for u in f.peek()] == ["https://example.com/b"]
    clock.advance(11)
    assert [(u.seed.url, u.why) for u in f.peek()] == [
        ("https://example.com/a", "ready"), ("https://example.com/b", "ready")]  # fmt: skip
    check(f, clock)
    assert f.stats().done == 2


def test_peek_reads_a_transaction_s_own_writes_and_leaves_them(store: Store) -> None:
    f = store.frontier("fifo", queues="single")
    inboxes = store.capabilities.inboxes  # a transaction's pushes: folded once it commits
    with store.transaction():
        f.push_many([seed("a"), seed("b")])
        assert [u.seed.url for u in f.peek()] == (
            [] if inboxes else ["https://example.com/a", "https://example.com/b"])  # fmt: skip
        f.push(seed("c"))
        assert len(f.peek()) == (0 if inboxes else 3)
    assert len(f.peek()) == 3
    assert [r.seed.url for r in f.pop_many(3)] == [
        "https://example.com/a", "https://example.com/b", "https://example.com/c"]  # fmt: skip


def test_peek_on_a_read_only_store_writes_nothing(tmp_path, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ro.lmdb"
    with Store.open(path, clock=clock) as store:
        f = store.frontier("fifo", queues="host", delay=1.0, max_in_flight=None)
        f.push_many([page(h, str(i)) for i in range(4) for h in range(2)])
        f.report(Failed(f.pop().seed))  # type: ignore[union-attr]
    size = path.stat().st_size
    with Store.open(path, readonly=True, clock=clock) as store:
        upcoming = store.frontier().peek(100)
        assert len(upcoming) == 7 and upcoming[0].why == "ready"
    assert path.stat().st_size == size
    with Store.open(path, clock=clock) as store:
        assert [u.seed for u in store.frontier().peek(100)] == [u.seed for u in upcoming]


def test_facades_peek_the_core(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo").dedup().retry(2)
    f.push_many([seed("a"), seed("b")])
    assert [u.seed.url for u in f.peek()] == [u.seed.url for u in f.core.peek()]
    with pytest.raises(TypeError):
        f.peek(queue=3)  # type: ignore[arg-type]


def test_a_retry_due_during_a_delay_ties_with_a_queue_ready_when_the_delay_ends(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    """h0's seed is retried at +0.5 s, inside h0's 1 s delay; h1's delay ends at +1 s too. A
    pop at +1 s serves the queues in one order whether or not anybody popped at +0.5 s (when
    the retry fell due and nothing could be handed out), and peek lists that order."""
    f = make_frontier("fifo", queues="host", delay=1.0, lease_time=LEASE)
    f.push_many([page(0, "0"), page(1, "1")])
    (first,) = f.pop_many(1, per_queue=1)
    f.push(page(1, "2"))
    f.report(Reschedule(first.seed, clock() + 0.5))
    check(f, clock)


# -- the property ---------------------------------------------------------------------------

HOSTS = 3
_op = st.one_of(
    st.tuples(st.just("push"), st.integers(0, HOSTS - 1), st.integers(0, 2)),
    st.tuples(st.just("pop"), st.integers(1, 3), st.none()),
    st.tuples(
        st.just("report"),
        st.sampled_from(["done", "failed", "cancel", "retry"]),
        st.sampled_from([0.5, 3.0, 7.0]),
    ),
    st.tuples(st.just("advance"), st.sampled_from([0.3, 1.0, 2.5, 11.0]), st.none()),
    st.tuples(st.just("block"), st.integers(0, HOSTS - 1), st.sampled_from([0.0, 2.0, 6.0])),
    st.tuples(st.just("check"), st.integers(1, 12), st.none()),
)


_CRAWLS = dict(
    order=st.sampled_from(["fifo", "lifo", "priority"]),
    queues=st.sampled_from(["single", "host"]),
    delay=st.sampled_from([0.0, 1.0, 2.0]),
    cap=st.sampled_from([None, 1, 2]),
    ops=st.lists(_op, max_size=40),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(**_CRAWLS)
def test_peek_then_pop_agree(
    make_frontier: MakeFrontier,
    clock: ManualClock,
    order: str,
    queues: str,
    delay: float,
    cap: int | None,
    ops: list[tuple[str, object, object]],
) -> None:
    f = make_frontier(order, queues=queues, delay=delay, max_in_flight=cap, lease_time=LEASE)
    agree(f, clock, queues, ops)


@settings(max_examples=1000, deadline=None)
@given(**_CRAWLS)
def test_peek_then_pop_agree_in_memory_on_many_crawls(
    order: str, queues: str, delay: float, cap: int | None, ops: list[tuple[str, object, object]]
) -> None:
    """The same, on many more crawls in memory (fast): ties between queues are rare."""
    clock = ManualClock()
    f = InMemFrontier(order, queues=queues, delay=delay, max_in_flight=cap, lease_time=LEASE,
                      clock=clock)  # fmt: skip
    agree(f, clock, queues, ops)


def agree(f: Frontier, clock: ManualClock, queues: str,
          ops: list[tuple[str, object, object]]) -> None:  # fmt: skip
    """Run ``ops``, then check that peek and pop agree."""
    held: list[Ready] = []
    pushed = 0
    for op, a, b in [*ops, ("check", 50, None)]:
        if op == "push":
            assert isinstance(a, int) and isinstance(b, int)
            f.push(page(a, str(pushed), priority=b))
            pushed += 1
        elif op == "pop":
            assert isinstance(a, int)
            held.extend(f.pop_many(a, per_queue=1))
        elif op == "report" and held:
            ready = held.pop(0)
            if ready.lease.expires <= clock():
                continue  # its lease ended: the seed may be elsewhere
            if a == "done":
                f.report(Done(ready.seed))
            elif a == "failed":
                f.report(Failed(ready.seed))
            elif a == "cancel":
                f.report(Cancelled(ready.seed))
            else:
                assert isinstance(b, float)
                f.report(Reschedule(ready.seed, clock() + b))
        elif op == "advance":
            assert isinstance(a, float)
            clock.advance(a)
        elif op == "block" and queues == "host":
            assert isinstance(a, int) and isinstance(b, float)
            f.block_queue(f"h{a}.test", clock() + b if b else 0)
        elif op == "check":
            assert isinstance(a, int)
            check(f, clock, a)
