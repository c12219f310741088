"""A store on Redis of format 1 (one store-wide lock) is refused by default, naming
``crawlstore migrate``; the move to format 3 carries every crawl (each crawl's export, a Bloom
filter bit for bit), fences off a format-1 client left running, and finishes when run again
after it stopped half way (a SIGKILL at any moment)."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from redis_servers import Node

from crawlstore import Done, Failed, ManualClock, Retry, Seed, Store, Validator
from crawlstore.admin import redis_move
from crawlstore.admin.redis_move import move_redis_store
from crawlstore.cli import main
from crawlstore.cli.exportfile import to_line
from crawlstore.errors import InvalidArgument, OlderFormat, StoreError
from crawlstore.revisit import RevisitTags, revisit
from crawlstore.storages._redis.partitioned import PartitionedRedisStorage
from crawlstore.storages._redis.server import Address, Server

_namespaces = itertools.count()
T0 = 1_800_000_000.0
HOSTS = ("a.test", "b.test", "c.test")


class Tag(RevisitTags):
    PAGE = revisit("1h")


@pytest.fixture
def url(redis_node: Node) -> str:
    """A namespace holding a store of format 1 with three crawls (``fill``)."""
    url = f"redis://127.0.0.1:{redis_node.port}/0?ns=mv{os.getpid()}x{next(_namespaces)}"
    fill(url + "&partitioned=0")
    return url


def fill(url: str) -> None:
    """Crawl ``a``: queued, in flight, done, failed, retried and scheduled URLs over three
    host queues with settings and a block, an exact seen set and validators; ``b``: a Bloom
    seen set; ``c``: a few seeds. Store-wide defaults set."""
    clock = ManualClock(T0)
    with Store.open(url, clock=clock) as store:
        store.set_defaults(lease_time=120.0)
        a = store.frontier("priority", crawl="a", queues="host", delay=1.0, max_in_flight=3)
        a = a.revisit(Tag)
        a.push_many([Seed.get(f"https://{HOSTS[i % 3]}/p{i}").with_priority(i % 4)
                     .with_meta({"n": i}).with_tag(Tag.PAGE) for i in range(30)])  # fmt: skip
        a.set_queue("b.test", delay=2.5, max_in_flight=1)
        a.block_queue("c.test", T0 + 50)
        held: list[Seed] = []
        while len(held) < 5:
            held += [r.seed for r in a.pop_many(6)]
            clock.advance(3)
        a.report(Done(held[0], status=200))
        a.report(Failed(held[1], reason="timeout"))
        a.report(Retry(held[2]))
        a.report(Done(held[3], status=304))  # its revisit, scheduled
        seen, validators = store.seen(crawl="a"), store.validators(crawl="a")
        for i in range(50):
            seen.insert(Seed.get(f"https://seen.test/{i}").fingerprint)
        validators.put(held[0].fingerprint, Validator(etag='"e1"', last_modified=None))
        bloom = store.seen(crawl="b", bloom=(200_000, 0.01))  # over several parts
        for i in range(500):
            bloom.insert(Seed.get(f"https://b.test/{i}").fingerprint)
        store.frontier(crawl="b").push(Seed.get("https://b.test/"))
        store.frontier(crawl="c").push_many([Seed.get(f"https://c.test/{i}") for i in range(5)])


def observe(url: str) -> dict[str, Any]:
    """What the move must keep: ``a`` and ``c``'s exports, ``b``'s URLs, its Bloom filter's
    answers, its count and its bits, the defaults."""
    clock = ManualClock(T0 + 10)
    with Store.open(url, clock=clock) as store:
        exports = {crawl: sorted(to_line(r) for r in store.export(crawl=crawl))
                   for crawl in ("a", "c")}  # fmt: skip
        b = store.frontier(crawl="b")
        bloom = store.seen(crawl="b", bloom=(200_000, 0.01))
        probes = [Seed.get(f"https://b.test/{i}").fingerprint for i in range(0, 3000, 3)]
        return {
            "crawls": sorted(store.crawls()),
            "exports": exports,
            "b": [(u.url, u.state) for u in b.urls(limit=10)],
            "bloom": ([p in bloom for p in probes], len(bloom)),
            "defaults": store.defaults(),
        }


def bloom_bits(node: Node, url: str) -> list[bytes]:
    ns = url.rsplit("ns=", 1)[1]
    client = node.client()
    keys = sorted(
        client.scan_iter(match=f"{{{ns}:*}}:bl"), key=lambda k: int(k.split(b":")[2].rstrip(b"}"))
    )
    return [client.get(key) for key in keys]


def test_a_store_of_format_1_is_refused_naming_the_command(url: str) -> None:
    for readonly in (False, True):
        with pytest.raises(
            OlderFormat, match=r"format 1.*crawlstore migrate 'redis://.*partitioned=0"
        ):
            Store.open(url, readonly=readonly)
        with pytest.raises(OlderFormat, match="crawlstore migrate"):
            Store.open(url + "&partitioned=1")
    with Store.open(url + "&partitioned=0") as store:  # asked for by name: still opens
        assert store.meta["format"] == "1"


def test_the_move_keeps_every_crawl_and_a_bloom_filter_bit_for_bit(
    url: str, redis_node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = observe(url + "&partitioned=0")
    bits = bloom_bits(redis_node, url)
    assert len(bits) > 1 and any(bits)
    kept = tmp_path / "kept"
    assert main(["migrate", url, "--keep", str(kept)]) == 0
    assert "moved to format 3 (3 crawls: a, b, c)" in capsys.readouterr().out
    assert sorted(p.name for p in kept.iterdir()) == ["1.jsonl.gz", "2.bloom", "2.jsonl.gz",
                                                       "3.jsonl.gz", "crawls.json"]  # fmt: skip
    with Store.open(url) as store:
        assert store.meta["format"] == "3"
        a = store.frontier(crawl="a").core  # its indexes, written by the loads
        urls = a.urls(limit=1000)
        failed = {u.url for u in urls if u.outcome and u.outcome.state == "failed"}
        assert {f.url for f in a.recent_failures()} == failed and len(failed) == 2
        revisits = [u for u in urls if u.kind == "revisit"]
        assert a.revisits_due(T0 + 1e7) == len(revisits) == 4
    assert observe(url) == before
    assert bloom_bits(redis_node, url) == bits
    assert main(["migrate", url]) == 0  # again: nothing to do
    assert "nothing to migrate" in capsys.readouterr().out


def test_a_client_of_format_1_left_running_cannot_write_after_the_move(
    url: str, tmp_path: Path
) -> None:
    with Store.open(url + "&partitioned=0&lock_ttl=0.1") as old:
        frontier = old.frontier(crawl="c")
        assert frontier.stats().queued == 5
        move_redis_store(url, tmp_path / "kept")
        with pytest.raises(StoreError, match="store lock stayed taken"):
            frontier.push(Seed.get("https://late.test/"))
    with Store.open(url) as store:
        assert "https://late.test/" not in {u.url for u in store.frontier(crawl="c").urls()}
        assert store.frontier(crawl="c").stats().queued == 5


def stop_in_the_loads(url: str, kept: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a move that stops (``KeyboardInterrupt``) as it loads the second crawl."""
    real, loads = Store.load, []

    def stop_at_the_second(self: Store, records: Any, **kwargs: Any) -> str:
        loads.append(1)
        if len(loads) == 2:
            raise KeyboardInterrupt
        return real(self, records, **kwargs)

    monkeypatch.setattr(Store, "load", stop_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        move_redis_store(url, kept)
    monkeypatch.undo()


def test_a_move_stopped_in_its_loads_is_refused_then_finished(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = observe(url + "&partitioned=0")
    stop_in_the_loads(url, tmp_path / "kept", monkeypatch)
    with pytest.raises(OlderFormat, match=r"began and has not finished.*crawlstore migrate"):
        Store.open(url, readonly=True)
    moved = move_redis_store(url, tmp_path / "elsewhere")  # the move's own directory wins
    assert moved.crawls == ["a", "b", "c"] and moved.kept == (tmp_path / "kept").absolute()
    assert observe(url) == before


def test_a_move_refuses_a_store_whose_lock_a_client_holds(url: str, redis_node: Node,
                                                        tmp_path: Path) -> None:  # fmt: skip
    lock = f"{{{url.rsplit('ns=', 1)[1]}}}:lock"
    redis_node.client().set(lock, "a client's token", px=60_000)
    with pytest.raises(StoreError, match="a client holds the store lock: stop every client"):
        move_redis_store(url, tmp_path / "kept")
    assert not (tmp_path / "kept").exists()
    redis_node.client().delete(lock)  # the client's unit ends
    with Store.open(url + "&partitioned=0") as store:  # untouched
        assert store.meta["format"] == "1" and "moving" not in store.meta


#: A move that SIGKILLs itself once the function named ``argv[3]`` has returned once: after
#: the first crawl's export is written, or after the first crawl is loaded.
KILLED_MOVE = """
import os, signal, sys
from crawlstore.admin import redis_move
from crawlstore.store import Store
owner = redis_move if sys.argv[3] == "_write" else Store
real = getattr(owner, sys.argv[3])
def once(*args, **kwargs):
    out = real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)
    return out
setattr(owner, sys.argv[3], once)
redis_move.move_redis_store(sys.argv[1], sys.argv[2])
"""


@pytest.mark.parametrize("after", ["_write", "load"], ids=["exporting", "loading"])
def test_a_move_killed_half_way_finishes_when_run_again(
    url: str, tmp_path: Path, after: str
) -> None:
    """A move SIGKILLed between two crawls' exports, or between two crawls' loads, is
    refused by name, and run again: the same crawls."""
    before = observe(url + "&partitioned=0")
    kept = str(tmp_path / "kept")
    child = subprocess.run([sys.executable, "-c", KILLED_MOVE, url, kept, after],
                           capture_output=True, timeout=300)  # fmt: skip
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    with pytest.raises(OlderFormat, match="began and has not finished"):
        Store.open(url, readonly=True)
    assert main(["migrate", url]) == 0
    assert observe(url) == before


def test_the_keep_directory_is_never_written_over(url: str, tmp_path: Path) -> None:
    (tmp_path / "kept").mkdir()
    with pytest.raises(InvalidArgument, match="kept exists: the exports go to a new directory"):
        move_redis_store(url, tmp_path / "kept")
    with Store.open(url + "&partitioned=0") as store:  # untouched
        assert store.meta["format"] == "1" and "moving" not in store.meta


def test_a_move_whose_exports_are_gone_refuses_and_changes_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop_in_the_loads(url, tmp_path / "kept", monkeypatch)
    (tmp_path / "kept" / "3.jsonl.gz").unlink()
    with pytest.raises(StoreError, match=r"lacks 3.jsonl.gz of the move's exports"):
        move_redis_store(url)
    shutil.rmtree(tmp_path / "kept")
    with pytest.raises(StoreError, match=r"are not in .*kept.*put the directory back"):
        move_redis_store(url)
    with pytest.raises(OlderFormat, match="began and has not finished"):
        Store.open(url, readonly=True)
    with Store(PartitionedRedisStorage(Server(Address.parse(url)), moving=True),
               ManualClock(T0)) as store:  # fmt: skip
        assert store.crawls() == ["a"]  # what the first run had loaded: still there


def test_a_store_of_an_older_fingerprint_version_is_refused_before_anything_changes(
    url: str, redis_node: Node, tmp_path: Path
) -> None:
    meta = f"{{{url.rsplit('ns=', 1)[1]}}}:meta"
    client = redis_node.client()
    client.hset(meta, "fingerprint", "1")
    before = client.hgetall(meta)
    with pytest.raises(OlderFormat, match=r"partitioned=0 in its URL.*nothing was changed"):
        move_redis_store(url, tmp_path / "kept")
    assert client.hgetall(meta) == before and not (tmp_path / "kept").exists()
    assert client.get(meta.replace(":meta", ":lock")) is None


def test_a_move_that_fails_in_its_exports_gives_the_store_back(
    url: str, redis_node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(redis_move, "_write", fail)
    with pytest.raises(OSError, match="disk full"):
        move_redis_store(url, tmp_path / "kept")
    assert not (tmp_path / "kept").exists()
    with Store.open(url + "&partitioned=0") as store:  # the lock is free, nothing moved
        assert store.meta["format"] == "1" and "moving" not in store.meta
        assert store.frontier(crawl="c").stats().queued == 5
