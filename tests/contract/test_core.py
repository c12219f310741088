"""The crawl's policy in the storage; queue and URL operations that touch only what they name;
views that read and never write."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from lmdbcount import counting

from crawlstore import (
    Defaults,
    Done,
    Failed,
    InMemFrontier,
    ManualClock,
    Ready,
    Seed,
    Store,
    Wait,
)
from crawlstore.errors import InvalidArgument, PolicyConflict, ReadOnlyStore
from crawlstore.frontier import Frontier
from crawlstore.storages._partitioned import PartitionedMemoryStorage
from crawlstore.store import verify

Make = Callable[..., Frontier]


def page(host: str, path: str = "x") -> Seed:
    return Seed.get(f"https://{host}/{path}")


@pytest.fixture(params=["memory", "store", "partitioned"])
def make(request: pytest.FixtureRequest, clock: ManualClock, tmp_path: Path) -> Iterator[Make]:
    """``make(**policy)``: a new crawl's frontier on each storage (the memory storage, a file,
    the memory storage in 4 partitions)."""
    if request.param == "memory":
        yield lambda **policy: InMemFrontier(clock=clock, **policy)
        return
    if request.param == "partitioned":
        with Store(PartitionedMemoryStorage(4), clock) as store:
            yield lambda **policy: store.frontier(**policy)
        return
    with Store.open(tmp_path / "s.lmdb", clock=clock, durability="nosync") as store:
        yield lambda **policy: store.frontier(**policy)


# -- the policy ---------------------------------------------------------------------------------


def test_the_policy_persists_across_reopen(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path, clock=clock) as store:
        f = store.frontier("lifo", queues="host", delay=30, max_in_flight=5, lease_time=45)
        f.push_many([page("a.test", str(i)) for i in range(3)] + [page("b.test")])
    with Store.open(path, clock=clock) as store:
        f = store.frontier()  # no arguments: the stored policy
        policy = f.core.policy
        assert (policy.order, policy.queues, policy.delay) == ("lifo", "host", 30)
        assert (policy.max_in_flight, policy.lease_time) == (5, 45)
        first, second = f.pop(), f.pop()
        assert isinstance(first, Ready) and isinstance(second, Ready)
        assert {first.seed.url, second.seed.url} == {"https://a.test/2", "https://b.test/x"}
        assert first.lease is not None and first.lease.expires == clock() + 45
        assert f.pop() == Wait(clock() + 30)  # a.test waits its delay: the host queue is kept
        with pytest.raises(PolicyConflict, match="queues='host'"):
            store.frontier(queues="single")
        with pytest.raises(PolicyConflict, match="order='lifo'"):
            store.frontier("fifo")
        store.frontier(delay=5)  # a changed delay is stored...
    with Store.open(path, clock=clock) as store:
        f = store.frontier()
        assert f.core.policy.delay == 5  # ...durably
        assert f.pop() == Wait(clock() + 30)  # a queue waiting out the old delay finishes it
        clock.advance(30)
        assert isinstance(f.pop(), Ready)
        assert f.pop() == Wait(clock() + 5)  # then the new delay holds


def test_views_already_open_see_a_changed_policy(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s.lmdb", clock=clock) as store:
        f = store.frontier(queues="host", delay=0)
        f.push_many([page("a.test", "1"), page("a.test", "2")])
        first = f.pop()
        assert isinstance(first, Ready)
        f.report(Done(first.seed))
        store.frontier(delay=60)  # another view, or another process, raises the delay
        assert f.pop() == Wait(clock() + 60)


def test_per_queue_settings_before_the_queue_exists(make: Make, clock: ManualClock) -> None:
    f = make(queues="host", delay=0)
    info = f.set_queue("slow.test", delay=10, max_in_flight=1, limit=2)
    assert (info.delay, info.max_in_flight, info.limit, info.queued) == (10, 1, 2, 0)
    assert [q.key for q in f.queues()] == ["slow.test"]
    f.block_queue("late.test", clock() + 100)
    f.push_many([page("slow.test", str(i)) for i in range(4)] + [page("late.test")])
    first = f.pop()
    assert isinstance(first, Ready) and first.seed.url == "https://slow.test/0"
    f.report(Done(first.seed))
    assert f.pop() == Wait(clock() + 10)  # the delay set before the first seed arrived
    clock.advance(10)
    second = f.pop()
    assert isinstance(second, Ready)
    f.report(Failed(second.seed, reason="gone"))
    clock.advance(100)
    last = f.pop()  # slow.test reached its limit of 2 finished: only late.test is left
    assert isinstance(last, Ready) and last.seed.url == "https://late.test/x"
    assert not f.pop_many(10)
    info = f.queue("slow.test")
    assert info is not None and info.queued == 2 and info.counts["done"] == 1


def test_per_queue_settings_persist(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path, clock=clock) as store:
        store.frontier(queues="host").set_queue("a.test", delay=7, max_in_flight=3, limit=9)
    with Store.open(path, clock=clock) as store:
        info = store.frontier().queue("a.test")
        assert info is not None and (info.delay, info.max_in_flight, info.limit) == (7, 3, 9)
        assert info.created == clock()


def test_the_three_levels(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s.lmdb", clock=clock) as store:
        assert store.defaults() == Defaults()
        store.set_defaults(delay=20, lease_time=90, max_in_flight=None)
        inherit = store.frontier(crawl="inherit", queues="host")
        own = store.frontier(crawl="own", queues="host", delay=3)
        for f in (inherit, own):
            f.push_many([page("a.test", "1"), page("a.test", "2"), page("b.test")])
        own.set_queue("b.test", delay=1)
        popped = inherit.pop_many(10)
        assert len(popped) == 2 and popped[0].lease.expires == clock() + 90
        assert inherit.pop() == Wait(clock() + 20)  # the store-wide delay
        assert len(own.pop_many(10)) == 2 and own.pop() == Wait(clock() + 3)
        own.push(page("b.test", "2"))
        assert own.pop() == Wait(clock() + 1)  # b.test's own delay
        with pytest.raises(InvalidArgument):
            store.set_defaults(delay=-1)
        with pytest.raises(InvalidArgument):
            store.set_defaults(lease_time=0)
        assert store.defaults().delay == 20  # a refused change changes nothing


def test_a_view_never_creates_a_crawl(make: Make, tmp_path: Path) -> None:
    with Store.open(tmp_path / "v.lmdb") as store:
        store.frontier(crawl="typo")
        store.seen(crawl="typo")
        store.validators(crawl="typo")
        assert Seed.get("https://a.test/").fingerprint not in store.seen(crawl="typo")
        assert store.frontier(crawl="typo").stats().admitted == 0
        assert store.crawls() == []
        store.frontier(crawl="real").push(page("a.test"))
        assert store.crawls() == ["real"]


def test_a_crawl_begun_by_its_seen_set_takes_its_frontiers_policy(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        store.seen().insert(page("a.test").fingerprint)
        assert store.crawls() == ["default"]
        f = store.frontier("fifo", queues="host", delay=2)
        f.push(page("b.test"))
        policy = store.frontier().core.policy
        assert (policy.order, policy.queues, policy.delay) == ("fifo", "host", 2)
        assert len(store.seen()) == 1


# -- queue and URL operations touch only what they name -----------------------------------------


def _fill(store: Store, crawl: str, hosts: int) -> Frontier:
    f = store.frontier(crawl=crawl, queues="host")
    with store.transaction():
        for i in range(hosts):
            f.push_many([page(f"h{i:05}.test", "1"), page(f"h{i:05}.test", "2")])
        for ready in f.pop_many(hosts // 2):
            f.report(Done(ready.seed, status=200))
    return f


def _costs(store: Store, f: Frontier) -> dict[str, int]:
    """Cursor moves and point reads of each operation on one queue or one URL of ``f``."""
    ops: dict[str, Callable[[], object]] = {
        "queue": lambda: f.queue("h00003.test"),
        "queues page": lambda: f.queues(after="h00010.test", limit=20),
        "count": lambda: (f.count(), f.count(state="done"), f.count(queue="h00004.test")),
        "url": lambda: f.url("https://h00005.test/1"),
        "urls page": lambda: f.urls(queue="h00006.test", limit=10),
        "urls of the crawl": lambda: f.urls(limit=20),
        "purge a queue": lambda: f.purge(before=1e18, queue="h00007.test"),
        "delete a queue": lambda: f.delete_queue("h00008.test"),
        "stats": f.stats,
    }
    costs = {}
    for name, op in ops.items():
        with counting(store) as counts:
            op()
        costs[name] = sum(counts.values())
    return costs


def test_queue_and_url_operations_touch_only_what_they_name(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        small = _costs(store, _fill(store, "small", 60))
        large = _costs(store, _fill(store, "large", 2000))
        _fill(store, "other", 500)  # another crawl in the file
        after = _costs(store, store.frontier(crawl="large"))
    for name, cost in small.items():
        assert cost <= 60, (name, cost)  # a handful of reads: a page, or one queue's keys
        assert large[name] <= cost + 4, (name, small, large)  # independent of the crawl's size
        assert after[name] <= cost + 4, (name, small, after)


def test_deleting_a_crawl_walks_only_that_crawl(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        _fill(store, "big", 1000)
        _fill(store, "doomed", 10)
        with counting(store) as counts:
            assert store.delete_crawl("doomed") == 20
        assert sum(counts.values()) <= 20 * 2 * 12, counts  # each of its keys, a few times
        assert store.crawls() == ["big"] and store.frontier(crawl="big").count() == 2000


def test_counts_need_no_scan(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        f = _fill(store, "c", 300)
        with counting(store) as counts:
            assert f.count() == 600 and f.count(state="done") == 150
            assert f.count(state="queued") == 450 and f.count(queue="h00001.test") == 2
        assert sum(counts.values()) <= 16, counts  # a few records, whatever the crawl's size
        with counting(store) as counts:
            assert f.count(contains="h00001.") == 2  # a filter is a scan, and says so
        assert sum(counts.values()) >= 600


# -- views that read do not write ---------------------------------------------------------------


def test_a_read_only_store_lists_counts_and_verifies(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path, clock=clock) as store:
        f = store.frontier(queues="host", lease_time=10)
        f.push_many([page("a.test"), page("b.test")])
        assert isinstance(f.pop(), Ready)  # in flight, leased to this process
        store.seen().insert(page("a.test").fingerprint)
    clock.advance(60)  # the lease expired: a writer would put the seed back
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", _READER, str(path), str(clock())], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "1", "1", "a.test,b.test", "2", "1", "ok"]
    assert path.read_bytes() == before  # the read-only views changed nothing
    assert verify(path) == []


_READER = """
import sys
from crawlstore import ManualClock, Store
from crawlstore.errors import ReadOnlyStore
from crawlstore.store import verify
with Store.open(sys.argv[1], readonly=True, clock=ManualClock(float(sys.argv[2]))) as store:
    f = store.frontier()  # would reap the expired lease if it could write: it must not try
    s = f.stats()
    print(len(f), s.queued, s.in_flight, ",".join(q.key for q in f.queues()), f.count(),
          len(store.seen()))
    try:
        f.reap()
    except ReadOnlyStore:
        print("ok")
"""


def test_a_read_only_frontier_does_not_reap(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path, clock=clock) as store:
        f = store.frontier(lease_time=10)
        f.push(page("a.test"))
        assert isinstance(f.pop(), Ready)
    clock.advance(60)
    with Store.open(path, readonly=True, clock=clock) as reader:
        view = reader.frontier()
        assert view.stats().in_flight == 1 and view.url("https://a.test/x").state == "in_flight"
        with pytest.raises(ReadOnlyStore):
            view.pop()
        assert view.stats().in_flight == 1


# -- counting URLs by state ---------------------------------------------------------------------


def test_counts_by_state_follow_each_url(make: Make, clock: ManualClock) -> None:
    from crawlstore.revisit import RevisitTags, revisit

    class Tag(RevisitTags):
        PAGE = revisit("60s")

    core = make(queues="host", max_in_flight=None)
    f = core.revisit(Tag)
    f.push_many([page("a.test", "1").with_tag(Tag.PAGE), page("a.test", "2"), page("b.test")])
    for ready in f.pop_many(10):
        f.report(Done(ready.seed) if "b.test" not in ready.seed.url else Failed(ready.seed))
    # a.test/1 is scheduled for its revisit, a.test/2 is done, b.test failed
    assert (core.count(state="scheduled"), core.count(state="done")) == (1, 1)
    assert core.count(state="failed") == 1 and core.count() == 3
    assert core.count(queue="a.test", state="done") == 1
    clock.advance(61)
    again = f.pop()
    assert isinstance(again, Ready)
    f.report(Done(again.seed))  # visited twice: two done reports, still one URL
    assert core.stats().done == 3 and core.count() == 3
    core.push(page("b.test"))  # a failed URL pushed again is queued again
    assert (core.count(state="failed"), core.count(state="queued"), core.count()) == (0, 1, 3)
    with pytest.raises(InvalidArgument, match="no URL state"):
        core.count(state="finished")


def test_purge_forgets_old_urls_in_batches(make: Make, clock: ManualClock) -> None:
    f = make(queues="host", max_in_flight=None)
    f.push_many([page(f"h{i % 7}.test", str(i)) for i in range(2500)])
    for ready in f.pop_many(300):
        f.report(Done(ready.seed))
    clock.advance(10)
    f.push_many([page("new.test", str(i)) for i in range(5)])
    held = f.pop_many(2500)  # some old ones in flight as they are purged
    assert f.purge(before=clock() - 5) == 2500
    assert f.count() == 5 and f.count(state="done") == 0
    assert {u.queue for u in f.urls(limit=100)} == {"new.test"}
    assert sum(q.queued + q.in_flight for q in f.queues()) == 5
    with pytest.raises(Exception, match="not in flight"):
        f.report(Done(next(r.seed for r in held if "h" in r.seed.url.split("/")[2][:1])))
    assert f.purge(before=clock() + 1, queue="new.test") == 5 and f.count() == 0


def test_the_store_pops_again_at_the_same_instant(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000.0004)  # not a whole millisecond
    with Store.open(tmp_path / "s.lmdb", clock=clock) as store:
        f = store.frontier("fifo")
        f.push_many([page("a.test", str(i)) for i in range(3)])
        assert all(isinstance(f.pop(), Ready) for _ in range(3))
        g = store.frontier(crawl="delayed", queues="host", delay=0.0005, max_in_flight=None)
        g.push_many([page("a.test", str(i)) for i in range(2)])
        assert isinstance(g.pop(), Ready)
        wait = g.pop()
        assert isinstance(wait, Wait) and wait.until >= clock() + 0.0005
        clock.advance(wait.until - clock())
        assert isinstance(g.pop(), Ready)  # never early, and never a wait that does not end
