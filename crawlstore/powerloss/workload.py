"""The workload the power-loss tests record: a crawl (pop a page, report it ``Done``, which
schedules its revisit, keep its validators, push its links through ``dedup_with(store.seen())``),
a page a transaction or through the group-commit worker.
After each transaction returns it appends one line to ``acks`` in the same directory, through
the recorder, so that the record says which units were acknowledged before each write:

    {"unit": n, "done": url, "pushed": [url, ...], "etag": str}

The first line (``"unit": "open"``) says the store exists: a crash before it may leave a file
that was never a store.

    python -m crawlstore.powerloss.workload DIRECTORY DURABILITY PAGES [loop|worker]
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import Done, Ready, Seed, Store, Validator
from ..revisit import RevisitTags, revisit

STORE = "s.lmdb"


class Tag(RevisitTags):
    """Every page is visited again an hour after its visit: a ``Done`` schedules it."""

    PAGE = revisit("1h")


def seed(url: str) -> Seed:
    return Seed.get(url).with_tag(Tag.PAGE)


ACKS = "acks"
HOSTS = 7


def links(n: int) -> list[str]:
    """The links of page ``n``: three new pages, one seen before."""
    return [f"https://h{(3 * n + i) % HOSTS}.example/p/{3 * n + i + 1}" for i in range(3)] + [
        f"https://h{n % HOSTS}.example/p/{n // 2}"
    ]


def run(directory: Path, durability: str, pages: int, kind: str = "loop") -> None:
    """The crawl: ``kind`` ``"loop"`` (a page a transaction) or ``"worker"`` (four threads
    through ``frontier.worker()``, each page a unit of its group commits; its acknowledgement
    once the unit's future resolved, that is once it is durable)."""
    with (
        (directory / ACKS).open("ab", buffering=0) as acks,
        Store.open(directory / STORE, durability=durability, map_size=1 << 22) as store,
    ):
        frontier = store.frontier("fifo", queues="host").revisit(Tag).dedup_with(store.seen())
        validators = store.validators()
        lock = threading.Lock()

        def ack(**unit: object) -> None:
            with lock:
                acks.write(json.dumps(unit).encode() + b"\n")

        ack(unit="open", done=None, pushed=[], etag=None)  # the store exists from here on
        first = ["https://h0.example/p/0"]
        frontier.push_many([seed(u) for u in first])
        ack(unit=-1, done=None, pushed=first, etag=None)
        if kind == "worker":
            _through_worker(frontier, validators, pages, ack)
            return
        for n in range(pages):
            with store.transaction():
                ready = frontier.pop()
                if not isinstance(ready, Ready):
                    break
                found = links(n)
                frontier.report(Done(ready.seed))
                validators.put(ready.seed.fingerprint, Validator(etag=f'"{n}"'))
                frontier.push_many([seed(u) for u in found])
            ack(unit=n, done=ready.seed.url, pushed=found, etag=f'"{n}"')


def _through_worker(frontier: Any, validators: Any, pages: int, ack: Callable[..., None]) -> None:
    counter = itertools.count()
    with frontier.worker(prefetch=8, validators=validators) as worker:

        def crawl() -> None:
            for ready in worker:  # revisits keep the crawl going: stop at the count
                n = next(counter)
                if n >= pages:
                    worker.finish(Done(ready.seed), []).result()
                    return
                found = links(n)
                future = worker.finish(Done(ready.seed), [seed(u) for u in found],
                                       validator=Validator(etag=f'"{n}"'))  # fmt: skip
                future.result()
                ack(unit=n, done=ready.seed.url, pushed=found, etag=f'"{n}"')

        threads = [threading.Thread(target=crawl) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
