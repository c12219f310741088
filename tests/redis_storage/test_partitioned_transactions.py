"""A transaction on Redis in partitions (``?partitioned=1``) whose bucket another client
changed while it ran writes nothing and raises ``TransactionConflict``: on one server its
whole commit is one compare-and-set; on the cluster its buckets are checked before anything
of it is committed.
"""

from __future__ import annotations

import itertools
import os

import pytest
from redis_checks import deployment_url
from redis_servers import NO_SERVER, have_server

from crawlstore import Done, Seed, Store
from crawlstore.errors import TransactionConflict

pytestmark = pytest.mark.skipif(not have_server(), reason=f"{NO_SERVER}: Redis tests skipped")
_namespaces = itertools.count()


@pytest.fixture(params=["standalone", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    return deployment_url(request, f"tx{os.getpid()}-{next(_namespaces)}", "&partitioned=1")


def test_a_transaction_whose_bucket_moved_writes_nothing(url: str) -> None:
    with Store.open(url) as a, Store.open(url) as b:
        fa = a.frontier(crawl="c", queues="host", delay=0, max_in_flight=None)
        fb = b.frontier(crawl="c")
        fa.push_many([Seed.get("https://h0.test/x"), Seed.get("https://h0.test/y")])
        (ready,) = fa.pop_many(1)
        link = Seed.get("https://h1.test/link")
        with pytest.raises(TransactionConflict), a.transaction():
            fa.report(Done(ready.seed))  # a unit on h0's bucket, held until the end
            assert fa.push(link)  # posted with the transaction's commit
            assert len(fb.pop_many(1)) == 1  # another client moves h0's bucket meanwhile
        assert fa.url(ready.seed.url).state == "in_flight"  # nothing of it written
        assert fa.url(link.url).state == "unknown" and fa.push(link)
        stats = fa.stats()
        assert (stats.done, stats.in_flight, stats.admitted) == (0, 2, 3)
