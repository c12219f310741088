"""A store on Redis of format 2 (before the crawls' bounded indexes) is refused, naming
``crawlstore migrate``, which writes the indexes in place from the records (recent failures,
revisits by the minute, blocked trap prefixes apart) and says format 3; run again after it
stopped half way, it finishes without counting anything twice."""

from __future__ import annotations

import itertools
import os

import pytest
from redis_servers import Node

from crawlstore import Done, Failed, ManualClock, Seed, Store
from crawlstore.cli import main
from crawlstore.errors import OlderFormat
from crawlstore.frontier.traps import TrapPolicy
from crawlstore.revisit import RevisitTags, revisit
from crawlstore.storages._redis.keys import INDEXING

_namespaces = itertools.count()
T0 = 1_800_000_000.0
TRAPS = TrapPolicy(max_urls=2)
PREFIX = "https://t.test/cal/"


class Tag(RevisitTags):
    NEWS = revisit("10m")
    FEED = revisit("3h")


def fill(url: str) -> None:
    """Crawl ``a``: 12 URLs over 3 hosts, four failed, four done with a revisit each (two in
    10 minutes, two in 3 hours), and a trap prefix blocked."""
    clock = ManualClock(T0)
    with Store.open(url, clock=clock) as store:
        f = store.frontier(crawl="a", queues="host", delay=0, max_in_flight=None)
        news = f.revisit(Tag)
        tags = [Tag.NEWS, Tag.FEED, None]
        f.push_many([Seed.get(f"https://h{i % 3}.test/{i}").with_tag(tags[i % 3])
                     for i in range(12)])  # fmt: skip
        for held in f.pop_many(12):
            clock.advance(1)
            n = int(held.seed.url.rsplit("/", 1)[1])
            if n % 3 == 2:
                news.report(Failed(held.seed, status=500 + n, reason="boom"))
            else:
                news.report(Done(held.seed, status=200))
        traps = f.avoid_traps_with(TRAPS)
        traps.push_many([Seed.get(f"{PREFIX}{i}") for i in range(4)])


def expected(url: str, *, readonly: bool = False) -> dict[str, object]:
    with Store.open(url, clock=ManualClock(T0 + 100), readonly=readonly) as store:
        core = store.frontier(crawl="a").core
        return {
            "failures": core.recent_failures(limit=100),
            "due soon": core.revisits_due(T0 + 700),
            "due": core.revisits_due(T0 + 1e6),
            "blocked": core.avoid_traps_with(TRAPS).blocked(),
            "stats": core.stats(),
        }


def as_format_2(node: Node, url: str, *, format_1: bool = False) -> None:
    """Make the store what format 2 was: no index keys, the blocked prefixes among the trap
    counts, ``META`` saying 2 (``format_1``: what format 1 was, ``META`` without
    ``indexed``)."""
    with Store.open(url) as store:
        core = store.frontier(crawl="a").core
        blocked, traps = core.state("traps.blocked"), core.state("traps")
        for prefix in list(blocked):
            traps[f"{prefix}\x00b"] = blocked.pop(prefix)
    ns = url.rsplit("ns=", 1)[1].split("&")[0]
    client = node.client()
    try:
        for key in client.scan_iter(match=f"{{{ns}:*"):
            if key.endswith((b":fl", b":rv")):
                client.delete(key)
        if format_1:
            client.hdel(f"{{{ns}}}:meta", "indexed")
        else:
            client.hset(f"{{{ns}}}:meta", "format", "2")
    finally:
        client.close()


@pytest.fixture
def url(redis_node: Node) -> str:
    return f"redis://127.0.0.1:{redis_node.port}/0?ns=ix{os.getpid()}x{next(_namespaces)}"


def test_format_2_is_refused_then_migrated_in_place(
    url: str, redis_node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(url)
    before = expected(url)
    assert len(before["failures"]) == 4 and before["due soon"] == 4 and before["due"] == 8  # type: ignore[arg-type]
    as_format_2(redis_node, url)
    for readonly in (False, True):
        with pytest.raises(OlderFormat, match=r"format 2.*crawlstore migrate 'redis://"):
            Store.open(url, readonly=readonly)
    assert main(["migrate", url]) == 0
    assert "migrated to format 3 in place (1 crawls: a)" in capsys.readouterr().out
    assert expected(url) == before
    with Store.open(url) as store:
        assert store.meta["format"] == "3" and "moving" not in store.meta
        traps = store.frontier(crawl="a").avoid_traps_with(TRAPS)
        assert not traps.push(Seed.get(f"{PREFIX}9"))  # still blocked
    assert main(["migrate", url]) == 0
    assert "nothing to migrate" in capsys.readouterr().out


def test_a_migration_that_stopped_half_way_finishes_counting_nothing_twice(
    url: str, redis_node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(url)
    before = expected(url)
    as_format_2(redis_node, url)
    from crawlstore import store as store_module
    from crawlstore.admin import redis_move

    real = store_module.reindex
    calls = 0

    def stop_after_one(core: object) -> None:
        nonlocal calls
        real(core)  # type: ignore[arg-type]
        calls += 1
        raise KeyboardInterrupt("stopped")

    with monkeypatch.context() as patched:
        patched.setattr(store_module, "reindex", stop_after_one)
        with pytest.raises(KeyboardInterrupt):
            redis_move.move_redis_store(url)
    assert calls == 1
    with pytest.raises(OlderFormat, match=f"began and has not finished.*{INDEXING}"):
        Store.open(url)
    assert redis_move.move_redis_store(url).crawls == ["a"]
    assert expected(url) == before


def test_a_store_of_format_1_gets_its_indexes_at_its_first_writable_open(
    url: str, redis_node: Node
) -> None:
    """Format 1 is used as it is (``partitioned=0``): a store of it written before the indexes
    gets them when a client opens it for writing, under its store lock; a read-only open reads
    what it holds."""
    url += "&partitioned=0"
    fill(url)
    before = expected(url)
    as_format_2(redis_node, url, format_1=True)
    bare = expected(url, readonly=True)
    assert bare["failures"] == [] and bare["due"] == 0 and bare["blocked"] == []
    assert expected(url) == before  # (a writable open)
    with Store.open(url) as store:
        assert store.meta["indexed"] == "1" and store.meta["format"] == "1"
