"""Hypothesis: every storage against a plain model of the frontier."""

from __future__ import annotations

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
    Wait,
)


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


class FrontierModel(RuleBasedStateMachine):
    """Push, pop, report and schedule against a model of queued / in-flight / scheduled seeds."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.frontier = InMemFrontier.fifo(clock=self.clock)
        self.front: list[Seed] = []  # seeds that came back (due, cancelled): popped first
        self.queued: list[Seed] = []  # pushed seeds, FIFO
        self.in_flight: list[Seed] = []
        self.scheduled: dict[bytes, tuple[float, int, Seed]] = {}
        self.seq = 0
        self.done = 0

    def _release_due(self) -> None:
        due = sorted(v for v in self.scheduled.values() if v[0] <= self.clock())
        for _, _, s in due:
            del self.scheduled[s.fingerprint]
            self.front.append(s)

    @rule(n=st.integers(0, 50))
    def push(self, n: int) -> None:
        s = Seed.get(f"https://example.com/{n}")
        assert self.frontier.push(s)
        self.queued.append(s)

    @rule()
    def pop(self) -> None:
        self._release_due()
        result = self.frontier.pop()
        if self.front or self.queued:
            expected = self.front.pop(0) if self.front else self.queued.pop(0)
            assert result == Ready(expected)
            self.in_flight.append(expected)
        elif self.scheduled:
            assert result == Wait(min(v[0] for v in self.scheduled.values()))
        else:
            assert result is Empty

    @precondition(lambda self: self.in_flight)
    @rule(i=st.integers(0, 100), kind=st.sampled_from([Done, Failed, Skipped, Cancelled]))
    def report(self, i: int, kind: type) -> None:
        s = self.in_flight.pop(i % len(self.in_flight))
        self.frontier.report(kind(s))
        if kind is Cancelled:
            self.front.append(s)
        else:
            self.done += 1

    @rule(n=st.integers(0, 50), delay=st.integers(0, 20))
    def schedule(self, n: int, delay: int) -> None:
        s = Seed.get(f"https://example.com/s{n}")
        self.seq += 1
        self.scheduled[s.fingerprint] = (self.clock() + delay, self.seq, s)
        self.frontier.schedule(s, self.clock() + delay)

    @rule(seconds=st.integers(1, 10))
    def advance(self, seconds: int) -> None:
        self.clock.advance(seconds)

    @invariant()
    def counts_match(self) -> None:
        stats = self.frontier.stats()
        assert stats.in_flight == len(self.in_flight)
        held = len(self.queued) + len(self.front) + len(self.scheduled)
        assert stats.queued + stats.scheduled == held
        assert len(self.frontier) == stats.queued + stats.scheduled + stats.in_flight
        assert stats.done + stats.failed + stats.skipped == self.done


TestFrontierModel = FrontierModel.TestCase
TestFrontierModel.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
