"""Transactions that conflict (a store on Redis in partitions commits optimistically): the
library's operations run again by themselves, with every effect once; a caller's ``with``
block raises ``TransactionConflict`` with nothing written.

The conflicts are made: a storage that makes the next ``n`` commits of a transaction conflict
(the memory storage, alone and in partitions), and a store on Redis in partitions whose
all-or-nothing commit (``commit_all``) is made to find a version moved. One test runs two
clients of one crawl on Redis in partitions, where conflicts are real.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from helpers import seed

from crawlstore import (
    Admission,
    Done,
    Failed,
    InMemSeen,
    InMemValidators,
    ManualClock,
    Ready,
    Retry,
    Seed,
    Store,
)
from crawlstore.errors import TransactionConflict
from crawlstore.frontier import Frontier
from crawlstore.frontier.core import CoreFrontier
from crawlstore.frontier.facades import Facade
from crawlstore.frontier.traps import TrapPolicy
from crawlstore.integrations.httpx import Outcome, report_response
from crawlstore.journal import check_owner
from crawlstore.revalidate import Revalidate
from crawlstore.storages import MemoryStorage
from crawlstore.storages._partitioned import PartitionedMemoryStorage
from crawlstore.storages._redis import partitioned
from crawlstore.storages._redis.bucket import Conflict, commit_all

_T = TypeVar("_T")


class Conflicts:
    """How many of the next commits of a transaction conflict, and how many did."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.left = 0
        self.made = 0

    def arm(self, n: int) -> None:
        with self._lock:
            self.left = n

    def now(self) -> bool:
        """Whether the commit under way conflicts (one fewer to come)."""
        with self._lock:
            if self.left <= 0:
                return False
            self.left -= 1
            self.made += 1
            return True


class ConflictingMemory(MemoryStorage):
    """The memory storage, whose transactions conflict when ``conflicts`` says so: the
    transaction rolls back and raises ``TransactionConflict``; ``run`` runs it again."""

    def __init__(self, conflicts: Conflicts) -> None:
        super().__init__()
        self.conflicts = conflicts

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        outer = not check_owner(self._owner, self)
        with self.write():
            yield
            if outer and self.conflicts.now():
                raise TransactionConflict("a test's conflict: nothing was written")

    def transaction(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]
        return self._transaction()

    def run(self, operation: Callable[[], _T]) -> _T:
        joined = check_owner(self._owner, self)
        while True:
            try:
                with self._transaction():
                    return operation()
            except TransactionConflict:
                if joined:
                    raise


class ConflictingPartitions(PartitionedMemoryStorage):
    """The memory storage in partitions, whose transactions over every partition conflict
    when ``conflicts`` says so (``run`` runs them again)."""

    def __init__(self, conflicts: Conflicts) -> None:
        super().__init__(4)
        self.conflicts = conflicts

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        outer = self._scope.get() is None
        with super().transaction():
            yield
            if outer and self.conflicts.now():
                raise TransactionConflict("a test's conflict: nothing was written")

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self._transaction()

    def run(self, operation: Callable[[], _T]) -> _T:
        joined = self._scope.get() is not None
        while True:
            try:
                with self._transaction():
                    return operation()
            except TransactionConflict:
                if joined:
                    raise

    def view(self, operation: Callable[[], _T]) -> _T:  # a read: it never conflicts
        return PartitionedMemoryStorage.run(self, operation)


class Setup:
    """A storage whose commits conflict when armed: its crawls' frontiers and seen sets, and
    its transaction (the store's, or the frontier's without a store)."""

    def __init__(self, conflicts: Conflicts, clock: ManualClock) -> None:
        self.conflicts, self.clock = conflicts, clock
        self.store: Store | None = None
        self.memory: MemoryStorage | None = None

    def frontier(self, crawl: str) -> Frontier:
        if self.store is not None:
            return self.store.frontier("fifo", crawl=crawl, queues="host", max_in_flight=None)
        assert self.memory is not None
        return CoreFrontier(self.memory, crawl=crawl, clock=self.clock, order="fifo",
                            queues="host", max_in_flight=None)  # fmt: skip

    def seen(self, crawl: str) -> Any:
        return self.store.seen(crawl=crawl) if self.store is not None else InMemSeen()

    def transaction(self, frontier: Frontier) -> contextlib.AbstractContextManager[object]:
        return self.store.transaction() if self.store is not None else frontier.transaction()


@pytest.fixture(params=["memory", "partitioned", "redis-partitioned"])
def setup(
    request: pytest.FixtureRequest, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Setup]:
    conflicts = Conflicts()
    made = Setup(conflicts, clock)
    if request.param == "memory":
        made.memory = ConflictingMemory(conflicts)
        yield made
        return
    if request.param == "partitioned":
        with Store(ConflictingPartitions(conflicts), clock) as made.store:
            yield made
        return

    def conflicting_commit_all(server: Any, units: list[Any]) -> None:
        if any(unit.writes for unit in units) and conflicts.now():
            raise Conflict("a test's conflict: another client moved the bucket")
        commit_all(server, units)

    monkeypatch.setattr(partitioned, "commit_all", conflicting_commit_all)
    url = request.getfixturevalue("redis_url") + "&partitioned=1"
    with Store.open(url, clock=clock) as made.store:
        yield made


def twice(setup: Setup, scenario: Callable[[Frontier, str], Any], conflicts: int) -> Any:
    """``scenario`` on the crawl "calm", whose commits never conflict, then on the crawl
    "busy", where it makes ``conflicts`` commits conflict in all (``arm``): both give the same
    answers and states, and every conflict was consumed (its transaction ran again)."""
    calm = scenario(setup.frontier("calm"), "calm")
    assert setup.conflicts.made == 0
    busy = scenario(setup.frontier("busy"), "busy")
    assert busy == calm
    assert setup.conflicts.made == conflicts and setup.conflicts.left == 0
    return busy


def arm(crawl: str, setup: Setup, n: int) -> None:
    """Make the next ``n`` commits of a transaction conflict, on the crawl "busy" only."""
    if crawl == "busy":
        assert setup.conflicts.left == 0  # the ones armed before were all consumed
        setup.conflicts.arm(n)


def _urls(n: int, host: str = "e.com") -> list[Seed]:
    return [Seed.get(f"https://{host}/{i}") for i in range(n)]


def _state(frontier: Frontier) -> tuple[Any, ...]:
    snap = frontier.snapshot()
    return (frontier.stats(), sorted(s.url for s in snap.queued),
            sorted(s.url for s in snap.in_flight), len(frontier))  # fmt: skip


# -- the library's operations run again by themselves --------------------------------------------


class Tagged(Facade):
    """Tags the seeds it pushes: its ``push_many`` is ``Frontier``'s, a push a seed in one
    transaction."""

    def push(self, seed: Seed) -> Admission:
        return self.inner.push(seed.with_tag("t"))


def test_push_many_and_report_many_run_again_with_every_effect_once(setup: Setup) -> None:
    def scenario(f: Frontier, crawl: str) -> Any:
        chain = Tagged(f.retry(2))  # a batch of reports is Frontier's too: retry changes one
        batch = [*_urls(4), Seed.get("https://e.com/0"), *_urls(2, "other.com")]
        arm(crawl, setup, 2)
        admissions = chain.push_many(batch)
        ready = chain.pop_many(6)
        arm(crawl, setup, 3)
        ends = (Done, Failed, Retry)
        chain.report_many([ends[i % 3](r.seed) for i, r in enumerate(ready)])
        return [a.reason for a in admissions], _state(f)

    reasons, (stats, *_) = twice(setup, scenario, 5)
    assert reasons == [None] * 4 + ["duplicate"] + [None] * 2
    assert stats.admitted == 6 and stats.done == 2 and stats.failed == 2
    assert stats.retried == 2 and stats.scheduled == 2 and stats.in_flight == 0


@pytest.mark.parametrize("kind", ["memory", "store"])
def test_the_dedup_facade_s_batch_runs_again_with_every_effect_once(
    setup: Setup, kind: str
) -> None:
    if kind == "store" and setup.store is None:
        pytest.skip("a seen set of a store")
    sets: dict[str, Any] = {}

    def scenario(f: Frontier, crawl: str) -> Any:
        seen = sets[crawl] = InMemSeen() if kind == "memory" else setup.seen(crawl)
        d = f.dedup_with(seen)
        d.push(Seed.get("https://e.com/known"))
        batch = [*_urls(3), Seed.get("https://e.com/known"), Seed.get("https://e.com/1")]
        arm(crawl, setup, 2)
        first = d.push_many(batch)
        again = d.push_many(_urls(4))  # the seen set holds what the batch admitted, once
        return [a.reason for a in first], [a.reason for a in again], len(seen), _state(f)

    first, again, size, (stats, *_) = twice(setup, scenario, 2)
    assert first == [None, None, None, "duplicate", "duplicate"]
    assert again == ["duplicate", "duplicate", "duplicate", None]
    assert size == 5 and stats.admitted == 5 and stats.refused == {"duplicate": 5}


def test_the_trap_facade_s_push_runs_again_with_every_effect_once(setup: Setup) -> None:
    def scenario(f: Frontier, crawl: str) -> Any:
        traps = f.avoid_traps_with(TrapPolicy(max_urls=3))
        answers = []
        for i in range(5):
            arm(crawl, setup, 1)
            answers.append(traps.push(Seed.get(f"https://e.com/cal/{i}")).reason)
        return answers, traps.blocked(), traps.refused(), _state(f)

    answers, blocked, refused, (stats, *_) = twice(setup, scenario, 5)
    assert answers == [None, None, None, "trap", "trap"]
    assert [(b.prefix, b.urls, b.refused) for b in blocked] == [("https://e.com/cal/", 4, 2)]
    assert refused == 2 and stats.admitted == 3


def test_the_worker_runs_a_group_again_with_every_effect_once(setup: Setup) -> None:
    calls: dict[str, int] = {}

    def scenario(f: Frontier, crawl: str) -> Any:
        d = f.dedup_with(setup.seen(crawl))
        d.push_many(_urls(6))
        calls[crawl] = 0

        def unit() -> str:  # a read inside the group finds its bucket moved: once
            calls[crawl] += 1
            if crawl == "busy" and calls[crawl] == 1:
                raise Conflict("a test's conflict: a read found its bucket moved")
            d.push(Seed.get("https://e.com/from-a-unit"))
            return "written"

        with d.worker(prefetch=6, poll=0.05) as worker:
            got = [worker.next(timeout=10) for _ in range(6)]
            assert all(isinstance(r, Ready) for r in got)
            arm(crawl, setup, 3)
            pages = [worker.finish(Done(r.seed), [seed(f"p{n}"), seed("shared")])
                     for n, r in enumerate(got) if r is not None]  # fmt: skip
            submitted = worker.submit(unit)
            admissions = [[a.reason for a in page.result(timeout=10)] for page in pages]
            written = submitted.result(timeout=10)
            rest = 0
            for ready in worker:  # the links
                worker.finish(Done(ready.seed)).result(timeout=10)
                rest += 1
        return admissions, written, rest, _state(f)

    admissions, written, rest, (stats, queued, in_flight, held) = twice(setup, scenario, 3)
    assert admissions == [[None, None]] + [[None, "duplicate"]] * 5
    assert written == "written" and calls["calm"] == 1 and calls["busy"] >= 2
    assert rest == 8 and stats.done == 14 and stats.admitted == 14 and stats.popped == 14
    assert stats.in_flight == 0 and not queued and not in_flight and held == 0


def test_revalidate_done_runs_again_and_counts_dropped_validators_once(setup: Setup) -> None:
    revalidators: dict[str, Revalidate] = {}

    def scenario(f: Frontier, crawl: str) -> Any:
        revalidate = revalidators[crawl] = Revalidate(InMemValidators())
        f.push_many(_urls(2))
        first, second = [r.seed for r in f.pop_many(2)]
        arm(crawl, setup, 2)
        revalidate.done(f, first, 200, {"etag": '"a"\r\nX-Evil: 1'})  # dropped
        arm(crawl, setup, 1)
        revalidate.done(f, second, 200, {"etag": '"b"'})
        return revalidate.dropped, revalidate.validators.get(second.fingerprint), _state(f)

    dropped, validator, (stats, *_) = twice(setup, scenario, 3)
    assert dropped == 1 and validator is not None and validator.etag == '"b"'
    assert stats.done == 2


def test_report_response_runs_again_and_pushes_its_links_once(setup: Setup) -> None:
    def scenario(f: Frontier, crawl: str) -> Any:
        f.push(Seed.get("https://e.com/"))
        [ready] = f.pop_many(1)
        response = httpx.Response(200, request=httpx.Request("GET", ready.seed.url))
        links = (Seed.get(f"https://e.com/{i}") for i in range(3))  # an iterator: read once
        arm(crawl, setup, 2)
        outcome = report_response(f, ready.seed, response, links=links)
        return outcome, _state(f)

    outcome, (stats, queued, *_) = twice(setup, scenario, 2)
    assert outcome is Outcome.DONE and stats.done == 1 and stats.admitted == 4
    assert queued == [f"https://e.com/{i}" for i in range(3)]


# -- a caller's transactions -----------------------------------------------------------------


def test_a_with_block_that_conflicts_raises_with_nothing_written(setup: Setup) -> None:
    f = setup.frontier("c")
    seen = setup.seen("c")
    d = f.dedup_with(seen)
    one = Seed.get("https://e.com/1")
    setup.conflicts.arm(1)
    with pytest.raises(TransactionConflict), setup.transaction(f):
        assert d.push(one)
        assert all(d.push_many(_urls(3, "other.com")))
    assert setup.conflicts.made == 1
    assert len(f) == 0 and f.stats().admitted == 0 and one.fingerprint not in seen
    with setup.transaction(f):  # run again, it commits
        assert d.push(one)
        assert all(d.push_many(_urls(3, "other.com")))
    assert len(f) == 4 and f.stats().admitted == 4 and one.fingerprint in seen


def test_atomic_runs_again_and_joins_an_outer_transaction(setup: Setup) -> None:
    f = setup.frontier("c").dedup_with(InMemSeen())
    runs = 0

    def push() -> bool:
        nonlocal runs
        runs += 1
        return bool(f.push(Seed.get(f"https://e.com/{runs}")))

    setup.conflicts.arm(2)
    assert f.atomic(push) is True
    assert runs == 3 and setup.conflicts.made == 2
    assert [s.url for s in f.snapshot().queued] == ["https://e.com/3"]  # the run that committed
    setup.conflicts.arm(1)
    with pytest.raises(TransactionConflict), setup.transaction(f):
        assert f.atomic(push) is True  # joined: once, and the outer transaction conflicts
    assert runs == 4 and len(f) == 1 and f.stats().admitted == 1


# -- real conflicts: two clients of one crawl on Redis in partitions -------------------------


N = 150


def _links(url: str) -> list[Seed]:
    """Three links a page, many of them to pages another page links to as well."""
    i = int(url.rsplit("/", 1)[1])
    return [Seed.get(f"https://h{j % 6}.example/{j}") for j in {(2 * i + 1) % N,
            (3 * i + 2) % N, (i + 1) % N}]  # fmt: skip


@pytest.mark.parametrize("loop", ["worker", "atomic"])
def test_two_clients_crawl_one_crawl_on_redis_in_partitions(redis_url: str, loop: str) -> None:
    url = redis_url + "&partitioned=1"
    with Store.open(url) as store:
        start = store.frontier("fifo", crawl="c", queues="host", max_in_flight=None)
        start.dedup_with(store.seen(crawl="c")).push(Seed.get("https://h0.example/0"))
    done: list[list[str]] = [[], []]
    errors: list[BaseException] = []
    together = threading.Barrier(2)

    def client(k: int) -> None:
        try:
            with Store.open(url) as store:
                f = store.frontier(crawl="c").dedup_with(store.seen(crawl="c"))
                together.wait(timeout=30)
                if loop == "worker":
                    with f.worker(prefetch=8, group=8, poll=0.01) as worker:
                        for ready in worker:
                            links = _links(ready.seed.url)
                            worker.finish(Done(ready.seed), links).result(timeout=60)
                            done[k].append(ready.seed.url)
                    return
                while True:
                    batch = [ready.seed for ready in f.pop_many(8)]
                    if not batch:
                        one = f.next_seed(timeout=60, poll=0.01)
                        if one is None:
                            return
                        batch = [one]

                    def page(batch: list[Seed] = batch) -> None:
                        f.report_many([Done(s) for s in batch])
                        f.push_many([link for s in batch for link in _links(s.url)])

                    f.atomic(page)
                    done[k] += [s.url for s in batch]
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert not errors, errors
    every = done[0] + done[1]
    assert len(every) == N and len(set(every)) == N  # each page once, by one client
    with Store.open(url) as store:
        stats = store.frontier(crawl="c").stats()
    assert stats.admitted == stats.done == stats.popped == N
    assert stats.in_flight == 0 and stats.queued == 0 and stats.failed == 0
