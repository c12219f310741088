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
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis_worker
from redis_servers import Cluster, Node, free_ports, have_server, server_binary
from redis_worker import Child, read_acks, spawn

from crawlstore import Done, Seed, Store
from crawlstore.errors import StoreError, StoreFull
from crawlstore.frontier import Frontier
from crawlstore.redis.server import LIBRARY_VERSION

pytestmark = pytest.mark.skipif(
    not have_server() or shutil.which("redis-cli") is None,
    reason="redis-server and redis-cli are not installed (apt-get install redis-tools): Redis "
    "Cluster tests skipped",
)

redis_crc = pytest.importorskip("redis.crc")
_namespaces = itertools.count()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One cluster for the module, its nodes fsyncing every write (as strict mode needs); a
    test that breaks it restores it."""
    run = tmp_path_factory.mktemp("cluster")
    binary = server_binary(run)
    assert binary is not None
    nodes = Cluster(binary, run, "--appendfsync", "always")
    try:
        yield nodes
    finally:
        nodes.stop()


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


# -- helpers ------------------------------------------------------------------------------------


def seeds(n: int, hosts: int, tag: str = "") -> list[Seed]:
    return [Seed.get(f"https://h{i % hosts}.test/{tag}{i}") for i in range(n)]


def check(frontier: Frontier) -> dict[str, str]:
    """The invariants (each URL listed once, in one state; the crawl's and each queue's
    gauges equal the states of their URLs); each URL's state."""
    urls: dict[str, str] = {}
    per_queue: Counter[tuple[str | None, str]] = Counter()
    after = None
    while page := frontier.urls(after=after, limit=1000):
        for status in page:
            assert status.url not in urls, f"{status.url} is listed twice"
            urls[status.url] = status.state
            per_queue[status.queue, status.state] += 1
        after = page[-1].fingerprint
    states = Counter(urls.values())
    stats = frontier.stats()
    assert stats.admitted >= len(urls)  # a finished URL pushed again is admitted again
    assert (stats.queued, stats.in_flight, stats.scheduled, stats.done) == (
        states["queued"], states["in_flight"], states["scheduled"], states["done"])  # fmt: skip
    assert len(frontier) == stats.queued + stats.in_flight + stats.scheduled
    queues, last = [], None
    while page_q := frontier.queues(after=last, limit=500):
        queues += page_q
        last = page_q[-1].key
    for q in queues:
        assert (q.queued, q.in_flight, q.scheduled) == (per_queue[q.key, "queued"],
            per_queue[q.key, "in_flight"], per_queue[q.key, "scheduled"]), q  # fmt: skip
    return urls


def pop_all(store: Store, frontier: Frontier) -> list[str]:
    """Pop until nothing is ready, reporting Done a batch a transaction; the URLs popped."""
    out: list[str] = []
    while popped := frontier.pop_many(200):
        with store.transaction():
            for ready in popped:
                frontier.report(Done(ready.seed))
        out += [ready.seed.url for ready in popped]
    return out


def drain_held(url: str) -> None:
    """Every seed the crawl holds, in flight ones too (on a clock past every lease), pops
    exactly once."""
    with Store.open(url, clock=lambda: time.time() + 86400) as store:
        frontier = store.frontier(crawl="c")
        held = {u for u, state in check(frontier).items() if state in ("queued", "in_flight")}
        frontier.core.reap()
        popped = pop_all(store, frontier)
        assert len(popped) == len(set(popped)) and set(popped) == held
        assert len(frontier) == 0


def wait_for(children: list[Child], done: Callable[[], bool], timeout: float, what: str) -> None:
    """Read the workers' lines until ``done()``; fails if a worker not killed ended, or if it
    takes longer."""
    deadline = time.monotonic() + timeout
    while not done():
        for child in children:
            assert child.status is not None or child.running(), f"ended: {child.lines[-5:]}"
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        read_acks(children, 0.05)


def wait_acks(children: list[Child], kind: str, more: int, what: str, *, each: bool = True,
              timeout: float = 60) -> None:  # fmt: skip
    """Read until each worker (not ``each``: all together) sent ``more`` lines of ``kind``."""
    start = [c.count(kind) for c in children]

    def counts() -> list[int]:
        return [c.count(kind) - n for c, n in zip(children, start, strict=True)]

    wait_for(children, lambda: min(counts()) >= more if each else sum(counts()) >= more,
             timeout, what)  # fmt: skip


@dataclass
class Acks:
    """What the workers were told: URLs pushed, each lease's expiry by URL, URLs done (with
    the expiry of the lease they ended), and errors."""

    pushed: set[str] = field(default_factory=set)
    leases: dict[str, list[float]] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, children: list[Child]) -> Acks:
        acks = cls()
        for line in (line for child in children for line in child.lines):
            kind, _, rest = line.partition(" ")
            if kind == "P":
                acks.pushed.update(rest.split())
            elif kind in ("L", "D"):
                url, expires = rest.split()
                if kind == "L":
                    acks.leases.setdefault(url, []).append(float(expires))
                else:
                    acks.done[url] = float(expires)
            elif kind in ("E", "X"):
                acks.errors.append(rest)
        return acks

    def check_errors(self, *expected: str) -> None:
        """Every error a worker met is one of those ``expected``."""
        assert [e for e in self.errors if not any(x in e for x in expected)] == []

    def check_kept(self, states: dict[str, str]) -> None:
        """Nothing acknowledged is lost, and no URL was handed out twice."""
        assert self.pushed and self.pushed <= states.keys()
        assert all(states[url] == "done" for url in self.done)
        assert not {url for url, leases in self.leases.items() if len(leases) > 1}


def store_slot(ns: str) -> int:
    """The slot of the store's own keys (its lock, epoch, journal)."""
    return slot_of(b"{" + ns.encode() + b"}")


def slot_of(key: bytes) -> int:
    return int(redis_crc.key_slot(key))


def role(node: Node) -> str:
    return str(node.client().info("replication")["role"])


def stop_all(children: list[Child], stop: Path) -> None:
    stop.touch()
    for child in children:
        assert child.wait(60) == 0, child.lines[-5:]


# -- routing ------------------------------------------------------------------------------------


def test_seeds_spread_over_every_master_and_come_back_once(cluster: Cluster, ns: str) -> None:
    pushed = seeds(3000, 300)
    with Store.open(f"{cluster.url}?ns={ns}") as store:
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
@pytest.mark.parametrize("strict", [False, True], ids=["async", "strict"])
def test_a_master_killed_under_load(
    cluster: Cluster, ns: str, tmp_path: Path, strict: bool
) -> None:
    """The master of the store's slot (its lock, epoch and journal) is SIGKILLed while two
    workers push, pop and report; its replica takes over, the killed node comes back as a
    replica, the workers go on. Asynchronous replication may lose acknowledged writes, never
    the invariants. In strict mode the replica is first stopped (SIGSTOP) and cut off, so
    that the master's last writes die with it, while the workers see commits no replica
    confirms; nothing acknowledged is lost, and no commit is left half applied."""
    url = f"{cluster.url}?ns={ns}" + ("&strict=1" if strict else "")
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


# -- slots moved under load ---------------------------------------------------------------------


def test_slots_move_between_masters_under_load(cluster: Cluster, ns: str, tmp_path: Path) -> None:
    """The store's slot and the 20 slots of its master holding most of the namespace's keys
    move to another master while a worker pushes, pops and reports; the store's slot and the
    busiest one key a tenth of a second, so that the worker's units meet slots half moved
    (redirections, TRYAGAIN until the slot is moved)."""
    url = f"{cluster.url}?ns={ns}"
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


def test_a_full_node_raises_store_full_and_loses_nothing(node: Node, ns: str) -> None:
    url = f"redis://127.0.0.1:{node.port}/0?ns={ns}&lock_ttl=1"
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
        assert check(frontier).keys() == {s.url for s in acked}  # the refused push: none of it
        assert sorted(pop_all(store, frontier)) == sorted(s.url for s in acked)
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
    url = f"{cluster.url}?ns={ns}&lock_ttl=1"
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
    url = f"{cluster.url}?ns={ns}&lock_ttl=1"
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
