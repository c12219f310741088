"""The store: files, crawls, persistence across reopen, transactions, views, bad input."""

from __future__ import annotations

import os
from pathlib import Path

import lmdb
import msgpack
import pytest
from helpers import drain, path_of, seed

from crawlstore import (
    Backoff,
    Done,
    InMemSeen,
    ManualClock,
    Ready,
    Retry,
    RetryPolicy,
    Seed,
    Store,
    Validator,
)
from crawlstore.errors import (
    CorruptRecord,
    IncompatibleStore,
    InvalidArgument,
    NotAStore,
    NotInFlight,
    PolicyConflict,
    ReadOnlyStore,
    StoreError,
    StoreFull,
)
from crawlstore.store import FORMAT_VERSION
from crawlstore.url import FINGERPRINT_VERSION


def open_store(path: Path, clock: ManualClock, **options: object) -> Store:
    options.setdefault("durability", "nosync")
    return Store.open(path, clock=clock, **options)  # type: ignore[arg-type]


def test_open_creates_one_file_and_its_lock(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "crawl.lmdb"
    with open_store(path, clock) as store:
        assert store.meta["format"] == FORMAT_VERSION
        assert store.meta["fingerprint"] == FINGERPRINT_VERSION == 2
        assert store.meta["app"] == "crawlstore" and store.meta["created"] > 0
    assert sorted(os.listdir(tmp_path)) == ["crawl.lmdb", "crawl.lmdb-lock"]
    with pytest.raises(StoreError, match="closed"):
        store.frontier()


def test_everything_survives_a_reopen(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with open_store(path, clock) as store:
        f = store.frontier("fifo").dedup_with(store.seen()).retry_with(RetryPolicy(3, jitter=0))
        f = f.tag_backoff()
        f.push_many([seed("a"), seed("b", tag="t"), seed("c"), seed("d")])
        f.push(seed("a"))
        a = f.pop()
        assert isinstance(a, Ready)
        f.report(Retry(a.seed))  # scheduled at +0.5
        f.report(Backoff("t", until=clock() + 60))
        b = f.pop()  # b is parked by the pause, c comes out and stays in flight
        assert path_of(b) == "c"
        store.validators().put(seed("x").fingerprint, Validator(etag='"v1"'))
        store.seen(bloom=(1000, 0.01)).insert(seed("y").fingerprint)
        before = f.stats()
    with open_store(path, clock) as store:
        f = store.frontier().dedup_with(store.seen()).retry(3).tag_backoff()
        assert f.stats() == before
        assert (before.queued, before.in_flight, before.scheduled) == (1, 1, 2)
        assert not f.push(seed("b"))  # the seen set persisted
        assert store.validators().get(seed("x").fingerprint) == Validator(etag='"v1"')
        assert seed("y").fingerprint in store.seen(bloom=(1000, 0.01))
        assert drain(f) == ["d"]
        clock.advance(1)
        assert drain(f) == ["a"]
        clock.advance(60)
        assert drain(f) == ["b"]


def test_crawls_never_mix(store: Store) -> None:
    one, two = store.frontier(crawl="one"), store.frontier(crawl="two")
    one.push(seed("a"))
    store.seen(crawl="one").insert(seed("a").fingerprint)
    store.validators(crawl="one").put(seed("a").fingerprint, Validator(etag="e"))
    assert len(two) == 0 and two.pop().__class__.__name__ == "_Empty"
    assert seed("a").fingerprint not in store.seen(crawl="two")
    assert store.validators(crawl="two").get(seed("a").fingerprint) is None
    assert len(store.seen(crawl="two")) == 0 and len(store.seen(crawl="one")) == 1
    assert store.crawls() == ["one"]  # opening a view of "two" did not create it


def test_order_is_fixed_per_crawl(store: Store) -> None:
    assert store.frontier().order == "priority"
    assert store.frontier(crawl="f", order="fifo").order == "fifo"
    assert store.frontier(crawl="f").order == "fifo"
    with pytest.raises(PolicyConflict, match="order='fifo'"):
        store.frontier("lifo", crawl="f")
    with pytest.raises(ValueError, match="order"):
        store.frontier("random", crawl="g")


def test_transaction_is_all_or_nothing(store: Store) -> None:
    f = store.frontier("fifo").dedup_with(store.seen())
    validators = store.validators()
    f.push(seed("page"))
    page = f.pop()
    assert isinstance(page, Ready)
    with pytest.raises(RuntimeError), store.transaction():
        f.report(Done(page.seed))
        validators.put(page.seed.fingerprint, Validator(etag="e"))
        f.push(seed("link"))
        raise RuntimeError("extraction failed")
    assert f.stats().in_flight == 1 and f.stats().done == 0 and len(f) == 1
    assert validators.get(page.seed.fingerprint) is None
    assert seed("link").fingerprint not in store.seen()
    with store.transaction():
        f.report(Done(page.seed))
        with store.transaction():  # nested: joins
            validators.put(page.seed.fingerprint, Validator(etag="e"))
        f.push(seed("link"))
    assert f.stats().done == 1 and validators.get(page.seed.fingerprint) is not None
    assert drain(f) == ["link"]


def test_nested_failure_rolls_back_the_outer_transaction(store: Store) -> None:
    f = store.frontier()
    with pytest.raises(KeyError), store.transaction():
        f.push(seed("a"))
        with store.transaction():
            f.push(seed("b"))
            raise KeyError("inner")
    assert len(f) == 0


def test_reads_inside_a_transaction_see_its_writes(store: Store) -> None:
    f = store.frontier()
    seen = store.seen()
    inboxes = store.capabilities.inboxes  # a transaction's pushes: folded once it commits
    with store.transaction():
        f.push(seed("a"))
        seen.insert(seed("a").fingerprint)
        assert len(f) == (0 if inboxes else 1)
        assert seed("a").fingerprint in seen and len(seen) == 1
    assert len(f) == 1


def test_seen_set(store: Store) -> None:
    seen = store.seen()
    a, b = seed("a").fingerprint, seed("b").fingerprint
    assert seen.insert(a) and not seen.insert(a)
    assert a in seen and b not in seen and "x" not in seen and len(seen) == 1
    with pytest.raises(TypeError):
        seen.insert(b"short")


def test_bloom_seen_parameters_are_fixed(store: Store) -> None:
    bloom = store.seen(bloom=(1000, 0.01))
    fps = [seed(str(i)).fingerprint for i in range(500)]
    assert all(bloom.insert(fp) for fp in fps) and len(bloom) == 500
    assert all(fp in bloom for fp in fps)
    with pytest.raises(StoreError, match="expected=1000"):
        store.seen(bloom=(2000, 0.01))


def test_validators(store: Store, clock: ManualClock) -> None:
    v = store.validators()
    fp = seed("a").fingerprint
    assert v.get(fp) is None and len(v) == 0
    v.put(fp, Validator(etag='"x"', last_modified="Mon, 01 Jan 2024 00:00:00 GMT"))
    assert v.get(fp) == Validator('"x"', "Mon, 01 Jan 2024 00:00:00 GMT")
    assert v.stored_at(fp) == clock() and len(v) == 1
    v.put(fp, Validator())  # empty: clears
    assert v.get(fp) is None and len(v) == 0
    v.put(fp, Validator(etag="y"))
    v.delete(fp)
    assert len(v) == 0


def test_facade_state_persists(store: Store) -> None:
    state = store.frontier().state("demo")
    state["a"] = {"x": [1, 2]}
    state["b"] = 2.5
    assert dict(state) == {"a": {"x": [1, 2]}, "b": 2.5} and len(state) == 2
    del state["a"]
    with pytest.raises(KeyError):
        del state["a"]
    assert store.frontier().state("other") == {}


# -- leases -------------------------------------------------------------------------------------


def test_lease_expires_back_into_the_queue(store: Store, clock: ManualClock) -> None:
    f = store.frontier("fifo", queues="single", lease_time=30)
    f.push_many([seed("a"), seed("b")])
    a = f.pop()
    assert isinstance(a, Ready)
    clock.advance(29)
    f.extend_lease(a.seed, 60)
    clock.advance(59)
    assert path_of(f.pop()) == "b"
    clock.advance(2)
    assert path_of(f.pop()) == "a"  # the lease ran out: a is crawled again
    assert f.stats().in_flight == 2


def test_report_after_the_lease_ended_raises(store: Store, clock: ManualClock) -> None:
    f = store.frontier(lease_time=5)
    f.push(seed("a"))
    a = f.pop()
    assert isinstance(a, Ready)
    clock.advance(10)
    again = f.pop()  # requeued and handed out again, under a new lease
    assert isinstance(again, Ready) and again.seed == a.seed
    with pytest.raises(NotInFlight):  # the late report never ends the new holder's lease
        f.report(Done(a.seed))
    with pytest.raises(NotInFlight):
        f.extend_lease(a.seed)
    with pytest.raises(NotInFlight):
        f.report_many([Done(a.seed)])
    assert f.stats().in_flight == 1 and f.stats().done == 0
    f.report(Done(again.seed))
    assert f.stats().done == 1
    detached = Seed.from_record(again.seed.to_record())  # e.g. sent to another process
    assert detached == again.seed and detached.lease is None
    f.push(seed("b"))
    b = f.pop()
    assert isinstance(b, Ready)
    copied = Seed.from_record(b.seed.to_record())
    with pytest.raises(NotInFlight, match="no lease"):  # a copy never ends anyone's lease...
        f.report(Done(copied))
    f.report(Done(copied.with_lease(b.lease)))  # ...unless its lease travelled with it
    assert f.stats().done == 2


def test_readonly_store_sees_a_writer_and_refuses_writes(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "s.lmdb"
    with pytest.raises(StoreError, match="does not exist"):
        Store.open(path, readonly=True)
    writer = open_store(path, clock)
    f = writer.frontier()
    f.push(seed("a"))
    with Store.open(path, readonly=True) as reader:  # shares the writer's environment
        view = reader.frontier()
        assert len(view) == 1 and view.snapshot().queued[0] == seed("a")
        f.push(seed("b"))
        assert len(view) == 2  # sees commits as they happen
        writes = [lambda: view.push(seed("c")), view.pop, reader.transaction().__enter__,
                  lambda: reader.seen().insert(seed("c").fingerprint)]  # fmt: skip
        for write in writes:
            with pytest.raises(ReadOnlyStore):
                write()
        missing = reader.frontier(crawl="missing")  # a view of no crawl: empty, creates none
        assert len(missing) == 0 and missing.url(seed("a").url).state == "unknown"
        assert "missing" not in reader.crawls()
    assert len(f) == 2
    writer.close()
    with Store.open(path, readonly=True) as reader:
        assert len(reader.frontier()) == 2
        with pytest.raises(StoreError, match="read-only in this process"):
            Store.open(path)
        with pytest.raises(ReadOnlyStore):
            reader.frontier().push(seed("d"))


# -- bad files ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content", [b"", b"hello, not a store\n", os.urandom(20000), b"\x00" * 8192]
)
def test_a_file_that_is_not_a_store(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "file.lmdb"
    path.write_bytes(content)
    with pytest.raises(NotAStore):
        Store.open(path)
    assert path.read_bytes() == content
    with pytest.raises(NotAStore):
        Store.open(tmp_path)  # a directory


def test_an_lmdb_file_of_another_application(tmp_path: Path) -> None:
    path = tmp_path / "other.lmdb"
    env = lmdb.open(str(path), subdir=False, max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(b"key", b"value")
    env.close()
    before = path.read_bytes()
    with pytest.raises(NotAStore, match="another application"):
        Store.open(path)
    assert path.read_bytes() == before


def _rewrite_meta(path: Path, **changes: object) -> None:
    env = lmdb.open(str(path), subdir=False, max_dbs=20)
    db = env.open_db(b"meta")
    with env.begin(write=True, db=db) as txn:
        meta = msgpack.unpackb(txn.get(b"meta"))
        meta.update(changes)
        txn.put(b"meta", msgpack.packb(meta))
    env.close()


@pytest.mark.parametrize(
    ("changes", "message"),
    [({"format": FORMAT_VERSION + 1}, "format version"), ({"fingerprint": 99}, "fingerprint")],
)
def test_a_newer_store_is_refused_untouched(
    tmp_path: Path, clock: ManualClock, changes: dict[str, int], message: str
) -> None:
    path = tmp_path / "new.lmdb"
    with open_store(path, clock) as store:
        store.frontier().push(seed("a"))
    _rewrite_meta(path, **changes)
    before = path.read_bytes()
    with pytest.raises(IncompatibleStore, match=message):
        Store.open(path)
    assert path.read_bytes() == before


def test_corrupt_record_names_the_key(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with open_store(path, clock) as store:
        store.frontier().push(seed("a"))
    env = lmdb.open(str(path), subdir=False, max_dbs=20)
    db = env.open_db(b"urls")
    with env.begin(write=True, db=db) as txn:
        key = next(iter(txn.cursor().iternext(values=False)))
        txn.put(key, b"\xc1\xc1")
    env.close()
    with open_store(path, clock) as store:
        with pytest.raises(CorruptRecord, match=bytes(key).hex()):
            store.frontier().pop()
        assert len(store.frontier()) == 1  # the failed pop changed nothing


def test_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'safe'"):
        Store.open(tmp_path / "a.lmdb", durability="fast")
    with pytest.raises(ValueError, match='now "nosync"'):  # the old name of the no-fsync mode
        Store.open(tmp_path / "a.lmdb", durability="group")
    with pytest.raises(ValueError):
        Store.open(tmp_path / "a.lmdb", map_size=0)
    with pytest.raises(TypeError):
        Store.open(tmp_path / "a.lmdb", clock=5)  # type: ignore[arg-type]


# -- size ---------------------------------------------------------------------------------------


def test_map_grows_invisibly(tmp_path: Path, clock: ManualClock) -> None:
    with open_store(tmp_path / "s.lmdb", clock, map_size=2**16) as store:
        f = store.frontier("fifo")
        for i in range(3000):
            f.push(seed(f"page/{i}").with_body(b"x" * 100))
        assert len(f) == 3000 and store.file_size() > 2**16
        with store.transaction():
            for i in range(3000, 6000):
                f.push(seed(f"page/{i}"))
        assert drain(f)[:3] == ["page/0", "page/1", "page/2"]


def test_store_full_keeps_everything_committed(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    with open_store(path, clock, map_size=2**18, max_map_size=2**20) as store:
        f = store.frontier("fifo")
        pushed = 0
        with pytest.raises(StoreFull, match="maximum size"):
            while True:
                f.push(seed(f"p/{pushed}").with_body(b"x" * 1000))
                pushed += 1
        assert len(f) == pushed > 100
        with pytest.raises(StoreFull), store.transaction():
            for i in range(2000):
                f.push(seed(f"q/{i}").with_body(b"x" * 1000))
        assert len(f) == pushed
    # A full map cannot even delete (copy-on-write needs pages): allow more and go on.
    with open_store(path, clock, max_map_size=2**21) as store:
        f = store.frontier()
        assert len(f) == pushed
        assert len(drain(f)) == pushed
        f.push(seed("after"))
        assert len(f) == 1


def test_store_rejects_use_in_a_forked_child(tmp_path: Path, clock: ManualClock) -> None:
    store = open_store(tmp_path / "s.lmdb", clock, durability="safe")  # no flusher thread
    pid = os.fork()
    if pid == 0:  # the child must not touch the parent's environment
        try:
            store.frontier().push(seed("a"))
            os._exit(1)
        except StoreError:
            os._exit(0)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    store.close()


def test_in_memory_seen_set_works_with_a_store_frontier(store: Store) -> None:
    f = store.frontier().dedup_with(InMemSeen())
    assert f.push(seed("a")) and not f.push(seed("a"))


def test_the_old_names_of_the_store_s_classes_work_and_warn(tmp_path: Path) -> None:
    import crawlstore
    import crawlstore.redis
    import crawlstore.store
    from crawlstore.frontier import CoreFrontier

    with pytest.warns(DeprecationWarning, match="StoreFrontier is CoreFrontier"):
        old_frontier = crawlstore.StoreFrontier  # type: ignore[attr-defined]
    with pytest.warns(DeprecationWarning, match="RedisStore is Store"):
        old_store = crawlstore.redis.RedisStore  # type: ignore[attr-defined]
    assert old_frontier is CoreFrontier and old_store is Store
    for old, new in [("RedisSeen", "StoreSeen"), ("RedisBloomSeen", "StoreBloomSeen"),
                     ("RedisValidators", "StoreValidators")]:  # fmt: skip
        with pytest.warns(DeprecationWarning, match=f"{old} is {new}"):
            assert getattr(crawlstore.redis, old) is getattr(crawlstore.store, new)
    import crawlstore.frontier
    import crawlstore.storages

    for name, home in [("InMemFrontier", crawlstore), ("MemoryStorage", crawlstore.storages)]:
        with pytest.warns(DeprecationWarning, match=f"import {name} from {home.__name__}"):
            assert getattr(crawlstore.frontier, name) is getattr(home, name)
    with Store.open(tmp_path / "s.lmdb") as store:
        assert isinstance(store.frontier(), old_frontier)
    with pytest.raises(AttributeError):
        crawlstore.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_a_file_s_seen_set_has_one_kind(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        store.seen(kind="exact").insert(seed("a").fingerprint)
        assert seed("a").fingerprint in store.seen()
        with pytest.raises(InvalidArgument, match="'exact'"):
            store.seen(kind="packed")
