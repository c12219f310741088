"""Facades on every storage: each rule, and the order in which a push flows through them."""

from __future__ import annotations

import enum
import random

import pytest
from helpers import MakeFrontier, drain, path_of, pop_seeds, seed

from crawlstore import (
    Backoff,
    BloomSeen,
    Done,
    Empty,
    InMemSeen,
    ManualClock,
    Ready,
    Retry,
    RetryPolicy,
    Seed,
    Wait,
)
from crawlstore.frontier import Frontier, Reason


def pop_seed(f: Frontier) -> Seed:
    popped = f.pop()
    assert isinstance(popped, Ready), popped
    return popped.seed


# -- dedup --------------------------------------------------------------------------------------


def test_dedup_refuses_a_second_push(make_frontier: MakeFrontier) -> None:
    f = make_frontier().dedup()
    assert f.push(seed("a"))
    again = f.push(seed("a#frag", tag="other"))
    assert not again and again.reason is Reason.DUPLICATE
    assert f.stats().refused == {"duplicate": 1} and f.stats().pushed == 2


def test_dedup_with_a_shared_seen_set(make_frontier: MakeFrontier) -> None:
    seen = InMemSeen()
    f = make_frontier().dedup_with(seen)
    f.push(seed("a"))
    assert seed("a").fingerprint in seen and len(seen) == 1
    assert not f.push(seed("a"))


def test_dedup_with_bloom(make_frontier: MakeFrontier) -> None:
    f = make_frontier().dedup_with(BloomSeen(1000, 0.01))
    assert f.push(seed("a")) and not f.push(seed("a"))


def test_dedup_records_only_admitted_seeds(make_frontier: MakeFrontier) -> None:
    # max_depth inside dedup: the refused seed is not burnt (spire's pitfall, fixed).
    seen = InMemSeen()
    f = make_frontier().max_depth(1).dedup_with(seen)
    assert f.push(seed("a", depth=2)).reason is Reason.TOO_DEEP
    assert len(seen) == 0
    assert f.push(seed("a", depth=1))
    assert len(seen) == 1


def test_dedup_does_not_refuse_retried_seeds(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().dedup().retry(2)
    f.push(seed("a"))
    f.report(Retry(pop_seed(f)))
    clock.advance(10)
    assert pop_seed(f).attempt == 2


# -- filters ------------------------------------------------------------------------------------


def test_allow_hosts_admits_subdomains_only(make_frontier: MakeFrontier) -> None:
    f = make_frontier().allow_hosts(["Example.COM", "münchen.de"])
    ok = ["https://example.com/", "https://a.b.example.com/x", "http://EXAMPLE.com:8080/",
          "https://xn--mnchen-3ya.de/", "https://www.münchen.de/"]  # fmt: skip
    bad = ["https://badexample.com/", "https://example.org/", "https://com/",
           "https://example.com.evil.org/"]  # fmt: skip
    for url in ok:
        assert f.push(Seed.get(url)), url
    for url in bad:
        assert f.push(Seed.get(url)).reason is Reason.OUT_OF_SCOPE, url
    assert f.stats().refused == {"out_of_scope": len(bad)}


def test_allow_hosts_rejects_a_bare_string(make_frontier: MakeFrontier) -> None:
    with pytest.raises(TypeError, match="list of hosts"):
        make_frontier().allow_hosts("example.com")


def test_filter_refuses_by_predicate(make_frontier: MakeFrontier) -> None:
    f = make_frontier().filter(lambda s: not s.url.endswith(".pdf"))
    assert f.push(seed("a.html"))
    assert f.push(seed("b.pdf")).reason is Reason.FILTERED


def test_max_depth_allows_n_refuses_n_plus_one(make_frontier: MakeFrontier) -> None:
    f = make_frontier().max_depth(2)
    assert f.push(seed("a", depth=2))
    assert f.push(seed("b", depth=3)).reason is Reason.TOO_DEEP
    with pytest.raises(ValueError):
        make_frontier().max_depth(-1)


# -- retry --------------------------------------------------------------------------------------


def test_retry_policy_delays_double_to_a_cap_with_jitter() -> None:
    exact = RetryPolicy(10, jitter=0)
    assert [exact.delay(k) for k in range(1, 9)] == [0.5, 1, 2, 4, 8, 16, 30, 30]
    jittered = RetryPolicy(10).with_rng(random.Random(1))
    for k in range(1, 9):
        full = exact.delay(k)
        for _ in range(50):
            assert 0.8 * full <= jittered.delay(k) <= full
    assert RetryPolicy(1).with_jitter(1.5).jitter == 1.0
    assert RetryPolicy(1).with_base_delay(2).with_max_delay(3).with_jitter(0).delay(2) == 3


def test_retry_schedules_then_fails(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().retry_with(RetryPolicy(2, jitter=0))
    f.push(seed("a"))
    start = clock()
    f.report(Retry(pop_seed(f)))
    assert f.pop() == Wait(start + 0.5)
    clock.advance(0.5)
    second = pop_seed(f)
    assert second.attempt == 2
    f.report(Retry(second))
    assert f.pop() == Wait(clock() + 1.0)
    clock.advance(1.0)
    third = pop_seed(f)
    assert third.attempt == 3
    f.report(Retry(third))  # a third retry is refused: the seed fails
    s = f.stats()
    assert (s.retried, s.failed, len(f)) == (2, 1, 0)
    assert f.pop() is Empty


def test_retry_first_delay_with_default_jitter(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().retry(3)
    f.push(seed("a"))
    f.report(Retry(pop_seed(f)))
    popped = f.pop()
    assert isinstance(popped, Wait) and 0.4 <= popped.until - clock() <= 0.5


def test_retry_after_overrides_the_policy(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().retry(1)
    f.push(seed("a"))
    f.report(Retry(pop_seed(f), after=60))
    assert f.pop() == Wait(clock() + 60)


def test_retry_zero_fails_at_once(make_frontier: MakeFrontier) -> None:
    f = make_frontier().retry(0)
    f.push(seed("a"))
    f.report(Retry(pop_seed(f)))
    assert f.stats().failed == 1 and f.pop() is Empty


# -- tag backoff --------------------------------------------------------------------------------


class Site(enum.Enum):
    A = 1
    B = 2


def test_tag_backoff_parks_a_tag_in_order(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().tag_backoff()
    f.push_many([seed("a1", tag=Site.A), seed("b1", tag="B"), seed("a2", tag="A"),
                 seed("b2", tag="B"), seed("a3", tag="A")])  # fmt: skip
    f.report(Backoff(Site.A, until=clock() + 30))
    assert drain(f) == ["b1", "b2"]
    assert f.pop() == Wait(clock() + 30)
    assert len(f) == 3 and {s.tag for s in f.snapshot()} == {"A"}
    clock.advance(30)
    assert drain(f) == ["a1", "a2", "a3"]


def test_tag_backoff_none_pauses_untagged_only(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().tag_backoff()
    f.push_many([seed("u1"), seed("t1", tag="t"), seed("u2")])
    f.report(Backoff(None, until=clock() + 5))
    assert drain(f) == ["t1"]
    clock.advance(5)
    assert drain(f) == ["u1", "u2"]


def test_tag_backoff_keeps_the_later_pause(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().tag_backoff()
    f.push(seed("a", tag="t"))
    f.report(Backoff("t", until=clock() + 50))
    f.report(Backoff("t", until=clock() + 10))
    assert f.pop() == Wait(clock() + 50)


def test_tag_backoff_with_retry(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier().retry_with(RetryPolicy(3, jitter=0)).tag_backoff()
    f.push_many([seed("a", tag="t"), seed("b", tag="u")])
    first = pop_seed(f)
    f.report(Backoff("t", until=clock() + 100))
    f.report(Retry(first))
    assert drain(f) == ["b"]
    clock.advance(1)
    assert f.pop() == Wait(clock() + 99)  # the retry is due but its tag is paused
    clock.advance(99)
    assert [s.attempt for s in [pop_seed(f)]] == [2]


# -- score --------------------------------------------------------------------------------------


def test_score_adds_to_priority_and_saturates(make_frontier: MakeFrontier) -> None:
    f = make_frontier("priority").score(lambda s: 10 if "good" in s.url else 0)
    f.push_many([seed("plain", priority=5), seed("good", priority=0),
                 seed("goodmax", priority=2**31 - 1), seed("neg", priority=-(2**31))])  # fmt: skip
    first = pop_seed(f)
    assert first.priority == 2**31 - 1 and path_of(Ready(first)) == "goodmax"
    assert [path_of(Ready(pop_seed(f))) for _ in range(3)] == ["good", "plain", "neg"]
    low = make_frontier("priority").score(lambda s: -10)
    low.push(seed("x", priority=-(2**31) + 1))
    assert pop_seed(low).priority == -(2**31)


# -- order of facades ---------------------------------------------------------------------------


def test_push_flows_from_the_outermost_facade(make_frontier: MakeFrontier) -> None:
    calls: list[str] = []

    def spy(name: str):  # type: ignore[no-untyped-def]
        def predicate(s: Seed) -> bool:
            calls.append(name)
            return True

        return predicate

    f = make_frontier().filter(spy("inner")).filter(spy("outer"))
    f.push(seed("a"))
    assert calls == ["outer", "inner"]


def test_full_chain(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = (
        make_frontier()
        .dedup()
        .allow_hosts(["example.com"])
        .filter(lambda s: not s.url.endswith(".pdf"))
        .max_depth(5)
        .retry(3)
        .tag_backoff()
    )
    results = f.push_many([seed("a"), seed("a"), Seed.get("https://other.org/"),
                           seed("x.pdf"), seed("deep", depth=6)])  # fmt: skip
    assert [r.reason for r in results] == [None, Reason.DUPLICATE, Reason.OUT_OF_SCOPE,
                                           Reason.FILTERED, Reason.TOO_DEEP]  # fmt: skip
    a = pop_seed(f)
    f.report(Done(a))
    assert f.stats().done == 1 and len(f) == 0
    assert repr(f).endswith("Dedup.AllowHosts.Filter.MaxDepth.RetryFacade.TagBackoff")


def test_facade_wraps_only_frontiers() -> None:
    from crawlstore.frontier import Dedup

    with pytest.raises(TypeError, match="wraps a Frontier"):
        Dedup(object(), InMemSeen())  # type: ignore[arg-type]


# -- batches ------------------------------------------------------------------------------------


def test_push_many_answers_in_order_through_every_facade(make_frontier: MakeFrontier) -> None:
    f = make_frontier().dedup().allow_hosts(["example.com"]).max_depth(2).score(lambda s: 1)
    batch = [seed("a"), seed("a#x"), Seed.get("https://other.org/"), seed("deep", depth=3),
             seed("b"), seed("a")]  # fmt: skip
    reasons = [a.reason for a in f.push_many(batch)]
    assert reasons == [None, Reason.DUPLICATE, Reason.OUT_OF_SCOPE, Reason.TOO_DEEP, None,
                       Reason.DUPLICATE]  # fmt: skip
    assert f.stats().admitted == 2 and f.stats().pushed == 6
    assert [s.priority for s in pop_seeds(f, 10)] == [1, 1]


def test_push_many_does_not_burn_a_repeat_refused_further_in(make_frontier: MakeFrontier) -> None:
    seen = InMemSeen()
    f = make_frontier().max_depth(1).dedup_with(seen)  # max_depth inside dedup
    results = f.push_many([seed("a", depth=5), seed("a", depth=1), seed("a", depth=0)])
    assert [r.reason for r in results] == [Reason.TOO_DEEP, None, Reason.DUPLICATE]
    assert len(seen) == 1 and [s.depth for s in pop_seeds(f, 5)] == [1]


def test_pop_many_and_report_many(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier("fifo").retry_with(RetryPolicy(1, jitter=0))
    f.push_many([seed(str(i)) for i in range(5)])
    batch = pop_seeds(f, 3)
    assert [path_of(Ready(s)) for s in batch] == ["0", "1", "2"]
    assert f.stats().in_flight == 3
    f.report_many([Done(batch[0]), Retry(batch[1]), Done(batch[2])])
    s = f.stats()
    assert (s.done, s.retried, s.in_flight, s.scheduled, s.queued) == (2, 1, 0, 1, 2)
    assert [path_of(Ready(x)) for x in pop_seeds(f, 10)] == ["3", "4"]
    assert pop_seeds(f, 10) == [] and f.pop() == Wait(clock() + 0.5)
    clock.advance(0.5)
    assert [x.attempt for x in pop_seeds(f, 10)] == [2]


def test_report_many_is_all_or_nothing(make_frontier: MakeFrontier) -> None:
    from crawlstore.errors import NotInFlight

    f = make_frontier()
    f.push_many([seed("a"), seed("b")])
    a, b = pop_seeds(f, 2)
    with pytest.raises(NotInFlight):
        f.report_many([Done(a), Done(seed("never-popped")), Done(b)])
    assert f.stats().in_flight == 2 and f.stats().done == 0
    with pytest.raises(NotInFlight):
        f.report_many([Done(a), Done(a)])
    assert f.stats().in_flight == 2
    f.report_many([Done(a), Done(b)])
    assert f.stats().done == 2
