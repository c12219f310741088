"""A unit paused past its lock's ttl writes nothing after it, on one server and on a cluster.

A process that is paused (SIGSTOP, a long GC, a VM migrated) in the middle of its commit
outlives its lock; the next holder finishes the commit from its journal and goes on. When the
paused process resumes, the rest of its writes are refused (fenced): they would put back the
values it read before the others wrote. The pauses are at points named by what has happened
(``crawlstore.storages._redis.points``), then at random instants.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import signal
from pathlib import Path

import pytest
import redis_worker
from redis_checks import (
    Acks,
    check,
    deployment_url,
    drain_held,
    pause,
    role,
    stop_all,
    store_slot,
    wait_acks,
    wait_for,
)
from redis_servers import NO_SERVER, Cluster, cluster_cli, have_server
from redis_worker import Child, read_acks, spawn

from crawlstore import Done, Ready, Seed, Store
from crawlstore.storages._redis import points

pytestmark = pytest.mark.skipif(not have_server() or cluster_cli() is None,
                                reason=f"{NO_SERVER}: Redis fencing tests skipped")  # fmt: skip

_namespaces = itertools.count()
TTL = 0.5


def patient(url: str) -> str:
    """The store at ``url`` with the default lock ttl: for the processes a test never pauses,
    whose units must not lose their lock however slow a busy machine runs them."""
    return re.sub(r"&lock_ttl=[0-9.]+", "", url)


@pytest.fixture(params=["cluster", "standalone"])
def url(request: pytest.FixtureRequest) -> str:
    """A fresh namespace with ``TTL`` s locks, on the session's cluster or standalone node."""
    return deployment_url(request, f"rf{os.getpid()}x{next(_namespaces)}",
                          f"&lock_ttl={TTL}&partitioned=0")  # fmt: skip


def paused(url: str, point: str, **kwargs: object) -> Child:
    """A worker running ``pause_in_commit``, once it says PAUSED."""
    child = spawn(redis_worker.pause_in_commit, url, point=point, **kwargs)
    wait_for([child], lambda: "PAUSED" in child.lines, 60, f"a pause at {point}")
    return child


def resume(child: Child) -> str:
    """SIGCONT the paused worker; what its unit answered (``OK`` or ``E text``)."""
    os.kill(child.pid, signal.SIGCONT)
    assert child.wait(60) == 0, child.lines
    return child.lines[-1]


def points_of(url: str) -> list[str]:
    return [points.FIRST_WRITE, points.BETWEEN_SLOTS] if "cluster" in url else [points.FIRST_WRITE]


@pytest.mark.parametrize("point", [points.FIRST_WRITE, points.BETWEEN_SLOTS])
def test_a_push_paused_past_its_lock_does_not_hand_its_urls_out_twice(url: str, point: str) -> None:
    """A pushes 20 URLs (one a host) and is paused in its commit; B pops them all (the store
    finishes A's commit first); A resumes. Nobody else may get those URLs while B holds them,
    and each of B's reports ends its lease."""
    if point not in points_of(url):
        pytest.skip("one server: a commit is one call, there is nothing between its slots")
    urls = [f"https://h{i}.test/x" for i in range(20)]
    a = paused(url, point, push=urls)
    with Store.open(patient(url)) as b:
        frontier_b = b.frontier(crawl="c")
        held = frontier_b.pop_many(100)  # waits for A's lock to end
        assert sorted(r.seed.url for r in held) == sorted(urls)
        answer = resume(a)
        assert answer == "OK" or "held the store lock past its ttl" in answer, answer
        with Store.open(patient(url)) as c:
            assert c.frontier(crawl="c").pop_many(100) == []  # B holds every one
        with b.transaction():
            for ready in held:
                frontier_b.report(Done(ready.seed))
        tokens = [r.seed.lease.token for r in held if r.seed.lease is not None]
        assert len(set(tokens)) == len(urls)
        assert check(frontier_b) == dict.fromkeys(urls, "done")
        assert frontier_b.stats().done == len(urls)


def test_a_report_paused_past_its_lock_leaves_no_stale_queue(url: str) -> None:
    """A pops X and is paused in the commit of its Done report; B pushes Y to X's host; A
    resumes. Y must come out of the queue (A's stale queue record said it held nothing)."""
    with Store.open(patient(url)) as store:
        assert store.frontier(crawl="c", delay=0).push(Seed.get("https://h.test/x"))
    a = paused(url, points.FIRST_WRITE, push=[], report=True)
    with Store.open(patient(url)) as b:
        assert b.frontier(crawl="c").push(Seed.get("https://h.test/y"))  # once A's lock ended
    resume(a)
    # C reads what the server has (B's process cached its own writes)
    with Store.open(patient(url)) as c:
        frontier = c.frontier(crawl="c")
        popped = frontier.pop()
        assert isinstance(popped, Ready) and popped.seed.url == "https://h.test/y", popped
        assert check(frontier) == {"https://h.test/x": "done", "https://h.test/y": "in_flight"}


PAUSES = 100


@pytest.mark.slow
def test_crawlers_paused_past_their_locks_at_random_keep_the_invariants(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Three crawlers push, pop and report on a cluster with 0.4 s locks; one of them, at
    random, is stopped (SIGSTOP) for 0.45 to 0.7 s, ``PAUSES`` times. Nothing acknowledged is
    lost, no URL is handed out twice, and the crawl's counters equal its URLs' states."""
    url = f"{cluster.url}?ns=rfr{os.getpid()}x{next(_namespaces)}&lock_ttl=0.4&partitioned=0"
    rng = random.Random(20261203)
    stop = tmp_path / "stop"
    children = [spawn(redis_worker.crawl, url, me=i, stop=stop) for i in range(3)]
    try:
        wait_acks(children, "D", 5, "work")
        for _ in range(PAUSES):
            pause([rng.choice(children)], rng.uniform(0.45, 0.7))  # longer than a lock lasts
            read_acks(children, rng.uniform(0, 0.05))
        wait_acks(children, "D", 5, "work after the pauses")
        stop_all(children, stop)
    finally:
        for child in children:
            child.kill()  # SIGKILL ends a stopped process too
    acks = Acks.of(children)
    acks.check_errors("lock was lost", "held the store lock past its ttl")
    with Store.open(patient(url)) as store:
        acks.check_kept(check(store.frontier(crawl="c")))
    drain_held(patient(url))


@pytest.mark.slow
def test_strict_mode_fences_through_a_failover(cluster: Cluster) -> None:
    """In strict mode a commit waits until replicas have it, the fences too: A is paused in
    its commit, B pops its URLs, a master that A's commit writes to is killed and its replica
    takes over; A's writes, when it resumes, are refused by the promoted replica as by the
    masters that stayed."""
    ns = f"rfs{os.getpid()}x{next(_namespaces)}"
    store_master = cluster.owner(store_slot(ns))  # the journal's, which A's commit waits on
    victim = next(m for m in cluster.masters() if m is not store_master)  # holds A's slots too
    replica = cluster.replica_of(victim)
    url = (f"redis+cluster://127.0.0.1:{store_master.port}/?ns={ns}&lock_ttl={TTL}&strict=1"
           "&partitioned=0")  # fmt: skip
    urls = [f"https://h{i}.test/x" for i in range(20)]
    with Store.open(patient(url)) as store:
        store.frontier(crawl="c").push(Seed.get("https://first.test/"))
    a = paused(url, points.FIRST_WRITE, push=urls)
    try:
        with Store.open(patient(url)) as b:
            held = b.frontier(crawl="c").pop_many(100)
            assert len(held) == len(urls) + 1
        victim.kill()
        wait_for([], lambda: role(replica) == "master", 30, "promotion")
        cluster.wait_ok()
        answer = resume(a)
        assert "held the store lock past its ttl" in answer, answer
        with Store.open(patient(url)) as c:
            frontier = c.frontier(crawl="c")
            assert frontier.pop_many(100) == []
            assert frontier.stats().in_flight == len(urls) + 1
            check(frontier)
    finally:
        a.kill()
        if not victim.running():
            victim.start()
        cluster.wait_ok()
