"""The core over a partitioned storage (``frontier/partitioned.py``): one unit a partition, what
a unit on one partition may reach, and what a batch over several partitions promises."""

from __future__ import annotations

import os
import threading

import pytest

from crawlstore import Done, InMemFrontier, Lease, ManualClock, Seed
from crawlstore.errors import NotInFlight, PartitionError
from crawlstore.frontier.core import CoreFrontier
from crawlstore.frontier.spi import CrawlRecord
from crawlstore.storages._partitioned import PartitionedMemoryStorage

HOSTS = [f"h{i}.test" for i in range(5)]  # in partitions 0, 1, 3, 2, 2 of 4


def page(host: int, n: int, **meta: str) -> Seed:
    return Seed.get(f"https://{HOSTS[host]}/{n}").with_meta(meta)


@pytest.fixture
def storage() -> PartitionedMemoryStorage:
    return PartitionedMemoryStorage(4)


def frontier(storage: PartitionedMemoryStorage, queues: str = "host") -> CoreFrontier:
    return CoreFrontier(storage, crawl="c", clock=ManualClock(), order="fifo", queues=queues,
                        delay=0, max_in_flight=None)  # fmt: skip


def test_the_hosts_fall_in_several_partitions(storage: PartitionedMemoryStorage) -> None:
    f = frontier(storage)
    f.push(page(0, 0))
    crawl = f.storage.view(f.existing_crawl)
    assert crawl is not None
    assert len({storage.partition_of(crawl, h) for h in HOSTS}) == 4


def test_a_batch_over_partitions_is_pushed_popped_and_reported(
    storage: PartitionedMemoryStorage,
) -> None:
    f = frontier(storage)
    assert all(f.push_many([page(h, n) for n in range(3) for h in range(5)]))
    assert [a.reason for a in f.push_many([page(4, 1), page(0, 2)])] == ["duplicate"] * 2
    popped = f.pop_many(100, per_queue=2)
    assert sorted(r.seed.url for r in popped) == sorted(page(h, n).url for h in range(5)
                                                        for n in range(2))  # fmt: skip
    f.report_many([Done(r.seed) for r in popped])
    stats = f.stats()
    assert (stats.admitted, stats.done, stats.queued, stats.in_flight) == (15, 10, 5, 0)
    assert f.pop_many(100, queues=2) and f.stats().in_flight == 2  # two queues served


def test_one_url_pushed_with_two_queue_keys_is_queued_once_where_it_was_claimed_first(
    storage: PartitionedMemoryStorage,
) -> None:
    f = frontier(storage, queues="meta")
    crawl_keys = ("a", "b")  # in partitions 2 and 1
    first, second = (f.push(page(0, 0, queue=key)) for key in crawl_keys)
    assert first and second.reason == "duplicate"
    assert [(q.key, q.queued) for q in f.queues()] == [("a", 1)]
    assert f.url(page(0, 0).url).queue == "a"


def test_a_report_batch_is_atomic_per_partition(storage: PartitionedMemoryStorage) -> None:
    """A seed not in flight fails the unit of its partition: the others commit."""
    f = frontier(storage)
    f.push_many([page(0, 0), page(1, 0)])  # partitions 0 and 1
    a, b = f.pop_many(2)
    f.report(Done(b.seed))
    with pytest.raises(NotInFlight):
        f.report_many([Done(a.seed), Done(b.seed)])
    assert f.url(a.seed.url).state == "done"  # its partition's unit committed
    assert f.stats().done == 2


def test_a_unit_on_one_partition_cannot_reach_another(storage: PartitionedMemoryStorage) -> None:
    f = frontier(storage)
    f.push_many([page(0, 0), page(1, 0)])
    crawl = f.storage.view(f.existing_crawl)
    assert crawl is not None
    assert storage.partition_of(crawl, HOSTS[1]) == 1
    with pytest.raises(PartitionError, match=r"partition 0 reached queue 'h1\.test'"):
        storage.run_in(0, lambda: storage.queue(crawl, HOSTS[1]))
    with pytest.raises(PartitionError, match="needs a unit over every partition"):
        storage.run_in(0, lambda: storage.save_crawl(crawl))
    with pytest.raises(PartitionError, match="cannot open a unit on 1"):
        storage.run_in(0, lambda: storage.run_in(1, lambda: None))
    assert storage.run_in(0, lambda: storage.queue(crawl, HOSTS[0])) is not None


def test_units_on_two_partitions_run_side_by_side(storage: PartitionedMemoryStorage) -> None:
    """A unit paused on partition 0 holds up neither a push nor a pop nor a report on 1; a
    unit over every partition waits for it."""
    f = frontier(storage)
    f.push_many([page(0, 0), page(1, 0)])
    paused, resume, whole_done = threading.Event(), threading.Event(), threading.Event()

    def hold() -> None:
        def unit() -> None:
            paused.set()
            assert resume.wait(60)

        storage.run_in(0, unit)

    holder = threading.Thread(target=hold)
    holder.start()
    assert paused.wait(60)
    try:
        assert f.push(page(1, 1))
        popped = f.pop_many(2, queue=HOSTS[1])
        f.report(Done(popped[0].seed))
        f.extend_lease(popped[1].seed, 60)
        f.schedule(page(1, 2), f.clock() + 5)
        f.block_queue(HOSTS[1], f.clock() + 10)
        assert f.pause_queue(page(1, 3), f.clock() + 20)
        whole = threading.Thread(target=lambda: (storage.run(lambda: None), whole_done.set()))
        whole.start()
        assert not whole_done.wait(0.2)  # (a bound on a negative: it may only pass late)
    finally:
        resume.set()
        holder.join(60)
    whole.join(60)
    assert whole_done.is_set()
    stats = f.stats()
    assert (stats.done, stats.in_flight, stats.scheduled) == (1, 1, 1)
    assert {q.key: q.blocked_until for q in f.queues()}[HOSTS[1]] == f.clock() + 20


def test_a_unit_over_every_partition_writes_no_partitions_data(
    storage: PartitionedMemoryStorage,
) -> None:
    f = frontier(storage)
    f.push(page(1, 0))
    crawl = f.storage.view(f.existing_crawl)
    assert crawl is not None
    q = storage.run(lambda: storage.queue(crawl, HOSTS[1]))  # reads: yes
    assert q is not None
    with pytest.raises(PartitionError, match="a unit over every partition wrote queue"):
        storage.run(lambda: storage.save_queue(crawl, q, None))
    # inside it, a unit on one partition writes that one's
    storage.run(lambda: storage.run_in(1, lambda: storage.save_queue(crawl, q, 5.0)))
    # and a dry run writes anywhere, undone
    storage.scratch(lambda: storage.save_queue(crawl, q, None))
    assert storage.run(lambda: storage.queue(crawl, HOSTS[1])).event == 5.0  # type: ignore[union-attr]


def test_a_move_cut_between_its_two_units_leaves_the_url_in_both_queues(
    storage: PartitionedMemoryStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL moving to a queue of another partition is written there first: a process killed
    before its old queue lets it go crawls it twice, never loses it."""
    from crawlstore.frontier import known

    f = frontier(storage, queues="meta")
    f.push(page(0, 0, queue="a"))  # partition 3
    clock = f.clock

    def killed(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(known, "_leave", killed)
    with pytest.raises(KeyboardInterrupt):
        f.overwrite_many([(page(0, 0, queue="b"), clock() + 5)])  # to partition 1
    assert f.url(page(0, 0).url).queue == "b"
    assert {q.key: (q.queued, q.scheduled) for q in f.queues()} == {"a": (1, 0), "b": (0, 1)}
    monkeypatch.undo()
    f.overwrite_many([(page(0, 0, queue="b"), clock() + 5)])  # done again, whole this time
    assert {q.key: (q.queued, q.scheduled) for q in f.queues()} == {"a": (1, 0), "b": (0, 1)}


def test_a_url_overwritten_twice_in_one_batch_ends_where_the_second_puts_it(
    storage: PartitionedMemoryStorage,
) -> None:
    """As one partition gives it: the overwrites in order, one record at the end."""
    seeds = [page(0, 0, queue=key) for key in ("a", "b", "c")]  # partitions 3, 1, 2
    outcomes = []
    for f in (frontier(storage, queues="meta"), InMemFrontier("fifo", clock=ManualClock(),
                                                              queues="meta", delay=0)):  # fmt: skip
        f.push(seeds[0])
        f.overwrite_many([(seeds[1], None), (seeds[2], 5.0), (seeds[1], 7.0)])
        stats = f.stats()
        outcomes.append(({q.key: (q.queued, q.scheduled) for q in f.queues()}, stats.done,
                         stats.scheduled, f.url(seeds[0].url).queue))  # fmt: skip
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][3] == "b"


def test_a_rolled_back_pop_leaves_its_seed_ready_for_the_next(
    storage: PartitionedMemoryStorage,
) -> None:
    """The partitions' hints are read again after a unit rolls back, not only after one
    commits: a pop taken back leaves the seed where the next pop finds it."""
    f = frontier(storage)
    f.push(page(1, 0))
    with pytest.raises(KeyboardInterrupt), f.transaction():
        assert f.pop_many(1)
        raise KeyboardInterrupt
    assert [r.seed.url for r in f.pop_many(5)] == [page(1, 0).url]


def test_a_claim_left_by_a_rolled_back_push_places_a_later_schedule(
    storage: PartitionedMemoryStorage,
) -> None:
    """A claim is made outside units and outlives one rolled back: the URL's later writes
    go to the queue claimed (first claim wins), never across partitions."""
    f = frontier(storage, queues="meta")
    with pytest.raises(KeyboardInterrupt), f.transaction():
        f.push(page(0, 0, queue="a"))  # claims "a"
        raise KeyboardInterrupt
    assert f.stats().admitted == 0
    f.schedule(page(0, 0, queue="b"), f.clock() + 5)
    assert f.url(page(0, 0).url).queue == "a"
    assert f.stats().scheduled == 1


def test_a_pop_reaps_a_dead_holders_leases_in_a_partition_that_is_not_due(
    storage: PartitionedMemoryStorage,
) -> None:
    dead = frontier(storage)
    dead._owner = (os.getpid(), dead._owner[1] + 1)  # this pid, another start: a reused pid
    dead.push(page(1, 0))
    assert dead.pop_many(1, lease_time=1000)
    alive = frontier(storage)  # the partition's next event is the lease's expiry, far ahead
    assert [r.seed.url for r in alive.pop_many(5)] == [page(1, 0).url]


def test_saving_a_crawl_record_again_keeps_its_created_time(
    storage: PartitionedMemoryStorage,
) -> None:
    """(An import writes the created time of the crawl it loads over the one made for it.)"""
    f = frontier(storage)
    f.push(page(0, 0))
    crawl = storage.crawl("c")
    assert crawl is not None
    storage.run(lambda: storage.save_crawl(CrawlRecord("c", crawl.policy, 123.0)))
    assert storage.crawl("c").created == 123.0  # type: ignore[union-attr]


@pytest.mark.parametrize("refused", ["report", "extend_lease"])
def test_a_refused_write_on_a_crawl_that_does_not_exist_creates_nothing(
    storage: PartitionedMemoryStorage, refused: str
) -> None:
    f = CoreFrontier(storage, crawl="c", clock=ManualClock())  # no policy: nothing made yet
    assert storage.crawls() == []
    seed = page(0, 0).with_lease(Lease(bytes(13), 10.0))
    with pytest.raises(NotInFlight):
        f.report(Done(seed)) if refused == "report" else f.extend_lease(seed)
    assert storage.crawls() == []
