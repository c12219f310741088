"""Regression tests for problems a review found (each would fail on the code before the fix)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import pop_seeds, seed

from crawlstore import Done, InMemFrontier, ManualClock, Ready, Seed, Store
from crawlstore.errors import NotInFlight, ReadOnlyStore, StoreError


def open_store(path: Path, clock: ManualClock, **options: object) -> Store:
    options.setdefault("durability", "nosync")
    return Store.open(path, clock=clock, **options)  # type: ignore[arg-type]


def test_no_record_cache_after_an_empty_commit(tmp_path: Path, clock: ManualClock) -> None:
    store = open_store(tmp_path / "s.lmdb", clock)
    store.frontier().push(seed("a"))
    engine = store._storage.engine
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
        s = f.stats()  # all or nothing: none applied, and everything agrees
        assert s.in_flight == len(f.snapshot().in_flight) == 1 and s.done == 0
        with pytest.raises(NotInFlight, match="twice"):
            f.report_many([Done(a.seed), Done(a.seed)])
        f.report_many([Done(a.seed)])
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
        f.report_many(Done(s) for s in pop_seeds(f, 3))
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


def test_views_share_the_crawl_s_stored_policy(tmp_path: Path, clock: ManualClock) -> None:
    with open_store(tmp_path / "s.lmdb", clock) as store:
        wide = store.frontier("fifo", queues="host", max_in_flight=2)
        plain = store.frontier()  # no arguments: the crawl's stored policy
        wide.push_many([Seed.get(f"https://a.com/{i}") for i in range(4)])
        assert isinstance(plain.pop(), Ready) and isinstance(plain.pop(), Ready)
        assert not isinstance(plain.pop(), Ready)  # the stored cap of 2, not host's default 1
        narrow = store.frontier(max_in_flight=1)  # a value given: the crawl's from now on
        assert narrow.core.policy.max_in_flight == 1 == plain.core.policy.max_in_flight


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
        with pytest.raises(StoreError, match="durability='nosync'"):
            Store.open(path, durability="full")
        with Store.open(path, durability="nosync"):
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


# -- a second review (session 2): backups, deferred transactions, the record cache ---------------

WRITER = """
import sys
from crawlstore import Seed, Store
with Store.open(sys.argv[1], map_size=2**20) as store:
    f = store.frontier()
    for i in range(0, int(sys.argv[2]), 1000):
        f.push_many([Seed.get(f"https://grow.example/{j}") for j in range(i, i + 1000)])
"""


def _urls(store: Store) -> set[str]:
    return {s.url for s in store.frontier().snapshot()}


def test_a_backup_inside_a_transaction_copies_only_what_is_committed(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        f = store.frontier()
        f.push(Seed.get("https://a.example/committed"))
        with pytest.raises(RuntimeError), store.transaction():
            f.push(Seed.get("https://a.example/rolled-back"))
            store.backup(tmp_path / "copy.lmdb")
            raise RuntimeError("roll back")
    with Store.open(tmp_path / "copy.lmdb") as copy:
        assert _urls(copy) == {"https://a.example/committed"}


def test_a_backup_never_reuses_a_partial_file_nor_replaces_one(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        store.frontier().push(Seed.get("https://a.example/1"))
        target = tmp_path / "copy.lmdb"
        partial = tmp_path / "copy.lmdb.partial"
        partial.write_bytes(b"")  # another backup to the same name is running, or died
        with pytest.raises(StoreError, match="partial"):
            store.backup(target)
        assert not target.exists() and partial.exists()
        partial.unlink()
        store.backup(target)
        assert not partial.exists()


def test_a_compact_backup_of_a_compact_file_opened_read_only(tmp_path: Path) -> None:
    # a compacted file has no free pages: a copy sized by the reader's map would not fit it
    with Store.open(tmp_path / "s.lmdb") as store:
        store.frontier().dedup_with(store.seen()).push_many(
            [Seed.get(f"https://a.example/{i}") for i in range(20_000)]
        )
        store.backup(tmp_path / "c1.lmdb")
    with Store.open(tmp_path / "c1.lmdb", readonly=True, map_size=2**20) as compact:
        compact.backup(tmp_path / "c2.lmdb")
    with Store.open(tmp_path / "c2.lmdb") as copy:
        assert len(copy.frontier()) == 20_000 and len(copy.seen()) == 20_000


def test_a_backup_after_another_process_grew_the_file(tmp_path: Path) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path, map_size=2**20) as store:
        store.frontier().push(Seed.get("https://a.example/first"))
    with Store.open(path, readonly=True, map_size=2**20) as reader:
        reader.frontier()
        done = subprocess.run([sys.executable, "-c", WRITER, str(path), "20000"], timeout=120)
        assert done.returncode == 0
        assert path.stat().st_size > 2**20  # past this process's map
        reader.backup(tmp_path / "copy.lmdb")
    with Store.open(tmp_path / "copy.lmdb") as copy:
        assert len(copy.frontier()) == 20_001


def test_a_transaction_made_before_and_entered_inside_another_joins_it(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        f = store.frontier()
        later = store.transaction()
        with pytest.raises(RuntimeError), store.transaction():
            f.push(Seed.get("https://a.example/1"))
            with later:
                f.push(Seed.get("https://a.example/2"))
            raise RuntimeError("the outer one rolls both back")
        assert len(f) == 0
        with later:  # still usable on its own
            f.push(Seed.get("https://a.example/3"))
        assert len(f) == 1


def test_deleting_a_missing_record_is_no_write(tmp_path: Path) -> None:
    # An empty commit takes no transaction id: records kept after it would be taken for current
    # after another process's commit, which gets that id.
    with Store.open(tmp_path / "s.lmdb") as store:
        store.frontier().push(Seed.get("https://a.example/1"))
        engine = store._storage.engine
        with store.transaction():
            ctx = engine.current
            assert ctx is not None
            ctx.record("state", b"missing")
            ctx.touch("state", b"missing")  # None: flush deletes a key that is not there
        assert engine._records_txnid == -1


def test_a_write_inside_a_snapshot_read_is_refused_and_the_snapshot_stays(tmp_path: Path) -> None:
    """An operation run in a snapshot (an export's reads) reads that snapshot; a frontier write
    begun inside it is refused as the bug it is, even though it opened a write unit, and
    writes nothing."""
    store = Store.open(tmp_path / "s.lmdb", durability="nosync")
    f = store.frontier()
    f.push(Seed.get("https://a.example/"))
    reader = f.core.storage.reader()
    try:
        with pytest.raises(StoreError, match="outside a write unit"):
            reader.run(lambda: f.push(Seed.get("https://b.example/")))
        assert reader.run(lambda: len(f)) == 1
    finally:
        reader.close()
    assert len(f) == 1
    store.close()
