"""Format 3's URL records: at the end of their queue's range, found by fingerprint; a queue's
URLs listed in fingerprint order whether it is sorted in memory or walked by fingerprint."""

from __future__ import annotations

from pathlib import Path

import pytest

from crawlstore import Done, ManualClock, Seed, Store
from crawlstore.storages._lmdb import storage as lmdb_storage
from crawlstore.store import verify


def _crawl(path: Path, clock: ManualClock) -> None:
    with Store.open(path, clock=clock) as store:
        f = store.frontier(queues="host")
        f.push_many(Seed.get(f"https://h{i % 3}.test/{i}") for i in range(60))
        f.report_many([Done(r.seed) for r in f.pop_many(3)])
        f.push_many(Seed.get(f"https://h{i % 4}.test/n{i}") for i in range(20))


@pytest.mark.parametrize("sorted_walk", [65536, 2])
def test_a_queue_is_listed_in_fingerprint_order_in_pages(
    tmp_path: Path, clock: ManualClock, sorted_walk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.lmdb"
    _crawl(path, clock)
    monkeypatch.setattr(lmdb_storage, "_SORTED_WALK", sorted_walk)  # 2: walked by fingerprint
    with Store.open(path, clock=clock, readonly=True) as store:
        f = store.frontier()
        every = f.urls(limit=1000)
        for host in ("h0.test", "h3.test"):
            expected = sorted(u.fingerprint for u in every if u.url.startswith(f"https://{host}"))
            pages, after = [], None
            while page := f.urls(queue=host, after=after, limit=4):
                pages += [u.fingerprint for u in page]
                after = page[-1].fingerprint
            assert pages == expected and len(expected) in (25, 5)
            assert [u.fingerprint for u in f.urls(queue=host, limit=1000)] == expected
        assert f.count(state="done") == 3


def test_a_queue_deleted_takes_its_records_and_their_fingerprints(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "s.lmdb"
    _crawl(path, clock)
    with Store.open(path, clock=clock) as store:
        f = store.frontier()
        assert f.delete_queue("h1.test") == 25
        assert f.url("https://h1.test/1").state == "unknown"
        assert f.url("https://h0.test/0").state == "done"
        assert len(f.urls(limit=1000)) == 80 - 25
        assert f.push(Seed.get("https://h1.test/1"))  # known no more: admitted again
    assert verify(path) == []


def test_a_large_queue_is_paged_through_the_index_from_its_first_page(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue over the threshold never reads its whole range for a page (its gauges say its
    size); one under it does, and sorts it."""
    path = tmp_path / "s.lmdb"
    _crawl(path, clock)
    monkeypatch.setattr(lmdb_storage, "_SORTED_WALK", 10)
    sorted_places = lmdb_storage.LmdbStorage._sorted_places
    sorted_in_memory: list[bool] = []

    def spy(self: lmdb_storage.LmdbStorage, *args: object) -> object:
        found = sorted_places(self, *args)  # type: ignore[arg-type]
        sorted_in_memory.append(found is not None)
        return found

    monkeypatch.setattr(lmdb_storage.LmdbStorage, "_sorted_places", spy)
    with Store.open(path, clock=clock, readonly=True) as store:
        f = store.frontier()
        for host, size, in_memory in (("h0.test", 25, False), ("h3.test", 5, True)):
            sorted_in_memory.clear()
            found, after = 0, None
            while page := f.urls(queue=host, after=after, limit=4):
                found += len(page)
                after = page[-1].fingerprint
            assert found == size and set(sorted_in_memory) == {in_memory}
