"""Regression tests for defects a review of the frontier core found, each reproduced first."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlstore import Done, Failed, InMemFrontier, ManualClock, Ready, Seed, Store
from crawlstore.errors import InvalidArgument, InvalidSnapshot, PolicyConflict
from crawlstore.frontier import Frontier
from crawlstore.revisit import RevisitTags, revisit


def page(path: str, host: str = "e.test") -> Seed:
    return Seed.get(f"https://{host}/{path}")


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[Store]:
    with Store.open(tmp_path / "s.lmdb", clock=clock, durability="nosync") as s:
        yield s


def test_a_loaded_lifo_crawl_pops_and_pushes(store: Store, clock: ManualClock) -> None:
    """A lifo seed's place counts down from 2**64: loading it must not push the crawl's
    sequence there (every later pop and push overflowed)."""
    original = store.frontier("lifo", crawl="src")
    original.push_many([page(str(i)) for i in range(3)])
    records = list(store.export(crawl="src"))
    for target in (InMemFrontier("lifo", clock=clock), store.frontier(crawl="copy")):
        if isinstance(target, InMemFrontier):
            target.load(records)
        else:
            store.load(records, crawl="copy")
        first = target.pop()
        assert isinstance(first, Ready) and first.seed.url == "https://e.test/2"
        assert target.push(page("new"))
        second = target.pop()
        assert isinstance(second, Ready) and second.seed.url == "https://e.test/new"


def test_a_failed_load_never_deletes_what_was_there(store: Store) -> None:
    store.frontier(crawl="src").push(page("a"))
    cut = list(store.export(crawl="src"))[:-1]  # no end record
    store.frontier(crawl="policy", queues="host", delay=5)  # a crawl with only its policy
    store.seen(crawl="seen", bloom=(100, 0.01)).insert(page("a").fingerprint)
    store.frontier(crawl="state").core.state("tag_backoff")["news"] = 5000.0
    for name in ("policy", "seen", "state"):
        with pytest.raises((InvalidSnapshot, InvalidArgument)):
            store.load(cut, crawl=name)
    policy = store.frontier(crawl="policy").core.policy
    assert (policy.queues, policy.delay) == ("host", 5)
    assert page("a").fingerprint in store.seen(crawl="seen", bloom=(100, 0.01))
    assert dict(store.frontier(crawl="state").core.state("tag_backoff")) == {"news": 5000.0}
    memory = InMemFrontier(queues="host", delay=2)
    with pytest.raises(InvalidSnapshot):
        memory.load(cut)
    assert (memory.core.policy.queues, memory.core.policy.delay) == ("host", 2)  # as it was


@pytest.mark.parametrize("name", ["delay", "lease_time"])
def test_store_wide_none_is_refused(store: Store, name: str) -> None:
    with pytest.raises(InvalidArgument, match="not None"):
        store.set_defaults(**{name: None})
    f = store.frontier()
    f.push(page("a"))
    assert isinstance(f.pop(), Ready)


def test_an_export_in_progress_hides_no_later_write(store: Store) -> None:
    """The export's snapshot is used only for its own records: this thread's other reads see
    what is committed, and the export may be finished in another thread."""
    f = store.frontier()
    f.push_many([page(str(i)) for i in range(3)])
    records = store.export()
    assert next(records)["type"] == "crawl"
    f.push(page("new"))
    assert f.url("https://e.test/new").state == "queued" and f.stats().queued == 4
    rest: list[object] = []
    worker = threading.Thread(target=lambda: rest.extend(records))
    worker.start()
    worker.join()
    assert [r["type"] for r in rest] == ["queue", "url", "url", "url", "end"]  # its 3 URLs
    assert f.stats().queued == 4 and f.push(page("after"))


def test_an_export_does_not_stall_another_task(store: Store) -> None:
    f = store.frontier()
    f.push_many([page(str(i)) for i in range(50)])

    async def main() -> str:
        async def export() -> int:
            n = 0
            for _ in store.export():
                n += 1
                await asyncio.sleep(0)
            return n

        async def work() -> str:
            await asyncio.sleep(0)
            f.push(page("new"))
            return f.url("https://e.test/new").state

        n, state = await asyncio.gather(export(), work())
        assert n == 53  # crawl, queue, 50 URLs, end
        return state

    assert asyncio.run(main()) == "queued"


def test_a_memory_export_holds_no_lock_between_records() -> None:
    memory = InMemFrontier()
    memory.push_many([page(str(i)) for i in range(3)])
    records = memory.export()
    next(records)
    pushed: list[bool] = []
    other = threading.Thread(target=lambda: pushed.append(bool(memory.push(page("x")))))
    other.start()
    other.join(timeout=5)
    assert pushed == [True]
    list(records)


def test_a_url_stays_in_its_first_queue(tmp_path: Path, clock: ManualClock) -> None:
    from crawlstore import register_queue_key

    register_queue_key("by-tag", lambda seed: seed.tag or "untagged")
    with Store.open(tmp_path / "t.lmdb", clock=clock) as store:
        f = store.frontier(queues="by-tag")
        f.push(page("p").with_tag("a"))
        ready = f.pop()
        assert isinstance(ready, Ready)
        f.report(Done(ready.seed))
        assert f.push(page("p").with_tag("b"))  # finished: queued again, in queue "a"
        assert (f.count(queue="a"), f.count(queue="b")) == (1, 0)
        assert [u.url for u in f.urls(queue="a")] == ["https://e.test/p"]
        again = f.pop()
        assert isinstance(again, Ready) and again.seed.tag == "b"


@pytest.mark.parametrize("kind", ["memory", "store"])
def test_a_queue_limit_caps_what_is_in_flight(kind: str, tmp_path: Path) -> None:
    clock = ManualClock(1000)
    f: Frontier = (InMemFrontier(clock=clock) if kind == "memory" else
                   Store.open(tmp_path / "l.lmdb", clock=clock).frontier())  # fmt: skip
    f.set_queue("", limit=2)
    f.push_many([page(str(i)) for i in range(6)])
    handed = f.pop_many(10)
    assert len(handed) == 2
    f.report_many([Done(r.seed) for r in handed])
    assert f.pop().__class__.__name__ == "_Empty"  # only limited work is left: never due
    assert f.next_seed(timeout=0, sleep=clock.sleep) is None


def test_the_policy_is_checked_where_it_is_written(store: Store) -> None:
    store.frontier(crawl="x").push(page("a"))
    records = store.export(crawl="x")
    next(records)  # an export open in this thread
    store.frontier(crawl="b").push(page("a"))  # b: one queue, no delay
    with pytest.raises(PolicyConflict):
        store.frontier(crawl="b", queues="host", delay=30)
    store.frontier(crawl="b", delay=30)
    records.close()
    assert store.frontier(crawl="b").core.policy.delay == 30


def test_a_view_made_before_its_crawl_follows_it(store: Store, clock: ManualClock) -> None:
    early = store.frontier(crawl="c")  # nothing yet
    store.frontier(crawl="c", queues="host")  # another view creates it with host queues
    assert early.queue_for(page("x", "h.test")) == "h.test"
    assert early.pause_queue(page("x", "h.test"), clock() + 60)
    info = early.queue("h.test")
    assert info is not None and info.blocked_until == clock() + 60


def test_an_unsettled_crawl_stays_unsettled_through_an_export(store: Store) -> None:
    store.seen(crawl="s").insert(page("a").fingerprint)
    store.load(store.export(crawl="s"), crawl="copy")
    assert store.frontier(crawl="copy", queues="host").core.policy.queues == "host"


@pytest.mark.parametrize(
    "field, value",
    [("delay", [1]), ("cap", 0), ("cap", "x"), ("limit", "3"), ("key", None), ("blocked", "z")],
)
def test_a_malformed_queue_record_is_refused(store: Store, field: str, value: object) -> None:
    store.frontier(queues="host").push(page("a"))
    records = list(store.export())
    queue = next(r for r in records if r["type"] == "queue")
    queue[field] = value
    with pytest.raises(InvalidSnapshot):
        store.load(records, crawl="copy")
    assert store.crawls() == ["default"]


@pytest.mark.parametrize("order", [["x"], [1, 2], [-1, 1, 5], [0, 1, -5]])
def test_a_malformed_place_is_refused(store: Store, order: object) -> None:
    store.frontier().push(page("a"))
    records = list(store.export())
    url = next(r for r in records if r["type"] == "url")
    url["order"] = order
    with pytest.raises(InvalidSnapshot):
        store.load(records, crawl="copy")
    with pytest.raises(InvalidSnapshot):
        store.load([*records[:-1], ["not", "a", "dict"], records[-1]], crawl="copy")


def test_the_last_outcome_keeps_how_the_visit_ended(store: Store, clock: ManualClock) -> None:
    class Tag(RevisitTags):
        PAGE = revisit("60s")

    f = store.frontier().revisit(Tag)
    f.push(page("a").with_tag(Tag.PAGE))
    ready = f.pop()
    assert isinstance(ready, Ready)
    f.report(Failed(ready.seed, reason="dns"))
    status = f.url("https://e.test/a")
    assert status.state == "scheduled" and status.outcome is not None
    assert (status.outcome.state, status.outcome.reason) == ("failed", "dns")


def test_deleting_a_crawl_drops_its_cached_bloom_chunks(store: Store) -> None:
    with store.transaction():
        store.seen(crawl="x", bloom=(1000, 0.01)).insert(b"a" * 16)
        store.delete_crawl("x")
    assert store.crawls() == []
    engine = store._storage.engine
    rows = engine.read(lambda txn: list(txn.cursor(db=engine.dbs["bloom"])))
    assert rows == []


@pytest.mark.parametrize("kind", ["memory", "store"])
def test_a_seed_handed_out_shares_nothing_with_what_is_stored(kind: str, tmp_path: Path) -> None:
    f: Frontier = (
        InMemFrontier() if kind == "memory" else Store.open(tmp_path / "m.lmdb").frontier()
    )
    f.push(page("a").with_meta({"trail": ["a"]}))
    ready = f.pop()
    assert isinstance(ready, Ready)
    ready.seed.meta["trail"].append("changed by the caller")
    assert f.url("https://e.test/a").meta == {"trail": ["a"]}
    assert next(r for r in f.core.export() if r["type"] == "url")["seed"][-1] == {"trail": ["a"]}


def test_the_store_releases_schedules_and_leases_at_their_exact_time(tmp_path: Path) -> None:
    """Keys hold times in whole milliseconds: a schedule or a lease expiry inside the current
    millisecond is released at its time, as in memory, not up to a millisecond late."""
    for kind in ("memory", "store"):
        clock = ManualClock(1000.0)
        lease = {"lease_time": 0.0004}
        f: Frontier = (InMemFrontier(clock=clock, **lease) if kind == "memory" else
                       Store.open(tmp_path / "x.lmdb", clock=clock).frontier(**lease))  # fmt: skip
        f.push(page("a"))
        assert isinstance(f.pop(), Ready)
        clock.advance(0.0002)
        assert not isinstance(f.pop(), Ready), kind  # not yet expired
        clock.advance(0.0003)
        assert isinstance(f.pop(), Ready), kind  # expired at 1000.0004: in flight again
        f.core.schedule(page("b"), clock() + 0.0003)
        clock.advance(0.0003)
        popped = [r.seed.url for r in f.pop_many(5)]
        assert "https://e.test/b" in popped, kind
