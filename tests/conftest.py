"""Shared fixtures: one behaviour suite runs against every frontier storage."""

from __future__ import annotations

import faulthandler
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import MakeFrontier
from redis_servers import (
    NO_SERVER,
    STARTED,
    Cluster,
    Node,
    cluster_cli,
    have_server,
    server_binary,
    shared_node,
    version,
)

from crawlstore import InMemFrontier, ManualClock, Store
from crawlstore.frontier import Frontier
from crawlstore.frontier.core import CoreFrontier
from crawlstore.storages._partitioned import PartitionedMemoryStorage

STORAGES = ["memory", "partitioned", "store", "redis", "redis-partitioned"]
_namespaces = itertools.count()
#: Seconds the whole run may take: then every thread's stack is printed and the run ends, so a
#: run that hangs where a test's own timeout cannot reach (pyproject's ``timeout``) still ends
#: with the reason, within CI's 90 minutes.
SESSION_LIMIT = 80 * 60


def pytest_configure(config: pytest.Config) -> None:
    faulthandler.dump_traceback_later(SESSION_LIMIT, exit=True)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    """Each test's report of its call, as ``item.call_report``: a fixture's teardown reads it
    (the browser tests keep a screenshot of a failure)."""
    report = yield
    if report.when == "call":
        item.call_report = report  # type: ignore[attr-defined]
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Which Redis-compatible servers the Redis tests ran on."""
    if STARTED:
        ran = ", ".join(version(b) for b in sorted(STARTED))
        terminalreporter.write_line(f"Redis tests ran on: {ran}")
    elif not have_server():
        terminalreporter.write_line(f"Redis tests skipped: {NO_SERVER}")


@pytest.fixture(scope="session")
def redis_node() -> Node:
    """A standalone redis-server for the session (skipped, with the reason, without one)."""
    node = shared_node()
    if node is None:
        pytest.skip(f"{NO_SERVER}: Redis tests skipped")
    return node


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One Redis Cluster (3 masters, 3 replicas) for the session, its nodes fsyncing every
    write (as strict mode needs); a test that breaks it restores it."""
    run = tmp_path_factory.mktemp("cluster")
    binary = server_binary(run)
    if binary is None or cluster_cli() is None:
        pytest.skip(f"{NO_SERVER}: Redis Cluster tests skipped")
    nodes = Cluster(binary, run, "--appendfsync", "always")
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def redis_url(redis_node: Node) -> str:
    """A fresh namespace on the session's Redis."""
    return f"redis://127.0.0.1:{redis_node.port}/0?ns=t{next(_namespaces)}"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=STORAGES)
def make_frontier(
    request: pytest.FixtureRequest, clock: ManualClock, tmp_path: Path
) -> Iterator[MakeFrontier]:
    """``make_frontier(order="fifo", **policy)`` builds an empty storage on the test's clock
    (``policy``: ``queues``, ``delay``, ``max_in_flight``, ``lease_time``)."""
    if request.param == "memory":
        yield lambda order="fifo", **policy: InMemFrontier(order, clock=clock, **policy)
        return
    if request.param == "partitioned":  # the memory storage in 4 partitions
        storage = PartitionedMemoryStorage(4)
        names = itertools.count()

        def partitioned(order: str = "fifo", **policy: Any) -> Frontier:
            policy.setdefault("queues", "single")
            return CoreFrontier(storage, crawl=f"crawl{next(names)}", clock=clock, order=order,
                                **policy)  # fmt: skip

        yield partitioned
        return
    if request.param.startswith("redis"):
        url = request.getfixturevalue("redis_url")
        if request.param == "redis":  # format 1, under one store-wide lock
            url += "&partitioned=0"
        store = Store.open(url, clock=clock)
    else:
        store = Store.open(tmp_path / "frontier.lmdb", clock=clock, durability="nosync")
    crawls = itertools.count()

    def make(order: str = "fifo", **policy: object) -> Frontier:
        policy.setdefault("queues", "single")  # as the other storages
        return store.frontier(order, crawl=f"crawl{next(crawls)}", **policy)  # type: ignore[arg-type]

    yield make
    store.close()


@pytest.fixture(params=["lmdb", "redis", "partitioned", "redis-partitioned"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Iterator[Store]:
    """A fresh store on the test's clock, a file and on Redis (group commit: fsync is not what
    tests check), in both of Redis's layouts (format 2, the default; format 1), and the memory
    storage in 4 partitions."""
    if request.param == "partitioned":
        with Store(PartitionedMemoryStorage(4), clock) as s:
            yield s
        return
    if request.param.startswith("redis"):
        url = request.getfixturevalue("redis_url")
        if request.param == "redis":  # format 1, under one store-wide lock
            url += "&partitioned=0"
        with Store.open(url, clock=clock) as s:
            yield s
        return
    with Store.open(tmp_path / "store.lmdb", clock=clock, durability="nosync") as s:
        yield s


@pytest.fixture
def file_store(tmp_path: Path, clock: ManualClock) -> Iterator[Store]:
    """A fresh store file only (tests of how it reads its file)."""
    with Store.open(tmp_path / "store.lmdb", clock=clock, durability="nosync") as s:
        yield s
