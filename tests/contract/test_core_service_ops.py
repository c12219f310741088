"""The core's operations for services without lease tokens (the URL Frontier), over every
storage: insert-only pushes, overwrites of a URL in any state, a per-call in-flight cap, the
store-wide switch, and queues named by the seed."""

from __future__ import annotations

import pytest
from helpers import MakeFrontier

from crawlstore import Done, ManualClock, Reason, Seed
from crawlstore.errors import InvalidArgument, NotInFlight
from crawlstore.frontier.core import set_defaults


def page(host: str, path: str, queue: str | None = None) -> Seed:
    seed = Seed.get(f"https://{host}/{path}")
    return seed.with_meta({"queue": queue}) if queue is not None else seed


def test_new_only_refuses_every_known_url(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo").core
    assert [bool(a) for a in f.push_many([page("a.com", "1"), page("a.com", "1")],
                                         new_only=True)] == [True, False]  # fmt: skip
    ready = f.pop_many(1)
    f.report(Done(ready[0].seed))
    again = f.push_many([page("a.com", "1")], new_only=True)
    assert again[0].reason is Reason.DUPLICATE
    assert f.url("https://a.com/1").state == "done"
    assert bool(f.push(page("a.com", "1")))  # a plain push crawls a finished URL again


def test_overwrite_ends_any_lease_and_schedules_or_finishes(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier("fifo").core
    f.push(page("a.com", "1"))
    (ready,) = f.pop_many(1, lease_time=60)
    f.overwrite_many([(page("a.com", "1").with_meta({"v": 2}), clock() + 100)])
    status = f.url("https://a.com/1")
    assert (status.state, status.at, status.meta) == ("scheduled", clock() + 100, {"v": 2})
    with pytest.raises(NotInFlight):
        f.report(Done(ready.seed))  # its lease ended with the overwrite
    assert f.pop_many(5) == []
    clock.advance(100)
    assert [r.seed.meta for r in f.pop_many(5)] == [{"v": 2}]
    f.overwrite_many([(page("a.com", "1"), None)])
    assert f.url("https://a.com/1").state == "done"
    assert f.stats().in_flight == 0 and f.count(state="done") == 1
    f.overwrite_many([(page("a.com", "1"), None)])  # done again: counted once
    assert f.count() == 1 and f.count(state="done") == 1


def test_overwrite_creates_unknown_urls_and_keeps_metadata(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo").core
    f.overwrite_many([(page("a.com", "1").with_meta({"m": [1]}), None),
                      (page("a.com", "2"), 5.0)])  # fmt: skip
    assert f.url("https://a.com/1").state == "done"
    assert f.url("https://a.com/1").meta == {"m": [1]}
    assert f.count() == 2 and len(f) == 1
    with pytest.raises(InvalidArgument):
        f.overwrite_many([(page("a.com", "3"), float("nan"))])
    assert f.count() == 2


def test_pop_max_in_flight_caps_a_queue_per_call(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo", queues="host", max_in_flight=None).core
    f.push_many([page("a.com", str(i)) for i in range(5)])
    assert len(f.pop_many(10, per_queue=10, max_in_flight=2)) == 2
    assert f.pop_many(10, per_queue=10, max_in_flight=2) == []
    assert len(f.pop_many(10, per_queue=10, max_in_flight=3)) == 1


def test_the_store_wide_switch_stops_every_pop(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo").core
    f.push(page("a.com", "1"))
    set_defaults(f.storage, active=False)
    assert f.pop_many(5) == []
    with pytest.raises(InvalidArgument):
        set_defaults(f.storage, active="no")
    set_defaults(f.storage, active=True)
    assert len(f.pop_many(5)) == 1


def test_meta_queues_are_named_by_the_seed(make_frontier: MakeFrontier) -> None:
    f = make_frontier("fifo", queues="meta").core
    f.push_many([page("a.com", "1", queue="q1"), page("b.com", "2", queue="q1"),
                 page("c.com", "3")])  # fmt: skip
    assert sorted(q.key for q in f.queues()) == ["c.com", "q1"]
    assert f.queue("q1") is not None and f.queue("q1").queued == 2  # type: ignore[union-attr]


@pytest.mark.parametrize("state", ["queued", "in_flight", "scheduled", "done"])
def test_overwrite_moves_a_url_to_the_queue_its_new_seed_names(
    make_frontier: MakeFrontier, clock: ManualClock, state: str
) -> None:
    f = make_frontier("fifo", queues="meta").core
    f.push_many([page("a.com", "1", queue="q1"), page("a.com", "2", queue="q1")])
    if state == "in_flight":
        f.pop_many(1, lease_time=60)
    elif state == "scheduled":
        f.overwrite_many([(page("a.com", "1", queue="q1"), clock() + 60)])
    elif state == "done":
        f.overwrite_many([(page("a.com", "1", queue="q1"), None)])
    assert f.url("https://a.com/1").state == state
    f.overwrite_many([(page("a.com", "1", queue="q4"), clock() + 10)])
    status = f.url("https://a.com/1")
    assert (status.state, status.queue, status.at) == ("scheduled", "q4", clock() + 10)
    old, new = f.queue("q1"), f.queue("q4")
    assert old is not None and new is not None
    assert (old.queued, old.in_flight, old.scheduled, new.scheduled) == (1, 0, 0, 1)
    assert [u.url for u in f.urls(queue="q4")] == ["https://a.com/1"]
    assert [u.url for u in f.urls(queue="q1")] == ["https://a.com/2"]
    assert (f.count(queue="q1"), f.count(queue="q4"), f.count()) == (1, 1, 2)
    stats = f.stats()
    assert (stats.queued, stats.in_flight, stats.scheduled) == (1, 0, 1)
    f.overwrite_many([(page("a.com", "1", queue="q1"), None)])  # done, back in q1
    assert (f.count(queue="q1", state="done"), f.count(queue="q4")) == (1, 0)
    clock.advance(60)
    assert [r.seed.url for r in f.pop_many(5)] == ["https://a.com/2"]
    assert f.delete_queue("q4") == 0 and f.delete_queue("q1") == 2
    assert f.count() == 0 and len(f) == 0
