"""Inboxes (``spi.Inboxes``): a push over a storage in partitions is answered from its URLs'
records and inboxes, posted, and folded into its queues by a later unit. Over the memory
storage in partitions and over Redis in partitions (``?partitioned=1``), with two clients on
one store where it matters: a post whose fold never ran (its client killed after the post) is
folded by the next pop; two clients that post one URL at once queue it once; a transaction's
pushes are folded by its process's next read once it commits, or by any process's pop (one in
the transaction too), and never posted when it rolls back; a fold keeps the order of a
client's pushes; a push's fold reads its inbox anew, even where a pop read it ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from crawlstore import Done, Seed, Store
from crawlstore.clock import ManualClock
from crawlstore.frontier import Frontier, partitioned
from crawlstore.storages._partitioned import PartitionedMemoryStorage

Clients = Callable[[], Store]


@pytest.fixture(params=["partitioned", "redis-partitioned"])
def clients(request: pytest.FixtureRequest, clock: ManualClock) -> Iterator[Clients]:
    """Opens another client of one store (over the memory storage: the same storage)."""
    opened: list[Store] = []
    if request.param == "partitioned":
        storage = PartitionedMemoryStorage(4)

        def client() -> Store:
            opened.append(Store(storage, clock))
            return opened[-1]
    else:
        url = request.getfixturevalue("redis_url") + "&partitioned=1"

        def client() -> Store:
            opened.append(Store.open(url, clock=clock))
            return opened[-1]

    yield client
    for store in opened:
        store.close()


def _frontier(store: Store) -> Frontier:
    return store.frontier(queues="host", delay=0, max_in_flight=None)


def _seed(host: int, path: str = "x") -> Seed:
    return Seed.get(f"https://h{host}.example/{path}")


def test_a_post_whose_fold_never_ran_is_folded_by_the_next_pop(
    clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = clients()
    f = _frontier(a)
    f.push(_seed(0, "first"))  # the crawl made
    with monkeypatch.context() as patch:  # killed after its post: the fold never runs
        patch.setattr(partitioned, "fold_posts", lambda core, fps, keys: None)
        assert all(f.push_many([_seed(1), _seed(2)]))
    assert f.url(_seed(1).url).state == "unknown"  # in the inbox: not shown yet
    assert not f.push(_seed(1))  # posted already: a duplicate
    b = clients()
    popped = _frontier(b).pop_many(10)
    assert sorted(r.seed.url for r in popped) == sorted(
        s.url for s in [_seed(0, "first"), _seed(1), _seed(2)]
    )
    stats = _frontier(b).stats()
    assert stats.admitted == 3 and stats.refused == {"duplicate": 1} and stats.in_flight == 3
    assert f.url(_seed(1).url).state == "in_flight"


def test_two_clients_that_post_one_url_at_once_queue_it_once(
    clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = clients(), clients()
    fa, fb = _frontier(a), _frontier(b)
    fa.push(_seed(0, "first"))
    storage: Any = b._storage
    before = storage.look  # b reads before a posts: both are told the URL is new
    seen = []

    def stale(crawl: Any, fps: Any, keys: Any) -> Any:
        seen.append(fps)
        return [(None, False) for _ in fps]

    with monkeypatch.context() as patch:
        patch.setattr(storage, "look", stale)
        assert fa.push(_seed(1)) and fb.push(_seed(1))
    assert seen and storage.look == before
    popped = fb.pop_many(10)
    assert [r.seed.url for r in popped].count(_seed(1).url) == 1
    fb.report_many([Done(r.seed) for r in popped])
    assert fb.pop_many(10) == [] and fa.stats().done == 2


def test_a_transaction_s_pushes_show_to_its_process_once_it_commits(clients: Clients) -> None:
    store = clients()
    f = _frontier(store)
    f.push(_seed(0, "first"))
    assert store.capabilities.inboxes
    with store.transaction():
        assert all(f.push_many([_seed(1), _seed(2)]))
        assert len(f) == 1 and f.url(_seed(1).url).state == "unknown"
        assert not f.push(_seed(1))  # posted in this transaction: a duplicate
        popped = f.pop_many(10)  # a pop folds the transaction's own posts first
        assert sorted(r.seed.url for r in popped) == sorted(
            s.url for s in [_seed(0, "first"), _seed(1), _seed(2)]
        )
    stats = f.stats()
    assert stats.admitted == 3 and stats.in_flight == 3 and stats.refused == {"duplicate": 1}
    with store.transaction():
        f.push(_seed(3))
    other = _frontier(clients())  # another process: not until something folds them
    assert other.url(_seed(3).url).state == "unknown" and len(other) == 3
    assert not other.push(_seed(3))  # a duplicate: in its inbox
    assert f.url(_seed(3).url).state == "queued" and len(f) == 4  # its own read folds them
    assert other.url(_seed(3).url).state == "queued"
    assert f.stats().refused == {"duplicate": 2}


def test_another_process_s_pop_folds_a_transaction_s_pushes(clients: Clients) -> None:
    store = clients()
    f = _frontier(store)
    f.push(_seed(0, "first"))
    with store.transaction():
        f.push(_seed(1))
    other = _frontier(clients())
    assert sorted(r.seed.url for r in other.pop_many(10)) == sorted(
        [_seed(0, "first").url, _seed(1).url]
    )


def test_a_fold_keeps_the_order_of_a_client_s_pushes(clients: Clients) -> None:
    store = clients()
    f = store.frontier("fifo", queues="single")
    with store.transaction():
        for i in range(6):
            f.push(_seed(i % 3, f"p{i}"))
    assert [r.seed.url for r in f.pop_many(6)] == [_seed(i % 3, f"p{i}").url for i in range(6)]


def test_a_transaction_that_rolls_back_posts_nothing(clients: Clients) -> None:
    store = clients()
    f = _frontier(store)
    f.push(_seed(0, "first"))

    class Boom(Exception):
        pass

    with pytest.raises(Boom), store.transaction():
        f.push_many([_seed(1), _seed(2, "y")])
        raise Boom
    assert len(f) == 1 and f.stats().admitted == 1
    assert f.push(_seed(1))  # never posted: new
    assert sorted(r.seed.url for r in f.pop_many(10)) == sorted(
        s.url for s in [_seed(0, "first"), _seed(1)]
    )


def test_an_export_carries_what_a_killed_client_posted(
    clients: Clients, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = clients()
    f = _frontier(a)
    f.push(_seed(0, "first"))
    with monkeypatch.context() as patch:  # killed after its post: the fold never runs
        patch.setattr(partitioned, "fold_posts", lambda core, fps, keys: None)
        assert f.push(_seed(1))
    other = _frontier(clients())
    urls = {Seed.from_record(r["seed"]).url for r in other.export() if r.get("type") == "url"}
    assert urls == {_seed(0, "first").url, _seed(1).url}


def test_a_transaction_may_push_again_a_url_it_pushed_popped_and_reported(
    clients: Clients,
) -> None:
    store = clients()
    f = _frontier(store)
    f.push(_seed(0, "first"))
    with store.transaction():
        assert f.push(_seed(1))
        (ready,) = [r for r in f.pop_many(10) if r.seed.url == _seed(1).url]
        f.report(Done(ready.seed))
        assert f.push(_seed(1))  # done: crawled again
        assert not f.push(_seed(1))  # posted again: a duplicate
    stats = f.stats()
    assert stats.admitted == 3 and stats.queued == 1 and stats.refused == {"duplicate": 1}
    assert _seed(1).url in [r.seed.url for r in f.pop_many(10)]


def test_an_export_after_a_pop_folds_what_another_client_posted_to_buckets_it_passed(
    clients: Clients,
) -> None:
    a, b = clients(), clients()
    fa, fb = _frontier(a), _frontier(b)
    fa.push(_seed(0, "first"))
    storage: Any = a._storage
    crawl = storage.crawl(fa.core.name)
    buckets: dict[int, int] = {}
    for host in range(300):
        buckets.setdefault(storage.partition_of(crawl, fa.queue_for(_seed(host))), host)
    hosts = list(buckets.values())[:2]  # two hosts in two partitions
    for host in hosts:
        fa.push_many([_seed(host, "a"), _seed(host, "b")])
    assert len(fa.pop_many(1)) == 1 and len(fa.pop_many(1)) == 1  # one partition passed by
    with b.transaction():  # another client posts there; nothing folds it
        for host in hosts:
            assert fb.push(_seed(host, "from-b"))
    urls = {Seed.from_record(r["seed"]).url for r in fa.export() if r.get("type") == "url"}
    assert {_seed(host, "from-b").url for host in hosts} <= urls


def test_a_push_after_a_pop_read_its_bucket_ahead_shows_at_once(clients: Clients) -> None:
    store = clients()
    f = _frontier(store)
    storage: Any = store._storage
    f.push(_seed(0, "first"))
    crawl = storage.crawl(f.core.name)
    buckets: dict[int, int] = {}
    for host in range(300):
        buckets.setdefault(storage.partition_of(crawl, f.queue_for(_seed(host))), host)
    hosts = list(buckets.values())[:2]  # two hosts in two partitions
    assert len(f.pop_many(1)) == 1  # (the first)
    f.push_many([_seed(host, "a") for host in hosts])
    (taken,) = f.pop_many(1)  # reads both partitions ahead, takes from one
    other = next(h for h in hosts if _seed(h, "a").url != taken.seed.url)
    assert f.push(_seed(other, "b"))  # its fold reads the inbox anew, not the pop's read
    assert f.url(_seed(other, "b").url).state == "queued"
    assert f.stats().queued == 2
