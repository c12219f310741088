"""Queues and politeness on the store: round-robin, delays, in-flight caps, blocks."""

from __future__ import annotations

from helpers import ordered_across_queues, path_of
from lmdbcount import counting

from crawlstore import Done, Empty, ManualClock, Ready, Seed, Store, Wait, register_queue_key


def page(host: str, path: str) -> Seed:
    return Seed.get(f"https://{host}/{path}")


def host_of(popped: object) -> str:
    assert isinstance(popped, Ready), popped
    return popped.seed.url.split("/")[2]


def test_one_queue_by_default_keeps_the_global_order(store: Store) -> None:
    f = store.frontier("priority")
    f.push_many([page("a.com", "1"), page("b.com", "2").with_priority(5), page("a.com", "3")])
    if f.core.storage.capabilities.default_queues == "host":  # a sharded storage: per host
        assert f.queue("a.com") is not None and f.queue("") is None
        return
    assert [path_of(f.pop()) for _ in range(3)] == ["2", "1", "3"]
    assert f.queue("") is not None and f.queue("a.com") is None


def test_round_robin_across_host_queues(store: Store) -> None:
    f = store.frontier("fifo", queues="host", max_in_flight=None)
    f.push_many(
        [page("a.com", str(i)) for i in range(3)] + [page("b.com", "x"), page("c.com", "y")]
    )
    hosts = [host_of(f.pop()) for _ in range(5)]
    if not ordered_across_queues(f):  # across partitions: each round's queues in their turns
        hosts[:3] = sorted(hosts[:3])
    assert hosts == ["a.com", "b.com", "c.com", "a.com", "a.com"]
    assert f.pop() is Empty


def test_host_queues_hold_one_seed_in_flight_by_default(store: Store, clock: ManualClock) -> None:
    f = store.frontier("fifo", queues="host")
    f.push_many([page("a.com", "1"), page("a.com", "2"), page("b.com", "3")])
    first, second = f.pop(), f.pop()
    hosts = [host_of(first), host_of(second)]
    if not ordered_across_queues(f):  # across partitions: the two queues in their turns
        hosts.sort()
    assert hosts == ["a.com", "b.com"]
    third = f.pop()  # a.com is at its cap: nothing is ready until a report (or lease end)
    assert isinstance(third, Wait) and third.until == clock() + 600
    (taken,) = [r for r in (first, second) if isinstance(r, Ready) and host_of(r) == "a.com"]
    f.report(Done(taken.seed))
    assert path_of(f.pop()) == "2"
    info = f.queue("a.com")
    assert info is not None and (info.queued, info.in_flight) == (0, 1)


def test_delay_between_pops_of_one_queue(store: Store, clock: ManualClock) -> None:
    f = store.frontier("fifo", queues="host", delay=2.0, max_in_flight=None)
    f.push_many([page("a.com", "1"), page("a.com", "2"), page("b.com", "3")])
    start = clock()
    hosts = [host_of(f.pop()), host_of(f.pop())]
    if not ordered_across_queues(f):  # across partitions: the two queues in their turns
        hosts.sort()
    assert hosts == ["a.com", "b.com"]
    assert f.pop() == Wait(start + 2.0)
    clock.advance(2.0)
    assert path_of(f.pop()) == "2"


def test_per_queue_overrides_and_blocks(store: Store, clock: ManualClock) -> None:
    f = store.frontier("fifo", queues="host", max_in_flight=None)
    f.set_queue("slow.com", delay=10)
    f.push_many([page("slow.com", "1"), page("slow.com", "2"), page("fast.com", "3")])
    f.block_queue("fast.com", clock() + 5)
    assert host_of(f.pop()) == "slow.com"
    assert f.pop() == Wait(clock() + 5)
    clock.advance(5)
    assert host_of(f.pop()) == "fast.com"
    assert f.pop() == Wait(clock() + 5)
    f.set_queue("slow.com", delay=None)  # back to the default: ready now
    assert path_of(f.pop()) == "2"
    info = f.queue("fast.com")
    assert info is not None and info.blocked_until == clock()


def test_custom_queue_key(store: Store) -> None:
    register_queue_key("by-tag", lambda seed: seed.tag or "untagged")
    f = store.frontier("fifo", queues="by-tag", max_in_flight=None)
    f.push_many([page("a.com", "1").with_tag("x"), page("b.com", "2").with_tag("x"),
                 page("c.com", "3")])  # fmt: skip
    assert f.queue_for(page("z.com", "q").with_tag("x")) == "x"
    paths = [path_of(f.pop()) for _ in range(3)]
    if not ordered_across_queues(f):  # across partitions: the two queues in their turns
        paths[:2] = sorted(paths[:2])  # type: ignore[type-var]
    assert paths == ["1", "3", "2"]


def test_politeness_state_survives_a_reopen(tmp_path, clock: ManualClock) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "s.lmdb"
    with Store.open(path, clock=clock, durability="nosync") as store:
        f = store.frontier("fifo", queues="host", max_in_flight=None)
        f.set_queue("a.com", delay=30)
        f.push_many([page("a.com", "1"), page("a.com", "2")])
        f.pop()
    with Store.open(path, clock=clock, durability="nosync") as store:
        f = store.frontier(queues="host", max_in_flight=None)
        assert f.pop() == Wait(clock() + 30)
        info = f.queue("a.com")
        assert info is not None and info.delay == 30 and info.in_flight == 1


def _pop_cost(store: Store, queues: int) -> float:
    """Cursor moves and point reads per pop (one transaction each) with ``queues`` host queues
    holding seeds, with a crawl's delay and cap in force."""
    f = store.frontier("fifo", crawl=f"q{queues}", queues="host", delay=5.0)
    with store.transaction():
        for i in range(queues):
            f.push_many([page(f"h{i}.com", "x"), page(f"h{i}.com", "y")])
    with counting(store) as counts:
        hosts = {host_of(f.pop()) for _ in range(100)}
    assert len(hosts) == 100  # one a host: the delay holds each popped host back
    return sum(counts.values()) / 100


def test_many_queues_pop_without_scanning(file_store: Store) -> None:
    store = file_store
    small, large = _pop_cost(store, 100), _pop_cost(store, 5000)
    assert large <= 30, large  # a handful of reads and moves a pop, at any number of queues
    assert large <= small * 1.5 + 3, (small, large)
    f = store.frontier(crawl="q5000", queues="host", delay=5.0)
    with counting(store) as counts:
        f.push(page("new.com", "x"))
    assert sum(counts.values()) <= 30, counts


def test_a_pop_passing_over_capped_queues_reads_each_a_bounded_number_of_times(
    file_store: Store,
) -> None:
    """Every due queue at the call's in-flight cap (the URL Frontier's max_urls_per_queue): a
    pop finds nothing, reading the due index in pages that double, not once a page each."""
    store = file_store
    f = store.frontier("fifo", queues="host", max_in_flight=None, delay=0)
    n = 800
    f.push_many([page(f"h{h}.com", str(i)) for h in range(n) for i in range(3)])
    while f.core.pop_many(500, per_queue=2, max_in_flight=2):
        pass
    with counting(store) as counts:
        assert f.core.pop_many(100, per_queue=2, queues=10, max_in_flight=2) == []
    assert sum(counts.values()) <= 5 * n, counts  # a few reads a queue (once a page: 14 n)
