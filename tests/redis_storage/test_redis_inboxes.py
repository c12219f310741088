"""Inboxes on Redis in partitions (``?partitioned=1``), with processes that die: a push killed
after its posts reached their inboxes, or while its fold had read an inbox and sent nothing of
its commit, loses no URL and queues none twice; the next pop folds them. On one server and on
the cluster (three masters, three replicas).
"""

from __future__ import annotations

import itertools
import os

import pytest
import redis_worker
from redis_checks import deployment_url
from redis_servers import NO_SERVER, have_server
from redis_worker import spawn

from crawlstore import Store
from crawlstore.storages._redis import points

pytestmark = pytest.mark.skipif(not have_server(), reason=f"{NO_SERVER}: Redis tests skipped")
_namespaces = itertools.count()


@pytest.fixture(params=["standalone", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    return deployment_url(request, f"inbox{os.getpid()}-{next(_namespaces)}", "&partitioned=1")


@pytest.mark.parametrize("point", [points.POSTED, points.FOLDING])
def test_a_push_killed_after_its_posts_loses_no_url(url: str, point: str) -> None:
    child = spawn(redis_worker.die_at, url, point=point)
    assert os.WEXITSTATUS(child.wait(60)) == redis_worker.DIED, child.lines
    assert "PUSHED" not in child.lines
    links = [f"https://link{i}.test/" for i in range(redis_worker.LINKS)]
    with Store.open(url) as store:
        frontier = store.frontier(crawl="c")
        assert frontier.url(links[0]).state == "unknown"  # posted, not folded yet
        popped = [r.seed.url for r in frontier.pop_many(100)]
        assert sorted(popped) == sorted(["https://first.test/", *links])
        assert frontier.pop_many(100) == []
        stats = frontier.stats()
        assert stats.admitted == 1 + len(links) and stats.in_flight == 1 + len(links)
        assert stats.queued == 0


def test_the_due_hints_are_spread_over_sixteen_slots(url: str) -> None:
    """A crawl's index of due buckets is 16 sorted sets, each in a slot of its own: every
    bucket that holds a queue is hinted in the shard ``bucket % 16``, and a pop finds work in
    any of them."""
    from crawlstore import Seed
    from crawlstore.storages._redis.server import key_slot

    hosts = [f"h{i}.test" for i in range(100)]
    with Store.open(url) as store:
        frontier = store.frontier(crawl="c", queues="host")
        assert all(frontier.push_many(Seed.get(f"https://{host}/") for host in hosts))
        storage = store._storage
        crawl = storage.view(lambda: storage.crawl("c"))
        tag = storage.crawl_tag(crawl)[:-1]
        shards = [tag + b":d%d}:d" % n for n in range(16)]
        assert len({key_slot(key) for key in shards}) == 16
        hinted = storage.server.read([("ZRANGE", key, 0, -1) for key in shards])
        buckets = {storage._queue_bucket(crawl, host) for host in hosts}
        assert {tag + b":%d}" % int(b) for members in hinted for b in members} == buckets
        assert all(int(b) % 16 == n for n, members in enumerate(hinted) for b in members)
        assert sum(map(bool, hinted)) >= 12  # spread (100 hosts over 1,024 buckets)
        assert sorted(r.seed.url for r in frontier.pop_many(200)) == sorted(
            f"https://{host}/" for host in hosts
        )
