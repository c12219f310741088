"""The workload the power-loss tests record: a crawl loop, a page a transaction (pop a page,
report it ``Done``, keep its validators, push its links through ``dedup_with(store.seen())``).
After each transaction returns it appends one line to ``acks`` in the same directory, through
the recorder, so that the record says which units were acknowledged before each write:

    {"unit": n, "done": url, "pushed": [url, ...], "etag": str}

The first line (``"unit": "open"``) says the store exists: a crash before it may leave a file
that was never a store.

    python -m crawlstore.powerloss.workload DIRECTORY DURABILITY PAGES
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .. import Done, Ready, Seed, Store, Validator

STORE = "s.lmdb"
ACKS = "acks"
HOSTS = 7


def links(n: int) -> list[str]:
    """The links of page ``n``: three new pages, one seen before."""
    return [f"https://h{(3 * n + i) % HOSTS}.example/p/{3 * n + i + 1}" for i in range(3)] + [
        f"https://h{n % HOSTS}.example/p/{n // 2}"
    ]


def run(directory: Path, durability: str, pages: int) -> None:
    with (
        (directory / ACKS).open("ab", buffering=0) as acks,
        Store.open(directory / STORE, durability=durability, map_size=1 << 22) as store,
    ):
        frontier = store.frontier("fifo", queues="host").dedup_with(store.seen())
        validators = store.validators()

        def ack(**unit: object) -> None:
            acks.write(json.dumps(unit).encode() + b"\n")

        ack(unit="open", done=None, pushed=[], etag=None)  # the store exists from here on
        first = ["https://h0.example/p/0"]
        frontier.push_many([Seed.get(u) for u in first])
        ack(unit=-1, done=None, pushed=first, etag=None)
        for n in range(pages):
            with store.transaction():
                ready = frontier.pop()
                if not isinstance(ready, Ready):
                    break
                found = links(n)
                frontier.report(Done(ready.seed))
                validators.put(ready.seed.fingerprint, Validator(etag=f'"{n}"'))
                frontier.push_many([Seed.get(u) for u in found])
            ack(unit=n, done=ready.seed.url, pushed=found, etag=f'"{n}"')


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
