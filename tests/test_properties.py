"""Hypothesis: every storage against a plain model of the frontier."""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from crawlstore import (
    Cancelled,
    Done,
    Empty,
    Failed,
    InMemFrontier,
    ManualClock,
    Ready,
    Seed,
    Skipped,
    Store,
    Wait,
)
from crawlstore.frontier import Frontier
from crawlstore.frontier.protocol import Reschedule


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
        popped.append(r.seed)
    assert popped == [seeds[i] for i in model]


class Model:
    """What a FIFO frontier holds: seeds that came back go first, then pushed ones."""

    def __init__(self) -> None:
        self.front: list[Seed] = []  # due or cancelled seeds, in the order they came back
        self.queued: list[Seed] = []  # pushed seeds, FIFO
        self.in_flight: list[Seed] = []
        self.scheduled: dict[bytes, tuple[float, int, Seed]] = {}
        self.seq = 0
        self.finished = 0


class FrontierMachine(RuleBasedStateMachine):
    """Push, pop, report and schedule on a FIFO storage, checked against ``Model``."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.m = Model()
        self.frontier = self.make()

    def make(self) -> Frontier:
        return InMemFrontier.fifo(clock=self.clock)

    def _release_due(self) -> None:
        for _, _, s in sorted(v for v in self.m.scheduled.values() if v[0] <= self.clock()):
            del self.m.scheduled[s.fingerprint]
            self.m.front.append(s)

    # -- operations, shared by the rules and by grouped transactions ----------------------------

    def do_push(self, n: int) -> None:
        s = Seed.get(f"https://example.com/{n}")
        assert self.frontier.push(s)
        self.m.queued.append(s)

    def do_pop(self) -> None:
        self._release_due()
        result = self.frontier.pop()
        if self.m.front or self.m.queued:
            expected = self.m.front.pop(0) if self.m.front else self.m.queued.pop(0)
            assert result == Ready(expected)
            self.m.in_flight.append(expected)
        elif self.m.scheduled:
            assert result == Wait(min(v[0] for v in self.m.scheduled.values()))
        else:
            assert result is Empty

    def do_report(self, i: int, kind: type) -> None:
        if not self.m.in_flight:
            return
        s = self.m.in_flight.pop(i % len(self.m.in_flight))
        if kind is Reschedule:
            self.frontier.report(Reschedule(s, self.clock() + i % 7))
            self._schedule_model(s, self.clock() + i % 7)
            return
        self.frontier.report(kind(s))
        if kind is Cancelled:
            self.m.front.append(s)
        else:
            self.m.finished += 1

    def _schedule_model(self, s: Seed, at: float) -> None:
        self.m.seq += 1
        self.m.scheduled[s.fingerprint] = (at, self.m.seq, s)

    # -- rules ----------------------------------------------------------------------------------

    @rule(n=st.integers(0, 50))
    def push(self, n: int) -> None:
        self.do_push(n)

    @rule()
    def pop(self) -> None:
        self.do_pop()

    @precondition(lambda self: self.m.in_flight)
    @rule(
        i=st.integers(0, 100),
        kind=st.sampled_from([Done, Failed, Skipped, Cancelled, Reschedule]),
    )
    def report(self, i: int, kind: type) -> None:
        self.do_report(i, kind)

    @rule(n=st.integers(0, 50), delay=st.integers(0, 20))
    def schedule(self, n: int, delay: int) -> None:
        s = Seed.get(f"https://example.com/s{n}")
        self.frontier.schedule(s, self.clock() + delay)
        self._schedule_model(s, self.clock() + delay)

    @rule(seconds=st.integers(1, 10))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @invariant()
    def counts_match(self) -> None:
        stats = self.frontier.stats()
        assert stats.in_flight == len(self.m.in_flight)
        held = len(self.m.queued) + len(self.m.front) + len(self.m.scheduled)
        assert stats.queued + stats.scheduled == held
        assert len(self.frontier) == stats.queued + stats.scheduled + stats.in_flight
        assert stats.done + stats.failed + stats.skipped == self.m.finished

    @invariant()
    def nothing_lost_or_doubled(self) -> None:
        snap = self.frontier.snapshot()
        assert Counter(snap.in_flight) == Counter(self.m.in_flight)
        held = [*self.m.front, *self.m.queued]
        assert Counter(snap.queued) == Counter(held)
        assert Counter(s for _, s in snap.scheduled) == Counter(
            s for _, _, s in self.m.scheduled.values()
        )


class StoreMachine(FrontierMachine):
    """The same model on the store, plus grouped transactions and close-and-reopen."""

    def make(self) -> Frontier:
        self.dir = Path(tempfile.mkdtemp(prefix="crawlstore-sm-"))
        self.store = Store.open(self.dir / "s.lmdb", clock=self.clock, durability="group")
        return self.store.frontier("fifo")

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = Store.open(self.dir / "s.lmdb", clock=self.clock, durability="group")
        self.frontier = self.store.frontier()

    @rule(
        ops=st.lists(
            st.tuples(st.sampled_from(["push", "pop", "done", "cancel"]), st.integers(0, 50)),
            min_size=1,
            max_size=6,
        ),
        commit=st.booleans(),
    )
    def transaction(self, ops: list[tuple[str, int]], commit: bool) -> None:
        saved = copy.deepcopy(self.m)
        try:
            with self.store.transaction():
                for op, n in ops:
                    if op == "push":
                        self.do_push(n)
                    elif op == "pop":
                        self.do_pop()
                    else:
                        self.do_report(n, Done if op == "done" else Cancelled)
                if not commit:
                    raise _Rollback
        except _Rollback:
            self.m = saved

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class _Rollback(Exception):
    pass


TestFrontierMachine = FrontierMachine.TestCase
TestFrontierMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
