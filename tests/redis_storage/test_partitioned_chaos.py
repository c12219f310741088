"""Chaos over a store in partitions (``partitioned=1``) on the Redis Cluster: crawler
processes whose clocks are 2 s apart push, pop and report with 0.3 s leases while, at random,
one or two of them are stopped (SIGSTOP) for longer than a lease, ``PAUSES`` stops in all,
and one is killed (SIGKILL) and replaced ``KILLS`` times. The history the workers
acknowledged, read against the store: nothing acknowledged is lost; per URL, leases never
overlap and none follows the one reported done; per host, leases in flight never exceed the
cap and pops keep the delay; the gauges equal the records; what is left pops exactly once.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import redis_worker
from redis_checks import Acks, check, drain_held, pause, stop_all, wait_acks
from redis_servers import NO_SERVER, Cluster, cluster_cli, have_server
from redis_worker import Child, read_acks, spawn

from crawlstore import Fingerprint, LastOutcome, Store, URLStatus

PAUSES = 100
KILLS = 5
LEASE, DELAY, CAP = 0.3, 0.05, 1
SKEWS = (-1.0, 0.0, 1.0)  # each crawler's machine clock, seconds ahead


@pytest.mark.slow
@pytest.mark.skipif(not have_server() or cluster_cli() is None,
                    reason=f"{NO_SERVER}: the Redis chaos test skipped")  # fmt: skip
def test_crawlers_stopped_past_their_leases_and_killed_keep_the_history(
    cluster: Cluster, tmp_path: Path
) -> None:
    url = f"{cluster.url}?ns=pc{os.getpid()}&partitioned=1"
    with Store.open(url) as store:  # the crawl's policy, which every crawler reads
        store.frontier(crawl="c", queues="host", delay=DELAY, max_in_flight=CAP,
                       lease_time=LEASE).stats()  # fmt: skip
    rng = random.Random(20261204)
    stop = tmp_path / "stop"
    made = iter(range(1000))

    def crawler(skew: float) -> Child:
        return spawn(redis_worker.crawl, url, me=next(made), stop=stop, skew=skew)

    children = [crawler(skew) for skew in SKEWS]
    running = list(children)
    kills_at = set(rng.sample(range(5, 60), KILLS))  # (rounds: about 67 make the pauses)
    stops = rounds = 0
    try:
        wait_acks(running, "D", 5, "work")
        while stops < PAUSES:
            if rounds in kills_at:  # one killed anywhere in its calls, and replaced
                victim = rng.choice(running)
                victim.kill()
                running.remove(victim)
                running.append(crawler(rng.choice(SKEWS)))
                children.append(running[-1])
            victims = rng.sample(running, rng.choice((1, 2)))  # (two at once, at times)
            pause(victims, rng.uniform(LEASE + 0.05, LEASE + 0.3))  # longer than a lease
            stops, rounds = stops + len(victims), rounds + 1
            read_acks(running, rng.uniform(0, 0.05))
        wait_acks(running, "D", 5, "work after the pauses")
        stop_all(running, stop)
    finally:
        for child in children:
            child.kill()  # SIGKILL ends a stopped process too
    acks = Acks.of(children)
    acks.check_errors()
    with Store.open(url) as store:
        frontier = store.frontier(crawl="c")
        acks.check_kept(check(frontier), handed_out_again=True)
        acks.check_history(frontier, lease_time=LEASE, delay=DELAY, cap=CAP)
    drain_held(url)


def test_the_history_check_finds_what_it_looks_for() -> None:
    """``Acks.check_history`` fails on each thing it checks (no server needed)."""

    class Store:  # what the store says: a.test/1 was done at 1.2, the rest is queued
        def url(self, url: str) -> URLStatus:
            if url != "https://a.test/1":
                return URLStatus(url, Fingerprint(bytes(16)), "queued")
            return URLStatus(url, Fingerprint(bytes(16)), "done",
                             outcome=LastOutcome(at=1.2, state="done"))  # fmt: skip

    def history(*lines: str) -> None:
        acks = Acks.parse(lines)
        acks.check_history(Store(), lease_time=1.0, delay=0.5, cap=1)  # type: ignore[arg-type]

    history("L https://a.test/1 2.0", "D https://a.test/1 2.0", "L https://a.test/2 2.7")
    history("L https://a.test/1 2.0", "L https://a.test/2 2.7")  # (died before its D)
    overlapping = ["L https://a.test/2 2.0", "L https://a.test/2 2.5"]
    after_done = ["L https://a.test/1 2.0", "D https://a.test/1 2.0", "L https://a.test/1 3.5"]
    over_cap = ["L https://a.test/2 2.0", "L https://a.test/3 2.6"]
    too_soon = ["L https://a.test/1 2.0", "D https://a.test/1 2.0", "L https://a.test/2 2.3"]
    for lines, why in [(overlapping, "overlap"), (after_done, "after it was done"),
                       (over_cap, "leases held"), (too_soon, "closer than")]:  # fmt: skip
        with pytest.raises(AssertionError, match=why):
            history(*lines)
