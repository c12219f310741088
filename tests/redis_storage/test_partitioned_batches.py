"""A batch over many buckets of a store in partitions (``?partitioned=1``): the core's units on
the buckets a push or a report reaches run on the caches it read ahead, and commit in one
round trip; a unit whose bucket another client moved meanwhile runs again alone, so every
effect happens once.

Round trips are counted where redis-py sends on a connection: a pipeline is one send.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from redis_checks import Sends
from redis_servers import NO_SERVER, have_server

from crawlstore import Done, Seed, Store
from crawlstore.storages._redis import partitioned

pytestmark = pytest.mark.skipif(not have_server(), reason=f"{NO_SERVER}: Redis tests skipped")


@pytest.fixture
def sends(monkeypatch: pytest.MonkeyPatch) -> Sends:
    return Sends.counting(monkeypatch)


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    with Store.open(redis_url + "&partitioned=1") as store:
        yield store


def _seeds(n: int, path: str) -> list[Seed]:
    return [Seed.get(f"https://h{i}.example/{path}") for i in range(n)]


def test_a_push_over_many_buckets_commits_in_a_few_round_trips(store: Store, sends: Sends) -> None:
    frontier = store.frontier(queues="host", delay=0, max_in_flight=None)
    assert all(frontier.push_many(_seeds(40, "a")))  # the crawl made, its buckets hinted
    before = sends.count
    assert all(frontier.push_many(_seeds(40, "b")))  # 40 hosts: about 40 buckets
    assert sends.count - before <= 6  # claims, read-ahead, commits, hints (not one a bucket)
    before = sends.count
    popped = frontier.pop_many(80)
    assert len(popped) == 80
    sends.count = 0
    frontier.report_many([Done(r.seed) for r in popped])
    assert sends.count <= 6
    assert frontier.stats().done == 80


def test_a_unit_whose_bucket_moved_under_a_batch_runs_again_alone(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    frontier = store.frontier(queues="host", delay=0, max_in_flight=None)
    frontier.push_many(_seeds(20, "a"))
    storage: Any = store._storage
    original = partitioned.commit_many
    moved: list[bytes] = []

    def another_client_first(server: Any, units: list[Any]) -> list[bool]:
        if not moved and len(units) > 1:  # another client commits to the first bucket
            moved.append(units[0].version_key)
            server.read([("SET", units[0].version_key, b"someone-else")])
        return original(server, units)

    monkeypatch.setattr(partitioned, "commit_many", another_client_first)
    conflicts = storage.conflicts
    assert all(frontier.push_many(_seeds(20, "b")))
    assert moved and storage.conflicts == conflicts + 1
    stats = frontier.stats()
    assert stats.queued == 40  # the unit ran again: its seeds are queued, once
    assert sorted(r.seed.url for r in frontier.pop_many(100)) == sorted(
        s.url for s in _seeds(20, "a") + _seeds(20, "b")
    )
