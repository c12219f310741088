"""Transactions are all or nothing on every storage, and belong to the task that opened them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import MakeFrontier, pop_seeds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstore import (
    Backoff,
    BloomSeen,
    Cancelled,
    Done,
    Failed,
    InMemFrontier,
    InMemSeen,
    InMemValidators,
    ManualClock,
    Ready,
    Retry,
    Seed,
    Store,
    Validator,
)
from crawlstore.errors import TransactionBusy
from crawlstore.frontier import Frontier


class Boom(Exception):
    pass


def _state(f: Frontier) -> tuple[object, ...]:
    """What a frontier holds (seeds in flight have no order)."""
    snap = f.snapshot()
    in_flight = sorted(snap.in_flight, key=lambda s: s.url)
    return f.stats(), snap.queued, in_flight, snap.scheduled, snap.revisits, len(f)


def test_a_push_inside_a_failed_transaction_is_rolled_back(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    with pytest.raises(Boom), f.transaction():
        f.push(Seed.get("https://e.com/a"))
        raise Boom
    assert len(f) == 0 and f.stats().admitted == 0 and not isinstance(f.pop(), Ready)


def test_a_page_unit_rolls_back_whole(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().dedup().retry(2).tag_backoff()
    f.push_many(Seed.get(f"https://e.com/{i}").with_tag("t") for i in range(3))
    first, second = pop_seeds(f, 2)
    f.report(Retry(second))  # scheduled: a later report of it in the unit replaces nothing
    before = _state(f)
    with pytest.raises(Boom), f.transaction():
        f.report(Done(first))
        f.push_many([Seed.get("https://e.com/new"), Seed.get("https://e.com/0")])
        f.report(Backoff("t", clock() + 100))
        clock.advance(5)
        f.pop()  # releases the retry, leases it
        raise Boom
    clock.advance(-5)
    assert _state(f) == before
    assert f.push(Seed.get("https://e.com/new"))  # the seen set forgot it too
    f.report(Done(first))  # still in flight
    assert "t" not in f.core.state("tag_backoff")


def test_in_memory_seen_sets_and_validators_roll_back_with_a_store(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        seen, bloom, validators = InMemSeen(), BloomSeen(1000), InMemValidators()
        f = store.frontier().dedup_with(seen)
        validators.put(b"k" * 16, Validator(etag='"old"'))
        with pytest.raises(Boom), store.transaction():
            f.push(Seed.get("https://e.com/a"))
            bloom.insert(b"x" * 16)
            validators.put(b"k" * 16, Validator(etag='"new"'))
            validators.put(b"n" * 16, Validator(etag='"n"'))
            raise Boom
        assert len(f) == 0 and len(seen) == 0 and b"x" * 16 not in bloom and len(bloom) == 0
        assert validators.get(b"k" * 16) == Validator(etag='"old"') and len(validators) == 1
        assert f.push(Seed.get("https://e.com/a"))  # not burnt


_NAMES = ["push", "push_many", "pop", "done", "failed", "retry", "cancel", "backoff", "advance",
          "state"]  # fmt: skip
_OPS = st.lists(st.tuples(st.sampled_from(_NAMES), st.integers(0, 30)), max_size=25)


@pytest.mark.parametrize("storage", ["memory", "store"])
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(setup=_OPS, unit=_OPS)
def test_any_failed_transaction_leaves_no_trace(
    tmp_path_factory: pytest.TempPathFactory, storage: str, setup: list, unit: list
) -> None:
    clock = ManualClock()
    store = None
    if storage == "memory":
        base: Frontier = InMemFrontier.priority(clock=clock)
    else:
        store = Store.open(
            tmp_path_factory.mktemp("t") / "s.lmdb", clock=clock, durability="nosync"
        )
        base = store.frontier("priority", queues="host")
    f = base.dedup().retry(1).tag_backoff()
    held: list[Seed] = []

    def run(ops: list) -> None:
        for op, n in ops:
            seed = Seed.get(f"https://h{n % 3}.e/{n}").with_tag(f"t{n % 2}").with_priority(n % 4)
            if op == "push":
                f.push(seed)
            elif op == "push_many":
                f.push_many(Seed.get(f"https://h{i % 3}.e/m{n}/{i}") for i in range(n % 5))
            elif op == "pop" and isinstance(popped := f.pop(), Ready):
                held.append(popped.seed)
            elif op in ("done", "failed", "retry", "cancel") and held:
                report = {"done": Done, "failed": Failed, "retry": Retry, "cancel": Cancelled}[op]
                f.report(report(held.pop(n % len(held))))
            elif op == "backoff":
                f.report(Backoff(f"t{n % 2}", clock() + n))
            elif op == "advance":
                clock.advance(n / 4)
            elif op == "state":
                f.core.state("user")[f"k{n % 4}"] = n

    try:
        run(setup)
        before, held_before, now = _state(f), list(held), clock()
        with pytest.raises(Boom), f.transaction():
            run(unit)
            raise Boom
        clock.now, held[:] = now, held_before
        assert _state(f) == before
        assert dict(f.core.state("user")) == {k: v for k, v in f.core.state("user").items()}
        for seed in held:  # every lease the transaction ended is held again
            f.report(Done(seed))
    finally:
        if store is not None:
            store.close()


# -- asyncio: a transaction belongs to its task -------------------------------------------------


def _storages(tmp_path: Path) -> list[tuple[Frontier, Store | None]]:
    store = Store.open(tmp_path / "s.lmdb", durability="nosync")
    return [(InMemFrontier.fifo(), None), (store.frontier("fifo"), store)]


@pytest.mark.parametrize("ending", ["rollback", "commit"])
@pytest.mark.parametrize("which", [0, 1], ids=["memory", "store"])
def test_another_task_cannot_write_into_an_open_transaction(
    tmp_path: Path, ending: str, which: int
) -> None:
    f, store = _storages(tmp_path)[which]
    told: list[object] = []

    async def holder(opened: asyncio.Event, written: asyncio.Event) -> None:
        with f.transaction():
            f.push(Seed.get("http://a.test/"))
            opened.set()
            await written.wait()  # awaits inside its transaction: the mistake under test
            if ending == "rollback":
                raise Boom

    async def other(opened: asyncio.Event, written: asyncio.Event) -> None:
        await opened.wait()
        for write in (
            lambda: f.push(Seed.get("http://b.test/")),
            lambda: f.push_many([Seed.get("http://c.test/")]),
            lambda: f.transaction().__enter__(),
            lambda: f.pop(),
        ):
            try:
                told.append(write())
            except TransactionBusy as exc:
                told.append(exc)
        assert len(f) == 0 if which == 1 else True  # the store's reads see what is committed
        written.set()

    async def main() -> None:
        opened, written = asyncio.Event(), asyncio.Event()
        results = await asyncio.gather(
            holder(opened, written), other(opened, written), return_exceptions=True
        )
        assert isinstance(results[0], Boom) == (ending == "rollback")

    asyncio.run(main())
    assert all(isinstance(t, TransactionBusy) for t in told), told
    assert "another asyncio task" in str(told[0]) and "await" in str(told[0])
    assert len(f) == (ending == "commit")  # nothing the other task was told went in, or out
    assert f.push(Seed.get("http://b.test/"))  # and it writes once the transaction ended
    if store is not None:
        store.close()


@pytest.mark.parametrize("which", [0, 1], ids=["memory", "store"])
def test_a_task_started_inside_a_transaction_does_not_join_it(tmp_path: Path, which: int) -> None:
    f, store = _storages(tmp_path)[which]

    async def push(url: str) -> bool:
        return bool(f.push(Seed.get(url)))

    async def main() -> None:
        with pytest.raises(Boom), f.transaction():
            f.push(Seed.get("http://a.test/"))
            child = asyncio.ensure_future(push("http://c.test/"))  # runs after it ended
            raise Boom
        assert await child
        with f.transaction():
            f.push(Seed.get("http://d.test/"))
            inner = asyncio.ensure_future(push("http://e.test/"))
            with pytest.raises(TransactionBusy):
                await inner  # inherited the context, yet does not join the transaction

    asyncio.run(main())
    assert sorted(s.url for s in f.snapshot().queued) == ["http://c.test/", "http://d.test/"]
    if store is not None:
        store.close()


@pytest.mark.parametrize("which", [0, 1], ids=["memory", "store"])
def test_tasks_that_never_await_inside_transactions_share_a_frontier(
    tmp_path: Path, which: int
) -> None:
    f, store = _storages(tmp_path)[which]

    async def worker(n: int) -> None:
        for i in range(50):
            with f.transaction():
                f.push(Seed.get(f"http://w{n}.test/{i}"))
            await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(worker(n) for n in range(4)))

    asyncio.run(main())
    assert len(f) == 200
    if store is not None:
        store.close()


# -- regressions from a review: what rolls back, and what must not -------------------------


def test_an_abandoned_async_generator_rolls_its_transaction_back(tmp_path: Path) -> None:
    import gc
    import threading

    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        f = store.frontier().dedup()
        seed = Seed.get("http://a.test/x")

        async def pages() -> object:
            with store.transaction():  # held across a yield: asyncio closes it from a task
                f.push(seed)
                yield 1

        async def main() -> None:
            async for _ in pages():  # type: ignore[attr-defined]
                break
            gc.collect()
            await asyncio.sleep(0.05)  # the finalizer's aclose() runs

        asyncio.run(main())
        assert len(f) == 0 and seed.fingerprint not in f.seen  # both rolled back
        done = threading.Event()
        thread = threading.Thread(target=lambda: (f.push(seed), done.set()))
        thread.start()
        thread.join(30)
        assert done.is_set() and len(f) == 1  # and the lock was released


def test_trap_budgets_roll_back_in_memory_and_on_the_store(make_frontier: MakeFrontier) -> None:
    from crawlstore.frontier.traps import TrapPolicy

    f = make_frontier().avoid_traps_with(TrapPolicy(max_urls=2))
    assert f.push(Seed.get("https://h.com/x/0"))
    for i in range(3):
        with pytest.raises(Boom), f.transaction():
            f.push(Seed.get(f"https://h.com/x/r{i}"))
            raise Boom
    assert f.push(Seed.get("https://h.com/x/new"))  # the rolled-back pushes were not counted
    assert len(f) == 2


def test_a_memory_frontier_over_a_store_seen_set_rolls_back_whole(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        f = InMemFrontier.fifo().dedup_with(store.seen())
        seed = Seed.get("https://e.com/a")
        with pytest.raises(Boom), f.transaction():
            assert f.push(seed)
            raise Boom
        assert len(f) == 0 and seed.fingerprint not in store.seen()
        with f.transaction():  # and commits whole
            f.push(seed)
        assert len(f) == 1 and seed.fingerprint in store.seen()


@pytest.mark.parametrize("kind", ["exact", "bloom"])
def test_a_shared_seen_set_never_loses_another_thread_s_insert(kind: str) -> None:
    import threading

    seen = InMemSeen() if kind == "exact" else BloomSeen(5000)
    f = InMemFrontier.fifo().dedup_with(seen)
    x = Seed.get("http://a.test/x")
    others = [Seed.get(f"http://a.test/{i}").fingerprint for i in range(2000)]
    answers: list[bool] = []

    def other_thread() -> None:  # writes while the transaction below is open
        answers.append(seen.insert(x.fingerprint))
        answers.extend(seen.insert(fp) for fp in others)

    with pytest.raises(Boom), f.transaction():
        f.push(x)
        assert x.fingerprint in seen  # the transaction sees its own insert
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(30)
        raise Boom
    assert answers[0]  # the other thread never saw the uncommitted insert: X was new to it
    assert x.fingerprint in seen and all(fp in seen for fp in others)  # and nothing it put in left


def test_a_failed_operation_inside_a_transaction_is_never_called_damage(tmp_path: Path) -> None:
    from crawlstore.errors import StoreError, StoreFull
    from crawlstore.store import verify

    path = tmp_path / "s.lmdb"
    with Store.open(path, map_size=2**20, max_map_size=2**20) as store:
        f = store.frontier()
        full = pytest.raises(StoreFull, match=r"nothing of it was committed|maximum size")
        with full, store.transaction():
            for i in range(100_000):
                try:
                    f.push(Seed.get(f"http://a.test/{i}"))
                except StoreFull:
                    break  # a crawler that carries on with the next link...
            with pytest.raises(StoreError, match="earlier operation of this transaction"):
                f.push(Seed.get("http://a.test/after"))  # ...is told why, not "damaged"
        assert len(f) == 0
    assert verify(path) == []


def test_a_store_closed_inside_a_memory_transaction_that_wrote_to_it(tmp_path: Path) -> None:
    from crawlstore.errors import StoreError

    f = InMemFrontier.fifo()
    store = Store.open(tmp_path / "s.lmdb", durability="nosync")
    with f.transaction():
        store.seen().insert(Seed.get("https://e.com/").fingerprint)
        with pytest.raises(StoreError, match="cannot be closed inside a transaction"):
            store.close()
    store.close()  # once it ended
    with Store.open(tmp_path / "s.lmdb") as again:
        assert len(again.seen()) == 1


def test_a_failed_transaction_rolls_back_every_crawl_and_view(store: Store) -> None:
    """A transaction that raises leaves no trace in any crawl or view, whatever partitions
    its units wrote to: nothing of it commits before it ends."""
    from crawlstore.errors import InvalidArgument as Boom

    with pytest.raises(Boom), store.transaction():
        store.frontier(crawl="a").push(Seed.get("https://a.example/"))
        store.frontier(crawl="b").push(Seed.get("https://b.example/"))
        store.seen(crawl="c").insert(Seed.get("https://c.example/").fingerprint)
        store.validators(crawl="d").put(Seed.get("https://d.example/").fingerprint,
                                        Validator(etag='"x"'))  # fmt: skip
        raise Boom("roll back")
    assert store.crawls() == []


def test_a_rolled_back_reschedule_keeps_the_schedule_it_replaced(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    """The unit read past the old schedule entry it had taken the URL out of: a rollback
    brings the entry back (found by a differential test over partitions)."""
    f = make_frontier("fifo", queues="host", delay=0, max_in_flight=None)
    seed = Seed.get("https://h0.test/0")
    f.core.schedule(seed, clock() + 10)
    with pytest.raises(KeyboardInterrupt), f.transaction():
        f.core.schedule(seed, clock() + 20)
        raise KeyboardInterrupt
    clock.advance(10)
    assert [r.seed.url for r in f.pop_many(5)] == [seed.url]


def test_a_rolled_back_schedule_and_pop_keep_the_seed_queued(make_frontier: MakeFrontier) -> None:
    """A pop in the unit read past the queue entry a schedule took the URL out of: a rollback
    leaves the URL queued with its entry, handed out by the next pop."""
    f = make_frontier("fifo", queues="host", delay=0, max_in_flight=None)
    seed = Seed.get("https://h0.test/0")
    f.push(seed)
    with pytest.raises(KeyboardInterrupt), f.transaction():
        f.core.schedule(seed, f.clock())  # out of the queue, due now
        assert f.pop_many(2)  # back at the front, handed out; the old entry read past
        raise KeyboardInterrupt
    assert f.url(seed.url).state == "queued"
    assert [r.seed.url for r in f.pop_many(5)] == [seed.url]
