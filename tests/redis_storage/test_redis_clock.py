"""A store on Redis reads the time off the server's clock, so that clients on machines whose
clocks disagree agree on when a lease expires and a host may be fetched again."""

from __future__ import annotations

import time
from pathlib import Path

from helpers import seed

from crawlstore import Store, SyncedClock
from crawlstore.clock import system_clock


def test_a_store_on_redis_keeps_the_servers_time_and_a_file_its_machines(
    redis_url: str, tmp_path: Path
) -> None:
    with Store.open(redis_url) as store:
        assert isinstance(store.clock, SyncedClock)
        assert abs(store.clock() - time.time()) < 5  # the server runs on this machine
    with Store.open(tmp_path / "s.lmdb") as store:
        assert store.clock is system_clock
    with Store.open(redis_url, clock=time.monotonic) as store:
        assert store.clock is time.monotonic  # one given is kept
    with Store.open(redis_url, clock=system_clock) as store:
        assert store.clock is system_clock  # even this machine's own, given explicitly


def test_clients_whose_clocks_disagree_agree_on_a_lease(redis_url: str) -> None:
    def ahead() -> float:  # a machine whose clock is a minute fast
        return time.time() + 60

    with Store.open(redis_url) as a:
        server = a._storage.server_clock()
        assert server is not None
        with (Store.open(redis_url, clock=SyncedClock(server, local=ahead)) as b,
              Store.open(redis_url, clock=ahead) as unsynced):  # fmt: skip
            assert abs(b.clock() - a.clock()) < 5
            fa = a.frontier(lease_time=30, delay=0)
            fa.push(seed("a"))
            (leased,) = fa.pop_many(1)
            assert leased.lease is not None
            assert abs(leased.lease.expires - (a.clock() + 30)) < 5
            # b's machine is a minute ahead, but b reads the server's time: the lease holds
            assert b.frontier().pop_many(1) == []
            # a client on that machine's own clock takes the seed of a lease still running
            assert [r.seed.url for r in unsynced.frontier().pop_many(1)] == [leased.seed.url]
