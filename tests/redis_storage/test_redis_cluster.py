"""The store on a Redis Cluster (three masters, three replicas) and on a Redis that fills up:
routing, a master killed under load, slots moved under load, a node without the function
library, a full node, and crawler processes killed with SIGKILL.

Workers are forked processes (``redis_worker.py``) that acknowledge each call on a pipe only
after it returned; the checks compare the store with what was acknowledged.
"""

from __future__ import annotations

import itertools
import os
import random
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis_worker
from redis_checks import (
    Acks,
    check,
    drain_held,
    pop_all,
    role,
    seeds,
    slot_of,
    stop_all,
    store_slot,
    wait_acks,
    wait_for,
)
from redis_servers import (
    NO_SERVER,
    Cluster,
    Node,
    cluster_cli,
    free_ports,
    have_server,
    server_binary,
)
from redis_worker import Child, read_acks, spawn

from crawlstore import Seed, Store
from crawlstore.errors import StoreError, StoreFull
from crawlstore.storages._redis.server import LIBRARY_VERSION

pytestmark = pytest.mark.skipif(
    not have_server() or cluster_cli() is None, reason=f"{NO_SERVER}: Redis Cluster tests skipped"
)

_namespaces = itertools.count()


@pytest.fixture
def ns() -> str:
    return f"rc{os.getpid()}x{next(_namespaces)}"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    """A standalone node of the test's own (its memory settings are the test's)."""
    binary = server_binary(tmp_path)
    assert binary is not None
    server = Node(binary, tmp_path / "node", free_ports(1)[0])
    try:
        yield server
    finally:
        server.stop()


# -- routing ------------------------------------------------------------------------------------


LAYOUTS = pytest.mark.parametrize("layout", ["&partitioned=0", ""], ids=["locked", "partitioned"])


@LAYOUTS
def test_seeds_spread_over_every_master_and_come_back_once(
    cluster: Cluster, ns: str, layout: str
) -> None:
    pushed = seeds(3000, 300)
    with Store.open(f"{cluster.url}?ns={ns}{layout}") as store:
        frontier = store.frontier(crawl="c")
        for i in range(0, len(pushed), 500):
            assert all(frontier.push_many(pushed[i : i + 500]))
        popped = pop_all(store, frontier)
        assert sorted(popped) == sorted(s.url for s in pushed)
        assert set(check(frontier).values()) == {"done"}
    per_master = [sum(1 for _ in m.client().scan_iter(match=f"{{{ns}[}}:]*", count=1000))
                  for m in cluster.masters()]  # fmt: skip
    assert len(per_master) == 3 and min(per_master) > sum(per_master) / 3 * 0.7, per_master


# -- a master killed under load -----------------------------------------------------------------


@pytest.mark.slow
@LAYOUTS
@pytest.mark.parametrize("strict", [False, True], ids=["async", "strict"])
def test_a_master_killed_under_load(
    cluster: Cluster, ns: str, tmp_path: Path, strict: bool, layout: str
) -> None:
    """The master of the store's slot (its lock, epoch and journal) is SIGKILLed while two
    workers push, pop and report; its replica takes over, the killed node comes back as a
    replica, the workers go on. Asynchronous replication may lose acknowledged writes, never
    the invariants. In strict mode the replica is first stopped (SIGSTOP) and cut off, so
    that the master's last writes die with it, while the workers see commits no replica
    confirms; nothing acknowledged is lost, and no commit is left half applied."""
    url = f"{cluster.url}?ns={ns}{layout}" + ("&strict=1" if strict else "")
    victim = cluster.owner(store_slot(ns))
    replica = cluster.replica_of(victim)
    stop = tmp_path / "stop"
    children = [spawn(redis_worker.crawl, url, me=i, stop=stop) for i in range(2)]
    try:
        wait_acks(children, "D", 20, "work")
        if strict:  # from now on, what the master gets is lost with it
            replica.pause()
            victim.client().client_kill_filter(_type="replica")
            wait_acks(children, "E", 3, "unconfirmed commits", each=False)
        victim.kill()
        replica.resume()
        wait_for(children, lambda: role(replica) == "master", 30, "promotion")
        victim.start()  # it rejoins as the replica of its replica
        cluster.wait_ok()
        wait_acks(children, "D", 20, "work after the failover")
        stop_all(children, stop)
    finally:
        for child in children:
            child.kill()
        replica.resume()
        if not victim.running():
            victim.start()
        cluster.wait_ok()
    acks = Acks.of(children)
    # the failover was waited for; what may fail is a unit whose lock was on the killed master
    # and did not reach its replica, and, in strict mode, a commit no replica confirmed
    acks.check_errors("lock was lost", *(["no replica acknowledged"] if strict else []))
    with Store.open(url) as store:
        states = check(store.frontier(crawl="c"))
    if strict:
        acks.check_kept(states)
    drain_held(url)


@pytest.mark.slow
def test_a_client_whose_own_node_dies_goes_on(cluster: Cluster, ns: str) -> None:
    """The node named in the store's URL is SIGKILLed and its replica takes over: the client
    goes on through the other nodes (redis-py asks its first node which keys a function call
    names; every call failed with 'unreachable' while that node stayed its default)."""
    master = cluster.masters()[0]
    replica = cluster.replica_of(master)
    try:
        with Store.open(f"redis+cluster://127.0.0.1:{master.port}/?ns={ns}") as store:
            frontier = store.frontier(crawl="c")
            assert all(frontier.push_many(seeds(50, 50)))
            master.kill()
            wait_for([], lambda: role(replica) == "master", 30, "promotion")
            cluster.wait_ok()
            assert all(frontier.push_many(seeds(50, 50, tag="after-")))
            assert len(pop_all(store, frontier)) == 100
            assert Counter(check(frontier).values()) == {"done": 100}
    finally:
        master.start()
        cluster.wait_ok()


# -- slots moved under load ---------------------------------------------------------------------


@LAYOUTS
def test_slots_move_between_masters_under_load(
    cluster: Cluster, ns: str, tmp_path: Path, layout: str
) -> None:
    """The store's slot and the 20 slots of its master holding most of the namespace's keys
    move to another master while a worker pushes, pops and reports; the store's slot and the
    busiest one key a tenth of a second, so that the worker's units meet slots half moved
    (redirections, TRYAGAIN until the slot is moved)."""
    url = f"{cluster.url}?ns={ns}{layout}"
    stop = tmp_path / "stop"
    children = [spawn(redis_worker.crawl, url, me=0, stop=stop)]
    worker = children[0]
    try:
        wait_acks(children, "D", 50, "work")
        source = cluster.owner(store_slot(ns))
        target = next(m for m in cluster.masters() if m is not source)
        keys = source.client().scan_iter(match=f"{{{ns}[}}:]*", count=1000)
        busiest = [slot for slot, _ in Counter(map(slot_of, keys)).most_common(20)]
        before = worker.count("P")
        for slot in dict.fromkeys([store_slot(ns), *busiest]):
            slow = slot in (store_slot(ns), busiest[0])
            cluster.move_slot(slot, target, (lambda: read_acks(children, 0.1)) if slow else None)
        assert worker.count("P") > before  # it worked while slots moved
        wait_acks(children, "D", 50, "work after the move")
        stop_all(children, stop)
    finally:
        worker.kill()
    assert {cluster.owner(slot).port for slot in [store_slot(ns), *busiest]} == {target.port}
    acks = Acks.of(children)
    acks.check_errors()
    with Store.open(url) as store:
        acks.check_kept(check(store.frontier(crawl="c")))
    drain_held(url)


# -- a node without the function library --------------------------------------------------------


def test_a_master_without_the_function_library_gets_it_back(cluster: Cluster, ns: str) -> None:
    with Store.open(f"{cluster.url}?ns={ns}") as store:
        frontier = store.frontier(crawl="c")
        for i, master in enumerate(cluster.masters()):
            master.client().function_flush()  # as a node restarted empty, or added by hand
            assert all(frontier.push_many(seeds(100, 50, tag=f"{i}-")))
            assert len(pop_all(store, frontier)) == 100
            assert master.client().fcall_ro("cs_version", 0) == LIBRARY_VERSION
        assert Counter(check(frontier).values()) == {"done": 300}


# -- a full node --------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["0", "1"], ids=["format1", "format2"])
def test_a_full_node_raises_store_full_and_loses_nothing(node: Node, ns: str, layout: str
                                                         ) -> None:  # fmt: skip
    url = f"redis://127.0.0.1:{node.port}/0?ns={ns}&lock_ttl=1&partitioned={layout}"
    client = node.client()
    with Store.open(url) as store:
        frontier = store.frontier(crawl="c")
        client.config_set("maxmemory", client.info("memory")["used_memory"] + 1_000_000)
        acked: list[Seed] = []
        with pytest.raises(StoreFull, match="out of memory"):
            for i in range(1000):  # 1 MB holds a few thousand
                batch = seeds(100, 20, tag=f"{i}-{'x' * 100}-")
                frontier.push_many(batch)
                acked += batch
        assert acked
        client.config_set("maxmemory", 0)
        found = check(frontier).keys()
        if layout == "0":  # the refused push: none of it
            assert found == {s.url for s in acked}
        else:  # atomic per bucket: what of the refused push its buckets committed
            assert {s.url for s in acked} <= found <= {s.url for s in acked + batch}
        assert sorted(pop_all(store, frontier)) == sorted(found)
        assert frontier.push(Seed.get("https://after.test/"))


def test_a_node_that_evicts_is_refused(node: Node, ns: str) -> None:
    node.client().config_set("maxmemory-policy", "allkeys-lru")
    with pytest.raises(StoreError, match="noeviction"):
        Store.open(f"redis://127.0.0.1:{node.port}/0?ns={ns}")


# -- crawlers killed ----------------------------------------------------------------------------

LEASE = 1.0


@pytest.mark.slow
def test_crawlers_killed_at_random_finish_every_url(cluster: Cluster, ns: str) -> None:
    """Three crawlers with 1 s leases are SIGKILLed eight times at random and replaced: every
    URL ends done, once; a dead crawler's URLs come back when their leases end, and two leases
    of one URL never overlap."""
    url = f"{cluster.url}?ns={ns}&lock_ttl=1&partitioned=0"
    pushed = seeds(600, 60)
    with Store.open(url) as store:
        assert all(store.frontier(crawl="c", lease_time=LEASE).push_many(pushed))
    rng = random.Random(20261201)
    crawl = redis_worker.crawl
    children = [spawn(crawl, url, me=i, push=False, lease_time=LEASE) for i in range(3)]
    killed: list[Child] = []
    try:
        for _ in range(8):
            wait_acks(children, "D", rng.randrange(5, 40), "work", each=False)
            victim = rng.choice([c for c in children if c.running()])
            time.sleep(rng.uniform(0, 0.02))  # land anywhere in its next calls
            victim.kill()
            killed.append(victim)
            children.append(spawn(crawl, url, me=len(children), push=False, lease_time=LEASE))
        for child in children:
            assert child in killed or child.wait(60) == 0, child.lines[-5:]
    finally:
        for child in children:
            child.kill()
    acks = Acks.of(children)
    acks.check_errors("lock was lost", "outlived half its lock ttl")  # 1 s locks, a busy box
    with Store.open(url) as store:
        states = check(store.frontier(crawl="c"))
    assert states == {s.url: "done" for s in pushed}
    assert acks.leases.keys() == states.keys()
    for url_, leases in acks.leases.items():
        leases.sort()
        assert all(b >= a + LEASE - 0.001 for a, b in itertools.pairwise(leases)), url_
        if url_ in acks.done:  # nobody had it after it was done
            assert acks.done[url_] == leases[-1]


def test_a_dead_lock_holder_and_a_half_applied_commit(cluster: Cluster, ns: str) -> None:
    """A process killed inside a transaction holds the store lock until ``lock_ttl``; one
    that dies between the journal and the last slot's writes leaves a journal that the next
    unit, of any process, applies before anything else."""
    url = f"{cluster.url}?ns={ns}&lock_ttl=1&partitioned=0"
    with Store.open(url) as store:
        assert all(store.frontier(crawl="c").push_many(seeds(20, 20)))
    holder = spawn(redis_worker.hold_lock, url)
    wait_for([holder], lambda: "IN" in holder.lines, 30, "lock taken")
    holder.kill()
    half = spawn(redis_worker.die_mid_commit, url)
    assert os.WEXITSTATUS(half.wait(30)) == redis_worker.DIED, half.lines
    master = cluster.owner(store_slot(ns)).client()
    assert master.exists(f"{{{ns}}}:journal")
    (done,) = [line.split()[1] for line in half.lines if line.startswith("L ")]
    with Store.open(url) as store:
        states = check(store.frontier(crawl="c"))
    assert not master.exists(f"{{{ns}}}:journal")
    assert states[done] == "done"
    assert "https://held.test/" not in states  # the killed transaction: not committed
    assert Counter(states.values()) == {"done": 1, "queued": 19 + redis_worker.LINKS}
    drain_held(url)
