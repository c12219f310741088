"""Group commit: ``frontier.worker()`` and ``frontier.async_worker()`` over every storage."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import MakeFrontier, path_of, seed

from crawlstore import Done, ManualClock, Ready, Seed, Store, Validator, Worker
from crawlstore.errors import InvalidArgument, NotInFlight, StoreError
from crawlstore.frontier.protocol import Reschedule


def links(n: int, k: int) -> list[Seed]:
    return [seed(f"p{n}/{i}") for i in range(k)]


def test_units_of_callers_waiting_together_commit_as_one_group(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:  # default durability: an fsync a commit
        frontier = store.frontier("fifo").dedup_with(store.seen())
        frontier.push_many(links(0, 40))
        with frontier.worker(prefetch=40) as worker:
            got = [worker.next() for _ in range(40)]
            assert all(isinstance(r, Ready) for r in got)
            gate = threading.Event()
            hold = worker.submit(gate.wait)  # keeps the writer busy while the units queue up
            before = store._storage.engine.env.info()["last_txnid"]
            futures = [worker.finish(Done(r.seed), links(n + 1, 3)) for n, r in enumerate(got) if r]
            gate.set()
            results = [f.result(timeout=10) for f in futures]
            assert hold.result(timeout=10) is True
            commits = store._storage.engine.env.info()["last_txnid"] - before
        assert all(len(r) == 3 and all(r) for r in results)
        assert commits <= 2  # the held unit's group, then the 40 units' group
        assert frontier.stats().done == 40 and frontier.stats().admitted == 40 + 120


def test_a_failing_unit_rolls_back_alone(make_frontier: MakeFrontier) -> None:
    frontier = make_frontier().dedup()
    frontier.push_many(links(0, 2))
    with frontier.worker(prefetch=2) as worker:
        a, b = worker.next(), worker.next()
        assert a is not None and b is not None
        gate = threading.Event()
        worker.submit(gate.wait)

        def boom() -> None:
            frontier.push(seed("from-the-failed-unit"))
            raise ValueError("the unit fails")

        good = worker.finish(Done(a.seed), [seed("kept")])
        bad = worker.submit(boom)
        twice = worker.finish(Done(a.seed), [seed("never")])  # its lease ended just before
        other = worker.finish(Done(b.seed))
        gate.set()
        assert good.result(timeout=10) == [good.result()[0]] and good.result()[0]
        with pytest.raises(ValueError, match="the unit fails"):
            bad.result(timeout=10)
        with pytest.raises(NotInFlight):
            twice.result(timeout=10)
        assert other.result(timeout=10) == []
    urls = {s.url.rsplit("/", 1)[1] for s in frontier.snapshot()}
    assert urls == {"kept"}  # nothing of the failed units, everything of the others
    assert frontier.stats().done == 2


def test_prefetch_never_takes_more_than_politeness_allows(tmp_path: Path) -> None:
    clock = ManualClock()
    with Store.open(tmp_path / "s.lmdb", clock=clock, durability="nosync") as store:
        frontier = store.frontier("fifo", queues="host")  # one seed of a host in flight
        frontier.push_many(
            [Seed.get(f"https://h{h}.example/{i}") for h in range(3) for i in range(10)]
        )
        with frontier.worker(prefetch=64) as worker:
            first = [worker.next(timeout=10) for _ in range(3)]
            assert {r.seed.url.split("/")[2] for r in first if r} == {
                "h0.example", "h1.example", "h2.example"}  # fmt: skip
            assert frontier.stats().in_flight == 3  # prefetching took no more than that
            with pytest.raises(TimeoutError):
                worker.next(timeout=0.2)  # a fourth waits for a host's seed to finish
            for r in first:
                assert r is not None
                worker.finish(Done(r.seed)).result(timeout=10)
            assert worker.next(timeout=10) is not None


def test_next_is_none_once_the_crawl_is_finished(make_frontier: MakeFrontier) -> None:
    frontier = make_frontier().dedup()
    frontier.push(seed("0"))
    done = []
    with frontier.worker(prefetch=8) as worker:
        for ready in worker:  # each page links to the next, up to page 20
            n = int(ready.seed.url.rsplit("/", 1)[1])
            done.append(n)
            worker.finish(Done(ready.seed), [seed(str(n + 1))] if n < 20 else [])
    assert done == list(range(21))
    assert frontier.stats().done == 21 and len(frontier) == 0


def test_idle_ends_a_pass_while_later_seeds_wait(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    frontier = make_frontier()
    frontier.push_many([seed("a"), seed("b")])
    seen = []
    with frontier.worker(prefetch=4, idle=5.0, poll=0.01) as worker:
        for ready in worker:
            seen.append(path_of(ready))
            if seen == ["a"]:  # due in 2 s: within idle, the pass waits for it
                worker.finish(Reschedule(ready.seed, clock() + 2.0)).result()
                clock.advance(2.0)
                worker.wake()
            elif ready.seed.url.endswith("/b"):  # due in 60 s: after idle, the pass ends
                worker.finish(Reschedule(ready.seed, clock() + 60.0)).result()
            else:
                worker.finish(Done(ready.seed)).result()
    assert seen == ["a", "b", "a"]
    stats = frontier.stats()
    assert (stats.done, stats.scheduled, stats.in_flight) == (1, 1, 0)  # b waits for a later run
    with pytest.raises(InvalidArgument, match="idle"):
        frontier.worker(idle=-1)


def test_try_next_never_waits_and_keeps_seeds_leased_ahead(make_frontier: MakeFrontier) -> None:
    frontier = make_frontier()
    frontier.push_many([seed("a"), seed("b"), seed("c")])
    with frontier.worker(prefetch=2) as worker:
        assert worker.try_next() is None  # nothing leased yet: it does not wait for one
        worker.submit(lambda: None).result()  # a group commit: it leased ahead in it
        first = worker.try_next()
        assert path_of(first) == "a" and frontier.stats().in_flight == 2  # prefetch, no more
        assert first is not None
        worker.finish(Done(first.seed)).result()
        got = [path_of(worker.try_next()), path_of(worker.try_next())]
        assert got == ["b", "c"] and not worker.finished
        assert worker.try_next() is None
    assert frontier.stats().in_flight == 2  # handed out, not finished: they keep their leases


def test_close_gives_back_seeds_never_handed_out(make_frontier: MakeFrontier) -> None:
    frontier = make_frontier()
    frontier.push_many(links(0, 10))
    with frontier.worker(prefetch=10) as worker:
        held = worker.next()
        assert held is not None
        assert frontier.stats().in_flight == 10  # leased ahead
    stats = frontier.stats()
    assert stats.in_flight == 1 and stats.queued == 9 and stats.cancelled == 9
    frontier.report(Done(held.seed))  # the one handed out keeps its lease


def test_validators_join_the_unit(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        frontier = store.frontier()
        validators = store.validators()
        frontier.push(seed("page"))
        with frontier.worker(validators=validators) as worker:
            ready = worker.next()
            assert ready is not None
            worker.finish(Done(ready.seed), validator=Validator(etag='"v1"')).result(10)
        assert validators.get(ready.seed.fingerprint) == Validator(etag='"v1"')
        with frontier.worker() as worker, pytest.raises(InvalidArgument, match="validators"):
            worker.finish(Done(ready.seed), validator=Validator(etag='"v2"'))


def test_a_lease_brings_its_stored_validator_read_on_the_writer_thread(tmp_path: Path) -> None:
    """A caller that must not read the store (Scrapy's reactor thread) gets a leased page's
    stored validator from the worker, which read it in the lease's transaction."""
    import threading

    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        frontier = store.frontier()
        validators = store.validators()
        frontier.push_many([seed("old"), seed("new")])
        validators.put(seed("old").fingerprint, Validator(etag='"v1"'))
        reads: list[str] = []
        get = validators.get

        def spied(fp: bytes) -> Validator | None:
            reads.append(threading.current_thread().name)
            return get(fp)

        validators.get = spied  # type: ignore[method-assign]
        with frontier.worker(validators=validators) as worker:
            readies = {r.seed.url: r for r in (worker.next(), worker.next()) if r is not None}
            old, new = readies[seed("old").url], readies[seed("new").url]
            assert worker.stored_validator(old) == Validator(etag='"v1"')
            assert worker.stored_validator(old) is None  # once a seed
            assert worker.stored_validator(new) is None  # nothing stored
            for ready in (old, new):
                worker.finish(Done(ready.seed)).result(10)
        assert reads and set(reads) == {"crawlstore-writer"}


def test_a_closed_worker_refuses_work(make_frontier: MakeFrontier) -> None:
    frontier = make_frontier()
    worker = frontier.worker()
    worker.close()
    with pytest.raises(StoreError, match="closed"):
        worker.next()
    with pytest.raises(InvalidArgument):
        frontier.worker(prefetch=0)


def test_async_worker_with_many_tasks(make_frontier: MakeFrontier) -> None:
    frontier = make_frontier().dedup()
    frontier.push_many(links(0, 16))
    admitted: list[int] = []

    async def task(worker: object) -> None:
        async for ready in worker:  # type: ignore[attr-defined]
            depth = ready.seed.depth
            found = (
                []
                if depth >= 2
                else [s.with_depth(depth + 1) for s in links(hash(ready.seed.url) % 10**6, 2)]
            )
            result = await worker.finish(Done(ready.seed), found)  # type: ignore[attr-defined]
            admitted.append(sum(bool(a) for a in result))

    async def main() -> None:
        async with frontier.async_worker(prefetch=8) as worker:
            await asyncio.gather(*[task(worker) for _ in range(8)])

    asyncio.run(main())
    stats = frontier.stats()
    assert stats.queued == stats.in_flight == 0
    assert stats.done == stats.admitted == 16 + sum(admitted)


def _batches(worker: Worker) -> list[int]:
    """The sizes of the batches of pages the worker writes from now on, as they are written."""
    batches: list[int] = []
    write = worker._write_pages
    worker._write_pages = lambda pages: batches.append(len(pages)) or write(pages)  # type: ignore[method-assign]
    return batches


def _queued_behind_a_held_writer(worker: Worker, build: Callable[[], list[Any]]) -> list[Any]:
    """Queue the units ``build()`` makes while the writer is held, so that they form one group
    of their own (pages only: the fused path), then let it go."""
    started, gate = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        gate.wait()

    worker.submit(hold)
    assert started.wait(10)  # the writer runs it: what is queued now waits for the next group
    futures = build()
    gate.set()
    return futures


def test_a_group_of_pages_gives_each_page_its_own_admissions(
    make_frontier: MakeFrontier,
) -> None:
    frontier = make_frontier().dedup()
    frontier.push_many(links(0, 3))
    with frontier.worker(prefetch=3) as worker:
        a, b, c = (worker.next() for _ in range(3))
        assert a and b and c
        batches = _batches(worker)
        x, y, z = seed("x"), seed("y"), seed("z")
        fa, fb, fc = _queued_behind_a_held_writer(
            worker,
            lambda: [
                worker.finish(Done(a.seed), [x, y]),
                worker.finish(Done(b.seed), [y, z, y]),
                worker.finish(Done(c.seed)),
            ],
        )
        assert [bool(r) for r in fa.result(10)] == [True, True]
        assert [bool(r) for r in fb.result(10)] == [False, True, False]  # y seen, z new, y again
        assert fc.result(10) == []
        assert batches == [3]  # the three pages ran as one batch
    stats = frontier.stats()
    assert stats.done == 3 and stats.queued == 3 and stats.refused == {"duplicate": 2}


def test_a_failing_page_in_a_group_of_pages_fails_alone(make_frontier: MakeFrontier) -> None:
    frontier = make_frontier().dedup()
    frontier.push_many(links(0, 2))
    with frontier.worker(prefetch=2) as worker:
        a, b = worker.next(), worker.next()
        assert a and b
        first, again, other = _queued_behind_a_held_writer(
            worker,
            lambda: [
                worker.finish(Done(a.seed), [seed("one")]),
                worker.finish(Done(a.seed), [seed("two")]),  # its lease ends just before
                worker.finish(Done(b.seed), [seed("three")]),
            ],
        )
        assert first.result(10)[0] and other.result(10)[0]
        with pytest.raises(NotInFlight):
            again.result(10)
    assert {s.url.rsplit("/", 1)[1] for s in frontier.snapshot()} == {"one", "three"}


def test_a_page_linking_to_a_seed_reported_in_its_group_sees_it_in_flight(
    make_frontier: MakeFrontier,
) -> None:
    """One by one, a page's link to a seed that a later page of the group reports finds that
    seed still in flight (a duplicate): grouped, the outcome is the same."""
    frontier = make_frontier()  # no dedup: the frontier's own refusal of a URL it holds
    frontier.push_many(links(0, 2))
    with frontier.worker(prefetch=2) as worker:
        a, b = worker.next(), worker.next()
        assert a and b
        fa, fb = _queued_behind_a_held_writer(
            worker,
            lambda: [
                worker.finish(Done(a.seed), [b.seed.with_lease(None)]),
                worker.finish(Done(b.seed)),
            ],
        )
        assert not fa.result(10)[0]  # refused: b was in flight when a's links went in
        fb.result(10)
    assert frontier.stats().done == 2 and len(frontier) == 0


def test_a_group_is_cut_into_runs_before_a_page_an_earlier_page_links_to(
    make_frontier: MakeFrontier,
) -> None:
    """A group is written as runs of pages, each its reports then its links: a run ends before
    a page whose seed an earlier page of the run links to (one by one, that link finds it in
    flight); a link to a seed an earlier page reported finds it done, and crawls it again."""
    frontier = make_frontier()  # no dedup: a done URL pushed again is queued again
    frontier.push_many(links(0, 3))
    with frontier.worker(prefetch=3) as worker:
        a, b, c = (worker.next() for _ in range(3))
        assert a and b and c
        batches = _batches(worker)
        fa, fb, fc = _queued_behind_a_held_writer(
            worker,
            lambda: [
                worker.finish(Done(a.seed), [c.seed.with_lease(None)]),
                worker.finish(Done(b.seed), [a.seed.with_lease(None)]),
                worker.finish(Done(c.seed)),
            ],
        )
        assert not fa.result(10)[0]  # c was in flight when a's links went in
        assert fb.result(10)[0]  # a was done: crawled again
        assert fc.result(10) == []
        assert batches == [2, 1]  # a and b, then c
    stats = frontier.stats()
    assert stats.done == 3 and stats.queued == 1 and stats.refused == {"duplicate": 1}


def test_a_worker_whose_store_closed_fails_its_callers_and_closes(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.lmdb", durability="nosync")
    frontier = store.frontier()
    frontier.push_many(links(0, 5))
    worker = frontier.worker(prefetch=5)
    ready = worker.next(timeout=10)
    assert ready is not None
    store.close()
    with pytest.raises(StoreError):
        worker.finish(Done(ready.seed)).result(timeout=10)
    worker.close()  # the seeds it prefetched come back through their leases
    with Store.open(tmp_path / "s.lmdb") as again:
        assert again.frontier().stats().in_flight == 5
