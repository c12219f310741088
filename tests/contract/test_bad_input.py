"""Bad input at every public entry point: a typed error at the call that names the problem, and
nothing changed (on every storage, under facades too)."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import MakeFrontier, pop_seeds

from crawlstore import Backoff, Done, Retry, Seed, Store, Validator, register_queue_key
from crawlstore.errors import InvalidArgument
from crawlstore.frontier import Frontier


def _unchanged(f: Frontier, call: Callable[[], object], error: type[Exception], match: str) -> None:
    before = (f.stats(), f.snapshot(), len(f))
    with pytest.raises(error, match=match):
        call()
    assert (f.stats(), f.snapshot(), len(f)) == before


def _chains(f: Frontier) -> list[Frontier]:
    return [f, f.dedup(), f.allow_hosts(["e.com"]), f.retry(2), f.score(lambda s: 1),
            f.avoid_traps(), f.tag_backoff(), f.max_depth(3)]  # fmt: skip


def test_a_str_is_not_a_seed(make_frontier: MakeFrontier) -> None:
    calls: list[Callable[[Frontier, Seed], object]] = [
        lambda f, held: f.push("http://e.com/"),  # type: ignore[arg-type]
        lambda f, held: f.push_many([Seed.get("https://e.com/1"), "http://e.com/2"]),  # type: ignore[list-item]
        lambda f, held: f.report("http://e.com/"),  # type: ignore[arg-type]
        lambda f, held: f.report(Done("http://e.com/")),  # type: ignore[arg-type]
        lambda f, held: f.report(Retry("http://e.com/")),  # type: ignore[arg-type]
        lambda f, held: f.report_many([Done(held), "x"]),  # type: ignore[list-item]
        lambda f, held: f.extend_lease("http://e.com/"),  # type: ignore[arg-type]
        lambda f, held: f.core.schedule("http://e.com/", 5.0),  # type: ignore[arg-type]
    ]
    for f in _chains(make_frontier()):
        f.push(Seed.get("https://e.com/held"))
        (held,) = pop_seeds(f, 1)
        for call in calls:
            _unchanged(f, functools.partial(call, f, held), TypeError, "expected a (Seed|report)")
        f.report(Done(held))
        for s in f.snapshot():
            assert isinstance(s, Seed)  # nothing but seeds went in: pops never fail
        assert pop_seeds(f, 10) == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "5", None])
def test_times_are_finite_numbers(make_frontier: MakeFrontier, bad: object) -> None:
    f = make_frontier().retry(2).tag_backoff()
    f.push(Seed.get("https://e.com/a"))
    (seed,) = pop_seeds(f, 1)
    negative = -1 if bad is None else bad  # None is a default for these: -1 is the bad one
    calls: list[Callable[[], object]] = [
        lambda: f.core.schedule(Seed.get("https://e.com/b"), bad),  # type: ignore[arg-type]
        lambda: f.report(Retry(seed, after=negative)),  # type: ignore[arg-type]
        lambda: f.report(Backoff("t", bad)),  # type: ignore[arg-type]
        lambda: f.extend_lease(seed, negative),  # type: ignore[arg-type]
        lambda: f.pause_queue(seed, bad),  # type: ignore[arg-type]
    ]
    calls += [functools.partial(f.pop_many, limit) for limit in (-1, "3", 2.5, None)]  # type: ignore[arg-type]
    for call in calls:
        _unchanged(f, call, InvalidArgument, "finite number|at least|limit")
    f.report(Done(seed))


def test_store_arguments_are_bounded_up_front(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        for name in ("x" * 10_000, "", 5):
            with pytest.raises(InvalidArgument, match="crawl name"):
                store.frontier(crawl=name)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument, match="crawl name"):
                store.seen(crawl=name)  # type: ignore[arg-type]
        assert store.crawls() == []
        bad_options = [{"delay": -1}, {"delay": math.nan}, {"lease_time": math.inf},
                       {"reap_interval": "1"}, {"max_in_flight": 0},
                       {"queues": "hosts"}]  # fmt: skip
        for options in bad_options:
            with pytest.raises(InvalidArgument):
                store.frontier(**options)  # type: ignore[arg-type]
        assert store.crawls() == []  # a refused view created nothing
        f = store.frontier(queues="host")
        for call, match in (
            (lambda: f.set_queue("e.com", delay=math.nan), "finite"),
            (lambda: f.set_queue("e.com", max_in_flight=0), "max_in_flight"),
            (lambda: f.block_queue("e.com", math.inf), "finite"),
            (lambda: f.core.state("x" * 200), "namespace"),
            (lambda: f.core.state("a\x00b"), "NUL"),
        ):
            _unchanged(f, call, InvalidArgument, match)
        with pytest.raises(TypeError, match="queue key is a str"):
            f.queue(5)  # type: ignore[arg-type]
        validators = store.validators()
        for call in (lambda: validators.put(b"x" * 16, '"etag"'),  # type: ignore[arg-type]
                     lambda: validators.get("fp"),  # type: ignore[arg-type]
                     lambda: validators.put(b"short", Validator(etag='"a"'))):  # fmt: skip
            with pytest.raises(TypeError):
                call()
        assert len(validators) == 0
    for flush in (0, -1, math.nan):
        with pytest.raises(InvalidArgument, match="flush_interval"):
            Store.open(tmp_path / "t.lmdb", durability="nosync", flush_interval=flush)


def test_long_keys_are_stored_under_a_digest(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.lmdb") as store:
        register_queue_key("long", lambda seed: "q" * 1000 + seed.url[-1])
        f = store.frontier(queues="long")
        f.push_many([Seed.get("https://e.com/1"), Seed.get("https://e.com/2")])
        f.set_queue("q" * 1000 + "1", delay=5.0)
        info = f.queue("q" * 1000 + "1")
        assert info is not None and info.key == "q" * 1000 + "1" and info.delay == 5.0
        assert len(pop_seeds(f, 2)) == 2  # one a queue
        state = f.core.state("user")
        state["k" * 2000] = 1
        assert dict(state) == {"k" * 2000: 1}
        register_queue_key("bad", lambda seed: 5)  # type: ignore[arg-type,return-value]
        bad = store.frontier(crawl="other", queues="bad")
        _unchanged(bad, lambda: bad.push(Seed.get("https://e.com/")), TypeError, "queue key")


def test_facade_state_and_refusals_take_what_the_store_takes(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    state = f.core.state("user")
    for key, value, error in ((5, 1, TypeError), ("k", object(), TypeError)):
        with pytest.raises(error):
            state[key] = value  # type: ignore[index]
    assert dict(state) == {}
    state["k"] = {"a": [1, 2]}
    copy = state["k"]
    copy["a"].append(3)  # a read is a copy, on every storage
    assert state["k"] == {"a": [1, 2]}
    for namespace in ("", "x" * 101, "a\x00b"):
        with pytest.raises(InvalidArgument):
            f.core.state(namespace)
    _unchanged(f, lambda: f.refuse(Seed.get("https://e.com/"), None), TypeError, "Reason")  # type: ignore[arg-type]
