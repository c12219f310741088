"""Regression tests for problems a review found (each would fail on the code before the fix)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import seed

from crawlstore import Done, InMemFrontier, ManualClock, Ready, Seed, Store
from crawlstore.errors import NotInFlight, ReadOnlyStore, StoreError


def open_store(path: Path, clock: ManualClock, **options: object) -> Store:
    options.setdefault("durability", "group")
    return Store.open(path, clock=clock, **options)  # type: ignore[arg-type]


def test_no_record_cache_after_an_empty_commit(tmp_path: Path, clock: ManualClock) -> None:
    store = open_store(tmp_path / "s.lmdb", clock)
    store.frontier().push(seed("a"))
    engine = store._engine
    assert engine._records_txnid != -1  # a commit that wrote keeps its records...
    with store.transaction():
        pass
    # ...an empty one does not: its id goes to the next commit, perhaps another process's
    assert engine._records_txnid == -1 and engine._records == {}
    store.close()


def test_a_caught_not_in_flight_leaves_report_many_consistent(
    tmp_path: Path, clock: ManualClock
) -> None:
    with open_store(tmp_path / "s.lmdb", clock) as store:
        f = store.frontier("fifo", queues="host")  # one seed of a host in flight at a time
        f.push_many([seed("a"), seed("b")])
        a = f.pop()
        assert isinstance(a, Ready)
        with store.transaction(), pytest.raises(NotInFlight):
            f.report_many([Done(a.seed), Done(seed("never-popped"))])
        s = f.stats()
        assert s.in_flight == len(f.snapshot().in_flight) == 0 and s.done == 1
        assert isinstance(f.pop(), Ready)  # the host's queue is ready again


def test_long_urls_under_avoid_traps_on_the_store(tmp_path: Path, clock: ManualClock) -> None:
    with open_store(tmp_path / "s.lmdb", clock) as store:
        traps = store.frontier().avoid_traps()
        long_url = "https://a.com/" + "z" * 600
        assert traps.push(Seed.get(long_url)) and traps.push(Seed.get(long_url + "/q"))
        state = store.frontier().state("demo")
        state["k" * 700] = 5
        assert state["k" * 700] == 5 and "k" * 700 in set(state)


def test_a_generator_of_reports(tmp_path: Path, clock: ManualClock) -> None:
    with open_store(tmp_path / "s.lmdb", clock) as store:
        f = store.frontier()
        f.push_many(seed(str(i)) for i in range(3))
        f.report_many(Done(s) for s in f.pop_many(3))
        assert f.stats().done == 3


def test_a_readonly_store_never_writes_through_a_writers_transaction(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "s.lmdb"
    with open_store(path, clock) as writer, Store.open(path, readonly=True) as reader:
        writer.frontier().push(seed("a"))
        view = reader.frontier()
        with writer.transaction():
            with pytest.raises(ReadOnlyStore):
                view.push(seed("b"))
            with pytest.raises(ReadOnlyStore):
                reader.seen().insert(seed("b").fingerprint)
        assert len(view) == 1


def test_views_with_other_defaults_share_a_crawl(tmp_path: Path, clock: ManualClock) -> None:
    with open_store(tmp_path / "s.lmdb", clock) as store:
        wide = store.frontier("fifo", queues="host", max_in_flight=2)
        narrow = store.frontier(queues="host")  # the default cap of 1
        wide.push_many([Seed.get(f"https://a.com/{i}") for i in range(3)])
        assert isinstance(wide.pop(), Ready)
        assert not isinstance(narrow.pop(), Ready)  # a.com is at narrow's cap: no error
        assert isinstance(wide.pop(), Ready)


def test_reads_in_a_transaction_see_its_writes(tmp_path: Path, clock: ManualClock) -> None:
    with open_store(tmp_path / "s.lmdb", clock) as store, store.transaction():
        f = store.frontier("fifo", crawl="new", queues="host")
        f.push(Seed.get("https://a.com/1"))
        info = f.queue("a.com")
        assert info is not None and info.queued == 1
        assert "new" in store.crawls()


def test_a_second_open_with_other_options_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with open_store(path, clock):
        with pytest.raises(StoreError, match="durability='group'"):
            Store.open(path, durability="full")
        with Store.open(path, durability="group"):
            pass
        with Store.open(path, readonly=True):
            pass


def test_reads_after_close_raise_store_error(tmp_path: Path, clock: ManualClock) -> None:
    store = open_store(tmp_path / "s.lmdb", clock)
    f = store.frontier()
    store.close()
    with pytest.raises(StoreError):
        len(f)


def test_report_many_in_memory_is_all_or_nothing_under_facades() -> None:
    f = InMemFrontier.fifo().retry(3).tag_backoff()
    f.push(seed("a"))
    a = f.pop()
    assert isinstance(a, Ready)
    with pytest.raises(NotInFlight):
        f.report_many([Done(a.seed), Done(seed("unknown"))])
    assert f.stats().done == 0 and f.stats().in_flight == 1
