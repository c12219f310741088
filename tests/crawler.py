"""A small crawl loop over a generated site, used by the crash and multi-process tests.

It acknowledges each commit to the parent on a pipe only after the commit returned, so the
parent knows what the store promised to keep.
"""

from __future__ import annotations

import os
import random

from crawlstore import (
    Cancelled,
    Done,
    Ready,
    Retry,
    RetryPolicy,
    Seed,
    Store,
    Validator,
    Worker,
)

SITE_PAGES = 300


def page_url(n: int) -> str:
    return f"https://site.test/p/{n}"


def links_of(url: str) -> list[str]:
    n = int(url.rsplit("/", 1)[1])
    return [page_url(m) for m in (2 * n + 1, 2 * n + 2, n // 2, (n * 7) % SITE_PAGES)
            if m < SITE_PAGES]  # fmt: skip


def crawl(path: str, crawl_name: str, ack_fd: int, rng_seed: int) -> None:
    """Crawl until the site is done, writing one line to ``ack_fd`` after every commit."""
    rng = random.Random(rng_seed)

    def ack(line: str) -> None:
        os.write(ack_fd, (line + "\n").encode())

    store = Store.open(path)  # default durability
    frontier = (
        store.frontier("fifo", crawl=crawl_name)
        .dedup_with(store.seen(crawl=crawl_name))
        .retry_with(RetryPolicy(2, base_delay=0, jitter=0))
    )
    validators = store.validators(crawl=crawl_name)
    if frontier.push(Seed.get(page_url(0))):
        ack(f"P {page_url(0)}")
    while isinstance(popped := frontier.pop(), Ready):
        seed = popped.seed
        ack(f"L {seed.url}")
        roll = rng.random()
        if roll < 0.1:
            frontier.report(Retry(seed))
            ack(f"R {seed.url}")
        elif roll < 0.15:
            frontier.report(Cancelled(seed))
            ack(f"C {seed.url}")
        else:
            with store.transaction():
                frontier.report(Done(seed))
                validators.put(seed.fingerprint, Validator(etag=f'"{seed.url}"'))
                admitted = [u for u in links_of(seed.url)
                            if frontier.push(Seed.get(u).with_depth(seed.depth + 1))]  # fmt: skip
            ack(" ".join(["D", seed.url, *admitted]))
    ack(f"LAST {popped!r} {frontier.stats()!r}")  # why the loop ended, for a failure message
    store.close()
    ack("END")


def crawl_grouped(path: str, crawl_name: str, ack_fd: int, rng_seed: int) -> None:
    """``crawl`` through a group-commit worker with four threads: a page's report, validator
    and links are one unit, acknowledged once its group is committed."""
    import threading

    def ack(line: str) -> None:
        os.write(ack_fd, (line + "\n").encode())

    store = Store.open(path)  # default durability
    frontier = store.frontier("fifo", crawl=crawl_name, reap_interval=0.05).dedup_with(
        store.seen(crawl=crawl_name)
    )
    if frontier.push(Seed.get(page_url(0))):
        ack(f"P {page_url(0)}")

    def run(worker: Worker) -> None:
        for ready in worker:
            seed = ready.seed
            found = [Seed.get(u).with_depth(seed.depth + 1) for u in links_of(seed.url)]
            admissions = worker.finish(
                Done(seed), found, validator=Validator(etag=f'"{seed.url}"')
            ).result()
            admitted = [s.url for s, a in zip(found, admissions, strict=True) if a]
            ack(" ".join(["D", seed.url, *admitted]))

    validators = store.validators(crawl=crawl_name)
    with frontier.worker(prefetch=8, poll=0.05, validators=validators) as worker:
        threads = [threading.Thread(target=run, args=(worker,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    ack(f"LAST {frontier.stats()!r}")
    store.close()
    ack("END")
