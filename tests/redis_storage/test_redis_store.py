"""Bad input to a store on Redis: a typed error that names the problem, and nothing changed."""

from __future__ import annotations

import pytest
import redis
from helpers import seed
from redis_servers import Node

from crawlstore import Store
from crawlstore.errors import InvalidArgument, NotAStore, ReadOnlyStore, StoreError

BAD = [
    ("redis://127.0.0.1:{port}/0?ns=a{{b}}", "ns is"),
    ("redis://127.0.0.1:{port}/0?strict=2", "strict is"),
    ("redis://127.0.0.1:{port}/0?buckets=1000", "power of 2"),
    ("redis://127.0.0.1:{port}/0?lock_ttl=0", "lock_ttl is"),
    ("redis://127.0.0.1:{port}/0?colour=red", "unknown options"),
]


@pytest.mark.parametrize(("url", "says"), BAD)
def test_bad_options_are_named(redis_node: Node, url: str, says: str) -> None:
    with pytest.raises(InvalidArgument, match=says):
        Store.open(url.format(port=redis_node.port))


def test_a_file_durability_on_a_url_names_strict(redis_url: str) -> None:
    with pytest.raises(InvalidArgument, match="strict=1"):
        Store.open(redis_url, durability="full")


def test_a_namespace_of_another_application_is_left_alone(redis_node: Node) -> None:
    client = redis.Redis(port=redis_node.port)
    client.hset("{theirs}:meta", mapping={"app": "other"})
    with pytest.raises(NotAStore):
        Store.open(f"redis://127.0.0.1:{redis_node.port}/0?ns=theirs")
    assert client.hgetall("{theirs}:meta") == {b"app": b"other"}


def test_a_read_only_store_refuses_writes_and_keeps_the_data(redis_url: str) -> None:
    with Store.open(redis_url) as store:
        store.frontier().push(seed("a"))
    with Store.open(redis_url, readonly=True) as store:
        with pytest.raises(ReadOnlyStore):
            store.frontier().push(seed("b"))
        assert store.frontier().stats().queued == 1


def test_a_bloom_seen_set_is_not_exported(redis_url: str) -> None:
    with Store.open(redis_url) as store:
        store.seen(bloom=(1000, 0.01)).insert(seed("a").fingerprint)
        with pytest.raises(InvalidArgument, match="Bloom"):
            list(store.export())


@pytest.mark.parametrize(("name", "value"), [("map_size", 2**20), ("max_map_size", 2**30),
                                             ("flush_interval", 2.0)])  # fmt: skip
def test_an_option_of_a_file_is_refused_by_name(redis_url: str, name: str, value: float) -> None:
    with pytest.raises(InvalidArgument, match=f"{name} applies to a store in a file"):
        Store.open(redis_url, **{name: value})  # type: ignore[arg-type]


def test_a_store_on_redis_is_the_one_store(redis_url: str) -> None:
    with Store.open(redis_url) as store:
        assert type(store) is Store
        assert store.location == store.url and store.location.startswith("redis://")
        with pytest.raises(StoreError, match="no path"):
            store.path  # noqa: B018
        with pytest.raises(StoreError, match="RDB or AOF"):
            store.backup("never")
