"""Trap avoidance: the opaque heuristic, prefixes, each budget, skipping, persistence."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from helpers import MakeFrontier, drain

from crawlstore import Done, ManualClock, Ready, Seed, Store
from crawlstore.frontier import Reason
from crawlstore.frontier.traps import AvoidTraps, TrapPolicy, is_opaque, url_shape

OPAQUE = ["a1b2c3d4e5f6g7h8", "JSESSIONID1234ABCD", "5f2b8c9d0e1a4b3c9d8e7f6a",
          "3fa85f6457174562b3fc2c963f66afa6", "Zx9Qw8Er7Ty6Ui5Op4"]  # fmt: skip
NOT_OPAQUE = ["2024", "2024-01-31", "20240131", "page-2", "page2", "p", "abcdefghijklmnop",
              "1234567890123456", "aaaaaaaa11111111", "a1b2c3d4e5f6g7h", "product-12345-blue",
              "3fa85f64-5717-4562-b3fc-2c963f66afa6"]  # fmt: skip


@pytest.mark.parametrize("segment", OPAQUE)
def test_opaque_segments(segment: str) -> None:
    assert is_opaque(segment)


@pytest.mark.parametrize("segment", NOT_OPAQUE)
def test_date_archives_pagination_and_words_are_not_opaque(segment: str) -> None:
    assert not is_opaque(segment)


def test_prefixes() -> None:
    assert (
        url_shape("https://example.com/archive/2024/01/x").prefix == "https://example.com/archive/"
    )
    assert url_shape("https://example.com//archive/").prefix == "https://example.com/archive/"
    assert url_shape("https://example.com/").prefix == "https://example.com/"
    assert url_shape("https://example.com:8443/a").prefix == "https://example.com:8443/a/"
    assert url_shape("http://example.com/a").prefix == "http://example.com/a/"
    # an opaque first segment shares the origin's root prefix
    assert url_shape(f"https://example.com/{OPAQUE[0]}/x").prefix == "https://example.com/"
    shape = url_shape("https://example.com/search/list?color=red")
    assert (shape.directory, shape.child) == ("https://example.com/search/", "list?color=red")


def budget(f: AvoidTraps, urls: list[str]) -> list[Reason | None]:
    return [f.push(Seed.get(u)).reason for u in urls]


def test_max_urls_blocks_the_prefix_and_skips_its_queued_seeds(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().dedup().avoid_traps_with(TrapPolicy().with_max_urls(3))
    assert budget(traps, ["https://h/x/q", "https://h/x/1", "https://h/x/2", "https://h/y/1"]) == [
        None, None, None, None]  # fmt: skip
    assert traps.push(Seed.get("https://h/x/3")).reason is Reason.TRAP  # the fourth
    assert traps.push(Seed.get("https://h/x/4")).reason is Reason.TRAP
    assert traps.push(Seed.get("https://h/y/2"))  # other prefixes go on
    crawled = drain(traps)
    assert crawled == ["y/1", "y/2"]  # x/q, x/1, x/2 were queued: skipped when popped
    stats = traps.stats()
    assert stats.skipped == 3 and stats.refused == {"trap": 2}
    assert traps.refused() == 5  # 2 refused pushes + 3 skipped seeds
    [blocked] = traps.blocked()
    assert blocked.prefix == "https://h/x/" and "more than 3 URLs" in blocked.reason
    assert blocked.refused == 5


def test_max_fanout_counts_query_variants(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().avoid_traps_with(TrapPolicy(max_fanout=3))
    urls = [f"https://h/shop/list?color={c}" for c in ("red", "green", "blue", "pink")]
    assert budget(traps, urls) == [None, None, None, Reason.TRAP]
    assert "fan-out of https://h/shop/" in traps.blocked()[0].reason
    deep = make_frontier().avoid_traps_with(TrapPolicy(max_fanout=3))
    assert budget(deep, [f"https://h/a/{i}/x" for i in range(6)]) == [None] * 6  # other dirs


def test_max_random_urls(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().avoid_traps_with(TrapPolicy(max_random_urls=2))
    sessions = [f"https://h/{s}/page" for s in OPAQUE[:3]]
    assert budget(traps, sessions) == [None, None, Reason.TRAP]
    assert traps.blocked()[0].prefix == "https://h/"  # changing the segment cannot bypass it
    assert traps.push(Seed.get("https://h/docs/a"))


def test_max_path_depth_and_repetitions(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().avoid_traps_with(TrapPolicy(max_path_depth=4, max_repetitions=2))
    assert traps.push(Seed.get("https://h/a/b/c/d"))
    assert traps.push(Seed.get("https://h/a/b/c/d/e")).reason is Reason.TRAP
    loops = make_frontier().avoid_traps_with(TrapPolicy(max_repetitions=2))
    assert budget(loops, ["https://h/l/x/y/x/y", "https://h/l/x/y/x/y/x/y"]) == [None, Reason.TRAP]


def test_disabled_checks() -> None:
    import math

    assert TrapPolicy(max_urls=None).limits()[0] == math.inf
    assert TrapPolicy().with_max_urls(math.inf).limits()[0] == math.inf
    with pytest.raises(ValueError):
        TrapPolicy(max_fanout=-1)


def test_candidates_refused_further_in_still_count(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().max_depth(0).avoid_traps_with(TrapPolicy(max_urls=2))
    assert budget(traps, ["https://h/x/1", "https://h/x/2"]) == [None, None]  # counted...
    deep = Seed.get("https://h/x/3").with_depth(5)
    assert traps.push(deep).reason is Reason.TRAP  # ...even though max_depth refuses some
    shallow = make_frontier().max_depth(0).avoid_traps_with(TrapPolicy(max_urls=2))
    for _ in range(2):
        assert shallow.push(Seed.get("https://h/x/1").with_depth(5)).reason is Reason.TOO_DEEP
    assert shallow.push(Seed.get("https://h/x/2"))  # an offer made twice counts once


def test_the_same_request_again_does_not_count_twice(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().dedup().avoid_traps_with(TrapPolicy(max_urls=2))
    for _ in range(5):
        traps.push(Seed.get("https://h/x/1#frag"))
    assert traps.push(Seed.get("https://h/x/2")) and traps.blocked() == []


def test_seeds_in_flight_finish(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().avoid_traps_with(TrapPolicy(max_urls=1))
    traps.push(Seed.get("https://h/x/1"))
    popped = traps.pop()
    assert isinstance(popped, Ready)
    assert traps.push(Seed.get("https://h/x/2")).reason is Reason.TRAP
    traps.report(Done(popped.seed))
    assert traps.stats().done == 1


def test_unblock(make_frontier: MakeFrontier) -> None:
    traps = make_frontier().avoid_traps_with(TrapPolicy(max_urls=1))
    assert budget(traps, ["https://h/x/1", "https://h/x/2"]) == [None, Reason.TRAP]
    assert traps.unblock("https://h/x/") and not traps.unblock("https://h/x/")
    assert traps.push(Seed.get("https://h/x/3"))  # fresh budgets
    assert traps.blocked() == []


def test_a_log_record_names_the_prefix_once(
    make_frontier: MakeFrontier, caplog: pytest.LogCaptureFixture
) -> None:
    traps = make_frontier().avoid_traps_with(TrapPolicy(max_urls=1))
    with caplog.at_level(logging.WARNING, logger="crawlstore.traps"):
        budget(traps, [f"https://h/x/{i}" for i in range(5)])
    records = [r.getMessage() for r in caplog.records]
    assert len(records) == 1 and "https://h/x/" in records[0] and "more than 1 URLs" in records[0]


def test_trap_state_survives_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "s.lmdb"
    policy = TrapPolicy(max_urls=2)
    with Store.open(path, clock=clock, durability="nosync") as store:
        traps = store.frontier("fifo").dedup_with(store.seen()).avoid_traps_with(policy)
        budget(traps, ["https://h/x/1", "https://h/x/2", "https://h/x/3", "https://h/y/1"])
        assert traps.refused() == 1
    with Store.open(path, clock=clock, durability="nosync") as store:
        traps = store.frontier().dedup_with(store.seen()).avoid_traps_with(policy)
        assert [b.prefix for b in traps.blocked()] == ["https://h/x/"]
        assert traps.push(Seed.get("https://h/x/9")).reason is Reason.TRAP  # still blocked
        assert traps.push(Seed.get("https://h/y/2"))  # y counted 1 before: one more fits
        assert drain(traps) == ["y/1", "y/2"]  # x/1 and x/2 are skipped
        assert traps.refused() == 4  # x/3, x/9, and the two skipped
        assert traps.push(Seed.get("https://h/y/3")).reason is Reason.TRAP
