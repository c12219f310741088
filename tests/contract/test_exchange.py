"""Export and import: a crawl with every kind of state (queued, in flight, retries, tag pauses,
revisits, finished URLs with outcomes, queue settings and blocks, trap budgets and blocks,
counters, the seen set, Bloom bits, validators) streams out and loads back, in memory and on
disk, into the same observable state."""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgpack
import pytest
from helpers import MakeFrontier, ordered_across_queues
from hypothesis import given, settings
from hypothesis import strategies as st
from redis_servers import have_server, shared_node
from strict_json import strict_lines

from crawlstore import (
    Backoff,
    Done,
    Failed,
    InMemFrontier,
    ManualClock,
    Ready,
    Retry,
    RetryPolicy,
    Seed,
    Skipped,
    Store,
    Validator,
)
from crawlstore.cli.exportfile import ExportFile, to_line
from crawlstore.errors import InvalidArgument, InvalidSnapshot, NotInFlight
from crawlstore.frontier import Frontier
from crawlstore.frontier.traps import TrapPolicy
from crawlstore.revisit import RevisitTags, revisit


class Tag(RevisitTags):
    PAGE = revisit("50s")
    FEED = revisit("10s")


HOSTS = ("a.test", "b.test", "c.test")
TRAPS = TrapPolicy(max_urls=3, max_fanout=None, max_random_urls=None, max_path_depth=None,
                   max_repetitions=None)  # fmt: skip
POLICY: dict[str, Any] = dict(queues="host", delay=1.0, max_in_flight=3, lease_time=60.0)


def chain(core: Frontier) -> Frontier:
    retry = RetryPolicy(3, base_delay=5.0, jitter=0)
    return core.revisit(Tag).retry_with(retry).tag_backoff().avoid_traps_with(TRAPS)


def seed(host: int, page: int, tag: Tag | None, priority: int) -> Seed:
    s = Seed.get(f"https://{HOSTS[host]}/s{page % 3}/{page}").with_priority(priority)
    s = s.with_meta({"page": page, "cb": f"parse_{host}"})
    return s.with_tag(tag) if tag is not None else s


OP = st.one_of(
    st.tuples(st.just("push"), st.integers(0, 2), st.integers(0, 9),
              st.sampled_from([None, Tag.PAGE, Tag.FEED]), st.integers(-2, 2)),
    st.tuples(st.just("pop"), st.integers(1, 4)),
    st.tuples(st.just("report"), st.sampled_from(["done", "failed", "skipped", "retry"]),
              st.integers(0, 30)),
    st.tuples(st.just("backoff"), st.sampled_from([None, "PAGE", "FEED"]), st.integers(1, 30)),
    st.tuples(st.just("queue"), st.integers(0, 3), st.sampled_from([None, 0.0, 2.5]),
              st.sampled_from([None, 1, 5]), st.integers(0, 20), st.sampled_from([None, 4])),
    st.tuples(st.just("advance"), st.sampled_from([0.5, 2, 11, 70])),
)  # fmt: skip


def build(core: Frontier, clock: ManualClock, ops: list[tuple[Any, ...]]) -> list[Seed]:
    """Run the operations; the seeds left in flight."""
    f = chain(core)
    held: list[Seed] = []
    for op in ops:
        if op[0] == "push":
            f.push(seed(*op[1:]))
        elif op[0] == "pop":
            held += [r.seed for r in f.pop_many(op[1])]
        elif op[0] == "report" and held:
            s = held.pop(op[2] % len(held))
            kind = op[1]
            report = (Done(s, status=200 + op[2] % 3) if kind == "done" else
                      Failed(s, reason=f"reason {op[2]}") if kind == "failed" else
                      Skipped(s) if kind == "skipped" else Retry(s))  # fmt: skip
            with contextlib.suppress(NotInFlight):  # its lease ended, another pop took it
                f.report(report)
        elif op[0] == "backoff":
            f.report(Backoff(op[1], clock() + op[2]))
        elif op[0] == "queue":
            key = HOSTS[op[1]] if op[1] < 3 else "future.test"  # a queue with no seed yet
            f.set_queue(key, delay=op[2], max_in_flight=op[3], limit=op[5])
            if op[4]:
                f.block_queue(key, clock() + op[4])
        elif op[0] == "advance":
            clock.advance(op[1])
    return held


def observe(core: Frontier, exact: bool = True) -> dict[str, Any]:
    """What a user sees of a crawl, with seeds in flight counted as queued (an export ends
    their leases). ``exact``: when the next event is due, which is a lower bound that a seed in
    flight (its lease's end) and the same seed queued (its queue's delay) put at different
    times; without it, only whether revisits are pending."""
    stats = core.stats()
    queues = [
        (q.key, q.queued + q.in_flight, q.scheduled, q.last_pop, q.blocked_until, q.delay,
         q.max_in_flight, q.limit, q.created, dict(q.counts))
        for q in core.queues(limit=1000)
    ]  # fmt: skip
    urls = [
        (u.url, "queued" if u.state == "in_flight" else u.state, u.queue,
         None if u.state == "in_flight" else u.at, u.kind, u.created, u.outcome, dict(u.meta),
         u.seed.with_lease(None) if u.seed else None)
        for u in core.urls(limit=1000)
    ]  # fmt: skip
    state = {ns: dict(core.core.state(ns)) for ns in ("traps", "tag_backoff", "revisit")}
    return {
        "stats": (stats.admitted, dict(stats.refused), stats.popped, stats.done, stats.failed,
                  stats.retried, stats.skipped, stats.cancelled, stats.unchanged,
                  stats.queued + stats.in_flight, stats.scheduled),
        "queues": queues,
        "urls": urls,
        "counts": (core.count(), core.count(state="failed"), core.count(state="scheduled")),
        "state": state,
        "policy": core.core.policy,
        "next_revisit": core.next_revisit() if exact else core.next_revisit() is not None,
        "len": len(core),
    }  # fmt: skip


def drain(core: Frontier, clock: ManualClock) -> list[tuple[float, str]]:
    """Pop and finish everything, advancing the clock through waits: (time, URL) in order."""
    f = chain(core)
    order = []
    for _ in range(400):
        popped = f.pop()
        if isinstance(popped, Ready):
            order.append((clock(), popped.seed.url))
            f.report(Done(popped.seed))
        elif popped:  # Wait
            clock.advance(max(0.0, popped.until - clock()))  # type: ignore[union-attr]
        else:
            break
    return order


_namespaces = itertools.count()


class Storages:
    """Fresh stores of one kind (``lmdb``: files; ``redis``: namespaces of the session's node)
    on one clock, closed at the end."""

    def __init__(self, clock: ManualClock, kind: str = "lmdb") -> None:
        self.clock, self.kind = clock, kind
        self.dir = Path(tempfile.mkdtemp(prefix="crawlstore-x-"))
        self.stores: list[Store] = []

    def store(self, clock: ManualClock | None = None) -> Store:
        if self.kind == "redis":
            node = shared_node()
            assert node is not None
            ns = f"x{os.getpid()}-{next(_namespaces)}"
            store = Store.open(
                f"redis://127.0.0.1:{node.port}/0?ns={ns}", clock=clock or self.clock
            )
        else:
            store = Store.open(self.dir / f"{len(self.stores)}.lmdb", clock=clock or self.clock,
                               durability="nosync")  # fmt: skip
        self.stores.append(store)
        return store

    def close(self) -> None:
        for store in self.stores:
            store.close()


KINDS = ["lmdb", "redis"] if have_server() else ["lmdb"]


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(OP, max_size=40), seen=st.lists(st.binary(min_size=16, max_size=16),
       max_size=20, unique=True), bloom=st.booleans(), kind=st.sampled_from(KINDS))  # fmt: skip
def test_a_crawl_loads_back_into_the_same_state_in_memory_and_on_disk(
    ops: list[tuple[Any, ...]], seen: list[bytes], bloom: bool, kind: str
) -> None:
    """Export, load, export again: the same records (a fixed point), the same observable
    state, on files, on Redis and in memory."""
    clock = ManualClock(1_000_000)
    kinds = Storages(clock, kind)
    bloom = bloom and kind == "lmdb"  # a store on Redis exports no Bloom filter
    try:
        original = kinds.store()
        core = original.frontier("priority", **POLICY)
        build(core, clock, ops)
        seen_set = original.seen(bloom=(1000, 0.01)) if bloom else original.seen()
        for fp in seen:
            seen_set.insert(fp)
        validators = original.validators()
        for i, fp in enumerate(seen[:5]):
            validators.put(fp, Validator(etag=f'"{i}"', last_modified=None))
        records = list(msgpack.Unpacker(_packed(original.export()), raw=False))
        assert _through_json(records) == records  # the command line's form keeps every value
        exact = not core.stats().in_flight
        want = observe(core, exact)

        disk_clock, memory_clock = ManualClock(clock()), ManualClock(clock())
        copy = kinds.store(disk_clock)
        assert copy.load(records) == "default"
        on_disk = copy.frontier()
        memory = InMemFrontier(clock=memory_clock)
        memory.load(records, other=lambda record: None)  # no seen set, no validators
        assert observe(on_disk, exact) == want
        assert observe(memory, exact) == want
        copied = copy.seen(bloom=(1000, 0.01)) if bloom else copy.seen()
        assert all(fp in copied for fp in seen) and len(copied) == len(seen_set)
        for i, fp in enumerate(seen[:5]):
            assert copy.validators().get(fp) == Validator(etag=f'"{i}"', last_modified=None)
        assert len(copy.validators()) == len(validators)

        # the two loaded crawls are the same crawl: the same export, the same pops
        again = list(copy.export())
        assert again == records  # export, load, export: a fixed point
        assert _frontier_part(again) == _frontier_part(list(memory.export()))
        third = kinds.store()
        third.load(again)
        assert list(third.export()) == again
        mine, theirs = drain(on_disk, disk_clock), drain(memory, memory_clock)
        if ordered_across_queues(on_disk):
            assert mine == theirs
        else:  # (pops take the buckets by turns: each queue's own order is the same)
            assert _by_queue(mine) == _by_queue(theirs)
    finally:
        kinds.close()


def _by_queue(order: list[tuple[float, str]]) -> dict[str, list[str]]:
    """The drained URLs of each queue (the crawl's queues are per host), in their order."""
    out: dict[str, list[str]] = {}
    for _, url in order:
        out.setdefault(urlsplit(url).hostname or "", []).append(url)
    return out


def _packed(records: Iterator[dict[str, Any]]) -> Any:
    out = io.BytesIO()
    for record in records:
        out.write(msgpack.packb(record, use_bin_type=True))
    out.seek(0)
    return out


def _through_json(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records written as ``crawlstore export`` writes them (strict JSON), and read back."""
    text = "".join(to_line(record) + "\n" for record in records)
    strict_lines(text)
    return list(ExportFile("export.jsonl", io.BytesIO(text.encode())).records())


def _frontier_part(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    kept = [r for r in records if r["type"] in ("crawl", "queue", "url", "state")]
    return kept


def test_a_memory_crawl_moves_to_a_store(tmp_path: Path) -> None:
    clock = ManualClock(1000)
    memory = InMemFrontier(clock=clock, **POLICY)
    build(memory, clock, [("push", h, p, None, 0) for h in range(3) for p in range(3)] +
          [("pop", 4), ("report", "failed", 1), ("queue", 3, 2.5, 1, 5, None)])  # fmt: skip
    with Store.open(tmp_path / "s.lmdb", clock=clock) as store:
        store.load(memory.export(), crawl="moved")
        assert observe(store.frontier(crawl="moved")) == observe(memory)


def test_loading_refuses_a_crawl_that_holds_something(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        store.frontier().push(Seed.get("https://a.test/"))
        records = list(store.export())
        with pytest.raises(InvalidArgument, match="not empty"):
            store.load(records)
        assert store.frontier().count() == 1


@pytest.mark.parametrize(
    ("damage", "place"),
    [  # place: of the record at fault in the damaged stream of n records
        (lambda r: r[:-1], lambda n: n + 1),  # cut short: where its end record should be
        (lambda r: r[:2] + r[3:], lambda n: n),  # a record missing: the end record miscounts
        (lambda r: [*r[:2], {"type": "url", "seed": "garbage"}, *r[2:]], lambda n: 3),
        (lambda r: [*r[:-1], {"type": "mystery"}, r[-1]], lambda n: n - 1),
        (lambda r: [*r[:-1], {"type": "validator", "fp": b"x"}, r[-1]], lambda n: n - 1),
        (lambda r: [{**r[0], "v": 99}, *r[1:]], lambda n: 1),
        (lambda r: [{**r[0], "policy": {"order": "sideways"}}, *r[1:]], lambda n: 1),
        (lambda r: r[1:], lambda n: 1),  # no crawl record
    ],
)
def test_a_bad_export_is_refused_where_it_is_and_leaves_no_trace(
    tmp_path: Path, damage: Any, place: Any
) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        f = store.frontier(queues="host")
        f.push_many([Seed.get(f"https://{h}/x") for h in HOSTS])
        store.seen().insert(b"\x01" * 16)
        records = list(store.export())
        damaged = damage(records)
        with pytest.raises(InvalidSnapshot) as refused:
            store.load(damaged, crawl="copy")
        assert refused.value.record == place(len(damaged))
        assert store.crawls() == ["default"]
        assert len(store.seen(crawl="copy")) == 0
        memory = InMemFrontier()
        damaged = damage([r for r in records if r["type"] != "seen"])
        with pytest.raises(InvalidSnapshot) as refused:
            memory.load(damaged)
        assert refused.value.record == place(len(damaged))
        assert len(memory) == 0 and memory.count() == 0


def test_a_new_crawl_is_filled_or_leaves_no_trace(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        with store.new_crawl("a") as frontier:
            frontier.push_many([Seed.get(f"https://a.test/{i}") for i in range(3)])
            store.seen(crawl="a").insert_many([b"\x01" * 16])
            frontier.core.state("seen")["fingerprints"] = "other"
        assert (store.frontier(crawl="a").count(), len(store.seen(crawl="a"))) == (3, 1)
        for holds in ("a", "seen-only"):
            store.seen(crawl="seen-only").insert(b"\x02" * 16)
            with pytest.raises(InvalidArgument, match="not empty"), store.new_crawl(holds):
                pass
        store.frontier(crawl="empty", queues="host", delay=2.0)  # a policy, nothing else
        with pytest.raises(RuntimeError), store.new_crawl("empty") as frontier:
            assert frontier.policy.queues == "host"  # filled under the crawl's own policy
            frontier.push(Seed.get("https://b.test/"))
            store.seen(crawl="empty").insert(b"\x03" * 16)
            raise RuntimeError("the source broke")
        assert store.crawls() == ["a", "empty", "seen-only"]
        empty = store.frontier(crawl="empty")
        assert (empty.count(), len(store.seen(crawl="empty")), empty.policy.delay) == (0, 0, 2.0)
        with pytest.raises(RuntimeError), store.new_crawl("new"):
            store.frontier(crawl="new").push(Seed.get("https://c.test/"))
            raise RuntimeError
        assert "new" not in store.crawls()


def test_an_export_streams_a_large_seen_set(tmp_path: Path) -> None:
    """The seen set is read a batch at a time from the export's snapshot, never held whole
    (200,000 fingerprints take about 10 MB as Python bytes)."""
    import tracemalloc

    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        seen = store.seen()
        for _ in range(20):
            seen.insert_many([os.urandom(16) for _ in range(10_000)])
        tracemalloc.start()
        try:
            exported = sum(len(r["fps"]) for r in store.export() if r["type"] == "seen")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert exported == 200_000
    assert peak < 4_000_000, peak


def test_a_loaded_crawl_finds_its_urls_by_address(make_frontier: MakeFrontier) -> None:
    """A URL loaded from an export is found by its address, listed, and refused as a
    duplicate (a store in partitions finds a record through its URL's claim, which the load
    writes)."""
    f = make_frontier(queues="host")
    urls = [f"https://h{i % 3}.test/{i}" for i in range(12)]
    f.push_many([Seed.get(url) for url in urls])
    g = make_frontier(queues="host")
    g.core.load(list(f.core.export()))
    assert {g.url(url).state for url in urls} == {"queued"}
    assert sorted(u.url for u in g.urls(limit=100)) == sorted(urls)
    assert not g.push(Seed.get(urls[0]))
    assert g.stats().queued == 12
