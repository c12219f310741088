"""Stores of fingerprint version 1 (an ``=`` in a query value written ``%3D`` when the query
had another escape), written by crawlstore before version 2: a file and a store on Redis. A
read-only open refuses them; a writable one moves each URL whose fingerprint changed, merges
two spellings of one page, and puts the new fingerprints beside the old ones in the seen set
and the validators."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path

import msgpack
import pytest
from helpers import DATA, digest
from redis_servers import Node

from crawlstore import Done, ManualClock, Ready, Seed, Store
from crawlstore.errors import OlderFormat, StoreError
from crawlstore.url import FINGERPRINT_VERSION

_namespaces = itertools.count()

#: The fixtures' URLs (tests/data/README.md), by what was done to them.
URLS = {
    "queued": "https://h.test/?a=b=c&d=%41",
    "in_flight": "https://i.test/?t=x=y&u=%7E",
    "scheduled": "https://s.test/?s=1=2&e=%C3%A9",
    "done": "https://d.test/?z=a=b&y=%20",
    "same_done": "https://p.test/?p=q=r",  # one page, two spellings: this one crawled...
    "same_queued": "https://p.test/?p=q%3Dr",  # ...this one queued
    "plain": "https://u.test/plain",
    "plain_done": "https://u.test/x?a=1",
}
#: Those whose fingerprint changes.
CHANGED = ("queued", "in_flight", "scheduled", "done", "same_queued")


def fp(name: str) -> bytes:
    return Seed.get(URLS[name]).fingerprint


@pytest.fixture
def old_file(tmp_path: Path) -> Path:
    path = tmp_path / "fp1.lmdb"
    shutil.copy(DATA / "fingerprint1.lmdb", path)
    return path


@pytest.fixture
def old_redis(redis_node: Node) -> str:
    """A namespace holding the keys a store on Redis of fingerprint version 1 wrote."""
    dump = msgpack.unpackb((DATA / "fingerprint1-redis.msgpack").read_bytes(), raw=False)
    ns = f"fp{os.getpid()}x{next(_namespaces)}"
    client = redis_node.client()
    old_tag = b"{" + dump["ns"].encode()
    for key, kind, value in dump["keys"]:
        key = b"{" + ns.encode() + key[len(old_tag) :]
        if kind == "string":
            client.set(key, value)
        elif kind == "hash":
            client.hset(key, mapping=value)
        elif kind == "zset":
            client.zadd(key, dict(value))
        else:
            client.sadd(key, *value)
    return f"redis://127.0.0.1:{redis_node.port}/0?ns={ns}&partitioned=0"  # format 1


def check_migrated(store: Store) -> None:
    """Every URL in its place under its new fingerprint; one page, one record."""
    frontier = store.frontier()
    states = {u.url: u.state for u in frontier.urls(limit=100)}
    assert states == {
        URLS["queued"]: "queued",
        URLS["in_flight"]: "queued",  # its lease named the old fingerprint: back at the front
        URLS["scheduled"]: "scheduled",
        URLS["done"]: "done",
        URLS["same_done"]: "done",  # the page crawled; its other spelling is gone
        URLS["plain"]: "queued",
        URLS["plain_done"]: "done",
    }
    for name in CHANGED:
        assert frontier.url(URLS[name]) is not None, name  # found by its new fingerprint
    stats = frontier.stats()
    assert (stats.queued, stats.in_flight, stats.scheduled) == (3, 0, 1)
    assert frontier.count(state="done") == 3
    seen = store.seen()
    assert all(fp(name) in seen for name in URLS)  # the new fingerprints...
    assert len(seen) == 8 + 4  # ...beside the 8 old ones (same_queued's new one is same_done's)
    validators = store.validators()
    assert validators.get(fp("done")) is not None and validators.get(fp("same_done")) is not None
    assert not frontier.dedup_with(seen).push(Seed.get("https://d.test/?y=+&z=a%3Db"))
    popped = frontier.pop_many(10)
    assert all(isinstance(r, Ready) for r in popped)
    assert {r.seed.url for r in popped} == {URLS[n] for n in ("queued", "in_flight", "plain")}
    frontier.report_many([Done(r.seed) for r in popped])


def test_a_file_of_fingerprint_version_1_migrates_when_opened_for_writing(old_file: Path) -> None:
    before = digest(old_file)
    with pytest.raises(OlderFormat, match="format version 2"):  # the file's format is older too
        Store.open(old_file, readonly=True)
    assert digest(old_file) == before
    clock = ManualClock(1_800_000_000)
    with Store.open(old_file, clock=clock) as store:
        assert store.meta["fingerprint"] == FINGERPRINT_VERSION == 2
        check_migrated(store)
        bloomy = store.frontier(crawl="bloomy")
        assert {u.url for u in bloomy.urls(limit=10)} == {URLS["queued"], URLS["plain"]}
        bloom = store.seen(crawl="bloomy", bloom=(1000, 0.01))
        assert fp("queued") in bloom and fp("plain") in bloom
    kept = old_file.with_name(old_file.name + ".v2")
    assert digest(kept) == before  # the old file stays beside it
    with Store.open(old_file, readonly=True) as store:
        assert store.meta["fingerprint"] == 2


def test_a_migration_never_writes_over_a_kept_file(old_file: Path) -> None:
    kept = old_file.with_name(old_file.name + ".v2")
    kept.write_bytes(b"a user's")
    with pytest.raises(StoreError, match="exists"):
        Store.open(old_file)
    assert kept.read_bytes() == b"a user's"


def test_a_store_on_redis_of_fingerprint_version_1_migrates_when_opened(old_redis: str) -> None:
    with pytest.raises(OlderFormat, match="fingerprint version 1"):
        Store.open(old_redis, readonly=True)
    clock = ManualClock(1_800_000_000)
    with Store.open(old_redis, clock=clock) as store:
        check_migrated(store)
    with Store.open(old_redis, readonly=True) as store:
        assert store.meta["fingerprint"] == "2"
