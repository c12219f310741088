"""A pop with a per-call in-flight cap (the URL Frontier's ``max_urls_per_queue``) walks only
the queues it may take from or must tend: the storages' index by load (``due_queues``'s
``below``). Over every storage: what it finds, and a state machine that runs the same steps on
two crawls, one walked through that index and one through the whole index of due queues (as
pops walked before it), and finds them handing out the same seeds in the same order."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import MakeFrontier, ordered_across_queues
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from redis_servers import NO_SERVER, have_server, shared_node

from crawlstore import Cancelled, Done, InMemFrontier, ManualClock, Seed, Store
from crawlstore.errors import InvalidArgument, NotInFlight
from crawlstore.frontier import Frontier
from crawlstore.frontier.core import CoreFrontier

HOSTS = [f"h{i}.test" for i in range(5)]
LEASE = 30.0
POLICY: dict[str, Any] = {"queues": "host", "delay": 0, "max_in_flight": None, "lease_time": LEASE}


def page(host: int, n: int) -> Seed:
    return Seed.get(f"https://{HOSTS[host]}/{n}")


def fill(f: CoreFrontier, hosts: int, pages: int) -> None:
    f.push_many(page(h, n) for h in range(hosts) for n in range(pages))


def test_queues_at_the_cap_are_not_walked_but_tended(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier("fifo", **POLICY).core
    fill(f, 4, 4)
    first = f.pop_many(8, per_queue=2, max_in_flight=2, remote=True)
    assert sorted(r.seed.url for r in first) == sorted(
        page(h, n).url for h in range(4) for n in range(2)
    )
    assert f.pop_many(8, per_queue=2, max_in_flight=2, remote=True) == []
    # a larger cap finds them all again, in the order of the index
    more = f.pop_many(8, per_queue=1, max_in_flight=3, remote=True)
    urls = [r.seed.url for r in more]
    if not ordered_across_queues(f):  # (then in the order of each partition's index)
        more.sort(key=lambda r: r.seed.url)
        urls.sort()
    assert urls == [page(h, 2).url for h in range(4)]
    # a lease of a queue at the cap expires: its queue is tended and hands its seed out again
    f.extend_lease(first[0].seed, 1)  # one of h0's
    clock.advance(2)
    again = f.pop_many(8, per_queue=1, max_in_flight=3, remote=True)
    assert [r.seed.url for r in again] == [first[0].seed.url]
    # a schedule that falls due in a queue at the cap is tended (queued), not handed out
    f.report(Done(more[1].seed))
    f.schedule(more[1].seed, clock() + 5)  # h1 has 2 in flight: at the cap of 2
    clock.advance(5)
    assert f.url(more[1].seed.url).state == "scheduled"
    assert f.pop_many(8, per_queue=1, max_in_flight=2, remote=True) == []
    assert f.url(more[1].seed.url).state == "queued"


def test_a_capped_walk_costs_what_it_returns(make_frontier: MakeFrontier) -> None:
    """With every queue at the cap, a pop reads no queue at all (counted at the storage)."""
    f = make_frontier("fifo", **POLICY).core
    f.push_many(Seed.get(f"https://q{i}.test/{n}") for i in range(60) for n in range(2))
    assert len(f.pop_many(200, per_queue=1, max_in_flight=1, remote=True)) == 60
    storage = f.storage
    calls: list[int] = []
    due = storage.due_queues

    def counted(crawl: Any, now: float, limit: int, below: int | None = None) -> Any:
        found = due(crawl, now, limit, below)
        calls.append(len(found))
        return found

    storage.due_queues = counted  # type: ignore[method-assign]
    try:
        assert f.pop_many(50, per_queue=1, max_in_flight=1, remote=True) == []
        assert sum(calls) == 0, calls
        assert len(f.pop_many(50, per_queue=1, max_in_flight=2, remote=True)) == 50
    finally:
        del storage.due_queues


# -- the same steps walked both ways ---------------------------------------------------------


class _WholeWalk:
    """A storage whose ``due_queues`` ignores ``below``: every due queue, as before the index."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def due_queues(self, crawl: Any, now: float, limit: int, below: int | None = None) -> Any:
        return self._inner.due_queues(crawl, now, limit)


class CappedWalkMachine(RuleBasedStateMachine):
    storage = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.dir = Path(tempfile.mkdtemp(prefix="crawlstore-capped-"))
        self.store: Store | None = None
        if self.storage == "memory":
            fronts: list[Frontier] = [
                InMemFrontier("fifo", clock=self.clock, **POLICY) for _ in range(2)
            ]
        else:
            self.store = self._open()
            fronts = [self.store.frontier("fifo", crawl=name, **POLICY)
                      for name in ("indexed", "walked")]  # fmt: skip
        self.indexed, self.walked = (f.core for f in fronts)
        self.walked.storage = _WholeWalk(self.walked.storage)  # type: ignore[assignment]
        self.held: list[tuple[Seed, Seed]] = []

    def _open(self) -> Store:
        if self.storage == "redis":
            node = shared_node()
            assert node is not None
            return Store.open(f"redis://127.0.0.1:{node.port}/0?ns=cw{os.getpid()}-{id(self)}",
                              clock=self.clock)  # fmt: skip
        return Store.open(self.dir / "s.lmdb", clock=self.clock, durability="nosync")

    def both(self, step: Any) -> Any:
        """``step`` on each crawl; what each returned (or the type of what it raised)."""
        out = []
        for f in (self.indexed, self.walked):
            try:
                out.append(step(f))
            except InvalidArgument as exc:
                out.append(type(exc))
        assert out[0] == out[1], out
        return out

    @rule(host=st.integers(0, 4), n=st.integers(0, 9))
    def push(self, host: int, n: int) -> None:
        self.both(lambda f: [bool(a) for a in f.push_many([page(host, n)])])

    @rule(limit=st.integers(1, 6), cap=st.integers(1, 3), per=st.sampled_from([None, 1, 2]))
    def pop(self, limit: int, cap: int, per: int | None) -> None:
        got = [
            f.pop_many(limit, per_queue=per, max_in_flight=cap, remote=True)
            for f in (self.indexed, self.walked)
        ]
        urls = [[(r.seed.url, r.lease.expires) for r in g] for g in got]
        assert urls[0] == urls[1], urls
        self.held += [(a.seed, b.seed) for a, b in zip(*got, strict=True)]

    @rule(i=st.integers(0, 50), kind=st.sampled_from(["done", "cancel", "later"]))
    def report(self, i: int, kind: str) -> None:
        if not self.held:
            return
        pair = self.held.pop(i % len(self.held))
        out: list[object] = []
        for f, seed in zip((self.indexed, self.walked), pair, strict=True):
            try:
                f.report(Cancelled(seed) if kind == "cancel" else Done(seed))
            except NotInFlight as exc:  # its lease expired (and the seed may be out again)
                out.append(type(exc))
                continue
            out.append(None)
            if kind == "later":
                f.schedule(seed, self.clock() + 3)
        assert out[0] == out[1], out

    @rule(host=st.integers(0, 4), n=st.integers(0, 9), after=st.sampled_from([0, 2, 40]))
    def schedule(self, host: int, n: int, after: int) -> None:
        self.both(lambda f: f.schedule(page(host, n), self.clock() + after))

    @rule(i=st.integers(0, 50), seconds=st.sampled_from([1, 5]))
    def extend(self, i: int, seconds: int) -> None:
        if not self.held:
            return
        pair = self.held[i % len(self.held)]
        out = []
        for f, seed in zip((self.indexed, self.walked), pair, strict=True):
            try:
                out.append(f.extend_lease(seed, seconds).expires)
            except NotInFlight as exc:
                out.append(type(exc))
        assert out[0] == out[1], out

    @rule(seconds=st.sampled_from([0.5, 1, 3, 31]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @invariant()
    def same_state(self) -> None:
        stats = [f.stats() for f in (self.indexed, self.walked)]
        assert stats[0] == stats[1], stats

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close()
            if self.storage == "lmdb":
                from crawlstore.storages._lmdb.verify import verify

                assert verify(self.dir / "s.lmdb") == []
        shutil.rmtree(self.dir, ignore_errors=True)


class LmdbCappedWalkMachine(CappedWalkMachine):
    storage = "lmdb"


class RedisCappedWalkMachine(CappedWalkMachine):
    storage = "redis"


TestMemoryCappedWalk = CappedWalkMachine.TestCase
TestMemoryCappedWalk.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
TestLmdbCappedWalk = LmdbCappedWalkMachine.TestCase
TestLmdbCappedWalk.settings = settings(max_examples=40, stateful_step_count=40, deadline=None)
TestRedisCappedWalk = RedisCappedWalkMachine.TestCase
TestRedisCappedWalk.settings = settings(max_examples=10, stateful_step_count=30, deadline=None)
if not have_server():
    TestRedisCappedWalk = pytest.mark.skip(reason=NO_SERVER)(TestRedisCappedWalk)
