"""Bucket units on one server and on a cluster (three masters, three replicas): a unit that
read under a version its bucket has left writes nothing and raises Conflict; a unit on a
cache that knows its bucket's version sends nothing until its commit, which is one round
trip; several buckets' units commit in one round trip per node; a key of another bucket is
refused.

Round trips are counted where redis-py sends on a connection: a pipeline is one send.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis_checks import Sends
from redis_servers import NO_SERVER, Cluster, Node, have_server

from crawlstore.errors import StoreError
from crawlstore.storages._redis.bucket import BucketUnit, Conflict, commit_many, hash_tag
from crawlstore.storages._redis.server import (
    LIBRARY,
    LIBRARY_MAJOR,
    LIBRARY_MINOR,
    LIBRARY_VERSION,
    Address,
    Server,
    key_slot,
)
from crawlstore.storages._redis.unit import Cache

pytestmark = pytest.mark.skipif(not have_server(), reason=f"{NO_SERVER}: Redis tests skipped")

_tags = itertools.count()


@pytest.fixture(params=["standalone", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    """The session's standalone node or cluster."""
    if request.param == "cluster":
        cluster: Cluster = request.getfixturevalue("cluster")
        return f"{cluster.url}?ns=bu"
    node: Node = request.getfixturevalue("redis_node")
    return f"redis://127.0.0.1:{node.port}/0?ns=bu"


@pytest.fixture
def server(url: str) -> Iterator[Server]:
    server = Server(Address.parse(url))
    try:
        yield server
    finally:
        server.close()


def new_bucket() -> bytes:
    """A fresh bucket's hash tag."""
    return b"{bu%dx%d:c:%d}" % (os.getpid(), next(_tags), next(_tags) % 64)


def version_key(tag: bytes) -> bytes:
    return tag + b":ver"


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> Sends:
    return Sends.counting(monkeypatch)


def unit(server: Server, cache: Cache, tag: bytes) -> BucketUnit:
    u = BucketUnit(server, cache, version_key(tag))
    u.begin()
    return u


def committed(server: Server, tag: bytes, write: Callable[[BucketUnit], object]) -> BucketUnit:
    """A unit on a cache of its own that ran ``write`` and committed."""
    u = unit(server, Cache(), tag)
    write(u)
    u.commit()
    return u


def raw(server: Server, command: tuple[Any, ...]) -> Any:
    return server.read([command])[0]


def alone(monkeypatch: pytest.MonkeyPatch, server: Server) -> list[bytes]:
    """The version keys of the calls ``server`` will send alone (not in a pipeline)."""
    sent: list[bytes] = []
    original = server.fcall

    def fcall(name: str, keys: list[bytes], args: list[Any]) -> Any:
        sent.append(keys[0])
        return original(name, keys, args)

    monkeypatch.setattr(server, "fcall", fcall)
    return sent


# -- commits -------------------------------------------------------------------------------------


def test_a_commit_is_read_back_by_another_cache(server: Server) -> None:
    tag = new_bucket()
    u = unit(server, Cache(), tag)
    assert u.hget(tag + b":h", b"a") is None
    u.hset(tag + b":h", b"a", b"1")
    u.zadd(tag + b":z", b"m2")
    u.zadd(tag + b":z", b"m1")
    u.sadd(tag + b":s", b"x")
    u.setbits(tag + b":b", [3, 9])
    u.commit()
    assert u.version and len(u.version) == 16
    assert raw(server, ("GET", version_key(tag))) == u.version

    other = unit(server, Cache(), tag)
    assert other.hgetall(tag + b":h") == {b"a": b"1"}
    assert other.zrange(tag + b":z", None, None, 10) == [b"m1", b"m2"]
    assert other.smembers_known(tag + b":s", [b"x", b"y"]) == [True, False]
    assert other.getbits(tag + b":b", [2, 3, 9]) == [0, 1, 1]
    assert other.version == u.version


def test_each_commit_sets_a_new_version(server: Server) -> None:
    tag = new_bucket()
    cache = Cache()
    versions = []
    for i in range(5):
        u = unit(server, cache, tag)
        u.hset(tag + b":h", b"n", b"%d" % i)
        u.commit()
        versions.append(u.version)
    assert len(set(versions)) == 5
    assert raw(server, ("GET", version_key(tag))) == versions[-1]


def test_a_unit_without_writes_sends_nothing_at_its_commit(server: Server, sends: Sends) -> None:
    tag = new_bucket()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"a", b"1"))
    cache = Cache()
    unit(server, cache, tag).hget(tag + b":h", b"a")  # the cache knows the bucket now
    u = unit(server, cache, tag)
    assert u.hget(tag + b":h", b"a") == b"1"
    assert sends.during(u.commit) == 0


# -- conflicts -----------------------------------------------------------------------------------


def test_a_stale_unit_conflicts_and_writes_nothing(server: Server) -> None:
    tag = new_bucket()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"n", b"0"))
    first, second = Cache(), Cache()
    a = unit(server, first, tag)
    b = unit(server, second, tag)
    assert a.hget(tag + b":h", b"n") == b.hget(tag + b":h", b"n") == b"0"
    b.hset(tag + b":h", b"n", b"b")
    b.commit()
    a.hset(tag + b":h", b"n", b"a")
    a.zadd(tag + b":z", b"a")
    with pytest.raises(Conflict) as caught:
        a.commit()
    assert caught.value.found == b.version and caught.value.expected != b.version
    assert raw(server, ("HGET", tag + b":h", b"n")) == b"b"
    assert raw(server, ("EXISTS", tag + b":z")) == 0
    assert raw(server, ("GET", version_key(tag))) == b.version
    assert a.version == b.version  # the version found, for the next unit
    assert first.size() == 0  # what it cached is dropped


def test_after_a_conflict_a_retry_reads_anew_and_commits(server: Server, sends: Sends) -> None:
    tag = new_bucket()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"n", b"1"))
    cache = Cache()

    def increment() -> None:
        u = unit(server, cache, tag)
        n = int(u.hget(tag + b":h", b"n") or b"0")
        u.hset(tag + b":h", b"n", b"%d" % (n + 1))
        u.commit()

    increment()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"n", b"10"))
    with pytest.raises(Conflict):
        increment()
    assert sends.during(lambda: unit(server, cache, tag)) == 0  # it knows the version found
    assert sends.during(increment) == 2  # a read, the commit
    assert raw(server, ("HGET", tag + b":h", b"n")) == b"11"


def test_units_of_several_clients_lose_no_update(url: str) -> None:
    """Four clients, each with its cache, increment a counter and add a member at each step,
    running each unit again after a Conflict: every increment is kept."""
    tag = new_bucket()
    steps, clients = 40, 4
    errors: list[BaseException] = []

    def client(me: int) -> None:
        server = Server(Address.parse(url))
        cache = Cache()
        try:
            for step in range(steps):
                while True:
                    try:
                        u = unit(server, cache, tag)
                        n = int(u.hget(tag + b":h", b"n") or b"0")
                        u.hset(tag + b":h", b"n", b"%d" % (n + 1))
                        u.zadd(tag + b":z", b"%d:%d" % (me, step))
                        u.commit()
                        break
                    except Conflict:
                        continue  # run again, on what the bucket holds now
        except BaseException as exc:
            errors.append(exc)
        finally:
            server.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    server = Server(Address.parse(url))
    try:
        assert raw(server, ("HGET", tag + b":h", b"n")) == b"%d" % (steps * clients)
        assert raw(server, ("ZCARD", tag + b":z")) == steps * clients
    finally:
        server.close()


def test_a_read_that_finds_a_newer_version_conflicts_at_once(server: Server) -> None:
    """A unit's reads are all of one version: a read from the server after another process
    committed raises Conflict, though the cache answered the unit's earlier reads."""
    tag = new_bucket()
    cache = Cache()
    first = unit(server, cache, tag)
    first.hget(tag + b":h", b"a")
    first.hset(tag + b":h", b"a", b"1")
    first.commit()
    other = committed(server, tag, lambda u: u.hset(tag + b":h", b"a", b"2"))
    u = unit(server, cache, tag)
    assert u.hget(tag + b":h", b"a") == b"1"  # from the cache, as of this process's commit
    with pytest.raises(Conflict) as caught:
        u.hget(tag + b":h", b"b")
    assert caught.value.found == other.version
    again = unit(server, cache, tag)
    assert again.hget(tag + b":h", b"a") == b"2"
    assert again.version == other.version


def test_a_version_absent_is_expected_absent(server: Server) -> None:
    """Two units read a bucket no commit has versioned yet: the first to commit wins."""
    tag = new_bucket()
    a, b = unit(server, Cache(), tag), unit(server, Cache(), tag)
    assert a.hget(tag + b":h", b"n") is None and b.hget(tag + b":h", b"n") is None
    assert a.version == b.version == b""
    a.hset(tag + b":h", b"n", b"a")
    b.hset(tag + b":h", b"n", b"b")
    a.commit()
    with pytest.raises(Conflict):
        b.commit()
    assert raw(server, ("HGET", tag + b":h", b"n")) == b"a"


def test_a_commit_sent_again_after_its_reply_was_lost_counts_as_committed(server: Server) -> None:
    tag = new_bucket()
    u = unit(server, Cache(), tag)
    u.hget(tag + b":h", b"n")
    u.hset(tag + b":h", b"n", b"1")
    new = b"0123456789abcdef"
    call = u.call(new)
    assert server.send([call]) == [[1]]
    again = server.send([call])[0]
    assert again == [0, new]
    u.settle(again, new)
    assert u.version == new


# -- round trips ---------------------------------------------------------------------------------


def test_a_unit_on_a_warm_cache_sends_nothing_but_its_commit(server: Server, sends: Sends) -> None:
    tag = new_bucket()
    cache = Cache()
    first = unit(server, cache, tag)
    first.hgetall(tag + b":h")
    first.zrange(tag + b":z", None, None, 10)
    first.hset(tag + b":h", b"a", b"1")
    first.zadd(tag + b":z", b"m")
    first.commit()

    def warm() -> None:
        u = unit(server, cache, tag)
        assert u.version == first.version
        assert u.hgetall(tag + b":h") == {b"a": b"1"}
        assert u.zrange(tag + b":z", None, None, 10) == [b"m"]
        u.hset(tag + b":h", b"b", b"2")

    assert sends.during(warm) == 0
    u = unit(server, cache, tag)
    u.hset(tag + b":h", b"c", b"3")
    assert sends.during(u.commit) == 1
    assert raw(server, ("HGETALL", tag + b":h")) == {b"a": b"1", b"c": b"3"}


def test_a_cold_unit_reads_the_version_with_its_first_read(server: Server, sends: Sends) -> None:
    tag = new_bucket()
    done = committed(server, tag, lambda u: u.hset(tag + b":h", b"a", b"1"))
    u = BucketUnit(server, Cache(), version_key(tag))
    assert sends.during(u.begin) == 0
    assert u.version is None
    assert sends.during(lambda: u.hget(tag + b":h", b"a")) == 1
    assert u.version == done.version


def test_a_unit_that_read_nothing_commits_in_one_round_trip(server: Server, sends: Sends) -> None:
    """Writes made without reading hold whatever the bucket's version."""
    tag = new_bucket()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"a", b"1"))
    u = unit(server, Cache(), tag)
    u.hset(tag + b":h", b"b", b"2")
    assert sends.during(u.commit) == 1
    assert raw(server, ("HGETALL", tag + b":h")) == {b"a": b"1", b"b": b"2"}
    assert raw(server, ("GET", version_key(tag))) == u.version


# -- keys of other buckets -----------------------------------------------------------------------


def test_a_key_of_another_bucket_is_refused(server: Server) -> None:
    tag, other = new_bucket(), new_bucket()
    u = unit(server, Cache(), tag)
    u.hset(tag + b":h", b"a", b"1")
    writes: list[Callable[[], object]] = [
        lambda: u.hset(other + b":h", b"a", b"1"),
        lambda: u.zadd(other + b":z", b"m"),
        lambda: u.sadd(b"plain", b"m"),
        lambda: u.setbits(other + b":b", [1]),
        lambda: u.delete(other + b":h"),
    ]
    for write in writes:
        with pytest.raises(StoreError, match="another hash tag"):
            write()
    with pytest.raises(StoreError, match=r"\{bu.*:h"):
        u.hget(other + b":h", b"a")
    with pytest.raises(StoreError, match="version"):
        u.hset(version_key(tag), b"a", b"1")
    u.commit()  # what it wrote in its bucket
    assert raw(server, ("HGETALL", tag + b":h")) == {b"a": b"1"}
    assert raw(server, ("EXISTS", other + b":h")) == 0


def test_a_key_with_the_same_tag_elsewhere_in_its_name_is_of_the_bucket(server: Server) -> None:
    tag = new_bucket()
    u = unit(server, Cache(), tag)
    u.hset(b"x" + tag + b":h", b"a", b"1")
    u.commit()
    assert raw(server, ("HGET", b"x" + tag + b":h", b"a")) == b"1"


def test_hash_tags() -> None:
    assert hash_tag(b"{a:1}:x") == b"{a:1}"
    assert hash_tag(b"x{a}{b}") == b"{a}"
    assert hash_tag(b"{}x{a}") is None
    assert hash_tag(b"plain") is None
    with pytest.raises(ValueError, match="hash tag"):
        BucketUnit(None, Cache(), b"plain")  # type: ignore[arg-type]


# -- several buckets at once ---------------------------------------------------------------------


def test_commit_many_commits_all_but_the_stale_one(server: Server, sends: Sends) -> None:
    tags = [new_bucket() for _ in range(8)]
    caches = [Cache() for _ in tags]
    units = [unit(server, c, t) for c, t in zip(caches, tags, strict=True)]
    for u, t in zip(units, tags, strict=True):
        assert u.hget(t + b":h", b"n") is None
        u.hset(t + b":h", b"n", b"1")
    committed(server, tags[1], lambda u: u.hset(tags[1] + b":h", b"n", b"other"))
    reader = unit(server, Cache(), tags[7])
    reader.hget(tags[7] + b":h", b"n")
    if server.address.cluster:
        assert len({server.node_of(t) for t in tags}) > 1
    count = sends.during(lambda: commit_many(server, [*units, reader]))
    assert sends.result == [True, False, *[True] * 6, True]
    assert count <= len(server.masters())  # one pipeline a node
    for i, t in enumerate(tags):
        expected = b"other" if i == 1 else b"1"
        assert raw(server, ("HGET", t + b":h", b"n")) == expected
        if i != 1:
            assert raw(server, ("GET", version_key(t))) == units[i].version
    assert caches[1].size() == 0
    # the units committed leave their caches warm; the stale one's knows the version found
    again = [unit(server, c, t) for c, t in zip(caches, tags, strict=True)]
    for u, t in zip(again, tags, strict=True):
        assert sends.during(lambda u=u, t=t: u.hget(t + b":h", b"n")) == (1 if t == tags[1] else 0)
        u.hset(t + b":h", b"n", b"2")
    assert commit_many(server, again) == [True] * 8


def test_commit_many_with_nothing_to_write_sends_nothing(server: Server, sends: Sends) -> None:
    tag = new_bucket()
    u = unit(server, Cache(), tag)
    assert sends.during(lambda: commit_many(server, [u])) == 0
    assert sends.result == [True]
    assert commit_many(server, []) == []


def test_calls_on_nodes_without_the_library_are_sent_again(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    tags = [new_bucket() for _ in range(6)]
    units = [unit(server, Cache(), t) for t in tags]
    for u, t in zip(units, tags, strict=True):
        u.hset(t + b":h", b"n", b"1")
    for master in server.masters():
        master.function_flush()  # as a node restarted empty
    resent = alone(monkeypatch, server)
    assert commit_many(server, units) == [True] * 6
    # those of the first node sent to (the library is loaded everywhere as the first is resent)
    assert resent and set(resent) <= {version_key(t) for t in tags}
    assert [raw(server, ("HGET", t + b":h", b"n")) for t in tags] == [b"1"] * 6


def test_send_answers_in_order_and_names_a_failure(server: Server) -> None:
    tags = [new_bucket() for _ in range(6)]
    calls = [("cs_commit_v", [version_key(t)], [b"", b"v%d" % i]) for i, t in enumerate(tags)]
    calls.insert(3, ("cs_commit_v", [version_key(tags[0])], [b"", b"late"]))
    replies = server.send(calls, raise_on_error=False)
    assert replies == [[1], [1], [1], [0, b"v0"], [1], [1], [1]]
    bad = ("cs_commit_v", [version_key(tags[1]), tags[1] + b":h"], [b"v1", b"w", "?", 2])
    replies = server.send([bad, calls[0]], raise_on_error=False)
    assert isinstance(replies[0], StoreError) and "unknown write" in str(replies[0])
    assert replies[1] == [0, b"v0"]
    with pytest.raises(StoreError, match="unknown write"):
        server.send([bad])


# -- validate, snapshots, abort ------------------------------------------------------------------


def test_validate_finds_a_newer_commit(server: Server, sends: Sends) -> None:
    tag = new_bucket()
    cache = Cache()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"n", b"1"))
    u = unit(server, cache, tag)
    assert u.hget(tag + b":h", b"n") == b"1"
    assert sends.during(u.validate) == 1  # nothing newer
    u.commit()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"n", b"2"))
    stale = unit(server, cache, tag)
    assert stale.hget(tag + b":h", b"n") == b"1"  # from the cache: stale
    with pytest.raises(Conflict):
        stale.validate()
    fresh = unit(server, cache, tag)
    assert fresh.hget(tag + b":h", b"n") == b"2"
    fresh.validate()


def test_a_snapshot_restored_forgets_the_writes_since(server: Server) -> None:
    tag = new_bucket()
    committed(server, tag, lambda u: u.zadd(tag + b":z", b"m0"))
    u = unit(server, Cache(), tag)
    assert u.zrange(tag + b":z", None, None, 10) == [b"m0"]
    u.hset(tag + b":h", b"a", b"1")
    u.zadd(tag + b":z", b"m1")
    saved = u.snapshot()
    u.hset(tag + b":h", b"b", b"2")
    u.zrem(tag + b":z", b"m0")
    u.sadd(tag + b":s", b"x")
    assert u.zrange(tag + b":z", None, None, 10) == [b"m1"]
    u.restore(saved)
    assert u.hgetall(tag + b":h") == {b"a": b"1"}
    assert u.zrange(tag + b":z", None, None, 10) == [b"m0", b"m1"]
    assert u.smembers_known(tag + b":s", [b"x"]) == [False]
    u.commit()
    assert raw(server, ("HGETALL", tag + b":h")) == {b"a": b"1"}
    assert raw(server, ("ZRANGE", tag + b":z", 0, -1)) == [b"m0", b"m1"]
    assert raw(server, ("EXISTS", tag + b":s")) == 0


def test_a_restored_unit_still_conflicts(server: Server) -> None:
    tag = new_bucket()
    u = unit(server, Cache(), tag)
    u.hget(tag + b":h", b"a")
    saved = u.snapshot()
    u.hset(tag + b":h", b"a", b"1")
    u.restore(saved)
    committed(server, tag, lambda o: o.hset(tag + b":h", b"a", b"other"))
    u.hset(tag + b":h", b"b", b"1")
    with pytest.raises(Conflict):
        u.commit()
    assert raw(server, ("HGETALL", tag + b":h")) == {b"a": b"other"}


def test_abort_writes_nothing_and_forgets(server: Server, sends: Sends) -> None:
    tag = new_bucket()
    cache = Cache()
    committed(server, tag, lambda u: u.hset(tag + b":h", b"a", b"1"))
    u = unit(server, cache, tag)
    assert u.hget(tag + b":h", b"a") == b"1"
    u.hset(tag + b":h", b"a", b"2")
    u.delete(tag + b":z")
    assert sends.during(u.abort) == 0
    assert cache.size() == 0
    assert raw(server, ("HGETALL", tag + b":h")) == {b"a": b"1"}
    after = unit(server, cache, tag)
    assert after.hget(tag + b":h", b"a") == b"1"


# -- the cluster ---------------------------------------------------------------------------------


@pytest.fixture
def cluster_server(cluster: Cluster) -> Iterator[Server]:
    server = Server(Address.parse(f"{cluster.url}?ns=bu"))
    try:
        yield server
    finally:
        server.close()


def test_commits_reach_a_bucket_whose_slot_moved(
    cluster: Cluster, cluster_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slots of two buckets move to another master after the client learnt the layout:
    their calls are refused (MOVED) and sent again alone, the others' go through."""
    server = cluster_server
    tags = [new_bucket() for _ in range(6)]
    caches = [Cache() for _ in tags]
    for t, c in zip(tags, caches, strict=True):
        u = unit(server, c, t)
        u.hset(t + b":h", b"n", b"0")
        u.commit()
    for t in tags[:2]:
        source = cluster.owner(key_slot(t))
        target = next(m for m in cluster.masters() if m.port != source.port)
        cluster.move_slot(key_slot(t), target)
    units = [unit(server, c, t) for t, c in zip(tags, caches, strict=True)]
    for u, t in zip(units, tags, strict=True):
        assert u.hget(t + b":h", b"n") == b"0"  # from the cache
        u.hset(t + b":h", b"n", b"1")
    resent = alone(monkeypatch, server)
    assert commit_many(server, units) == [True] * 6
    assert sorted(resent) == sorted(version_key(t) for t in tags[:2])
    moved = tags[0]
    u = unit(server, caches[0], moved)
    u.hset(moved + b":h", b"n", b"2")
    u.commit()
    owner = cluster.owner(key_slot(moved)).client()
    assert owner.hget(moved + b":h", b"n") == b"2"
    assert [raw(server, ("HGET", t + b":h", b"n")) for t in tags[1:]] == [b"1"] * 5


def test_strict_commits_wait_for_a_replica(cluster: Cluster) -> None:
    server = Server(Address.parse(f"{cluster.url}?ns=bu&strict=1"))
    try:
        tags = [new_bucket() for _ in range(4)]
        u = unit(server, Cache(), tags[0])
        u.hset(tags[0] + b":h", b"n", b"1")
        u.commit()
        units = [unit(server, Cache(), t) for t in tags[1:]]
        for x, t in zip(units, tags[1:], strict=True):
            x.hset(t + b":h", b"n", b"1")
        assert commit_many(server, units) == [True] * 3
        for t in tags:
            replica = cluster.replica_of(cluster.owner(key_slot(t))).client()
            replica.execute_command("READONLY")
            assert replica.hget(t + b":h", b"n") == b"1"
    finally:
        server.close()


def test_strict_mode_on_a_server_without_replicas_says_so(redis_node: Node) -> None:
    server = Server(Address.parse(f"redis://127.0.0.1:{redis_node.port}/0?ns=bu"))
    server.address = Address.parse(f"redis://127.0.0.1:{redis_node.port}/0?ns=bu&strict=1")
    try:
        tag = new_bucket()
        cache = Cache()
        u = unit(server, cache, tag)
        u.hset(tag + b":h", b"n", b"1")
        with pytest.raises(StoreError, match="no replica"):
            u.commit()
        assert cache.size() == 0  # on the master only: not trusted
    finally:
        server.close()


# -- the function library's version --------------------------------------------------------------


def test_a_library_of_a_newer_minor_version_is_kept_an_older_replaced(redis_node: Node) -> None:
    """A newer crawlstore's functions of the same major version have every function this one
    calls: they stay. Those of an older minor version (before minors: major.digest) lack
    ``cs_commit_v``: they are replaced."""
    client = redis_node.client()
    url = f"redis://127.0.0.1:{redis_node.port}/0?ns=bu"
    newer = f"{LIBRARY_MAJOR}.{LIBRARY_MINOR + 1}.0123456789ab"
    try:
        client.function_load(LIBRARY.replace(LIBRARY_VERSION.decode(), newer), replace=True)
        Server(Address.parse(url)).close()
        assert client.fcall_ro("cs_version", 0) == newer.encode()
        older = f"{LIBRARY_MAJOR}.0123456789ab"
        client.function_load(LIBRARY.replace(LIBRARY_VERSION.decode(), older), replace=True)
        Server(Address.parse(url)).close()
        assert client.fcall_ro("cs_version", 0) == LIBRARY_VERSION
    finally:
        client.function_load(LIBRARY, replace=True)
