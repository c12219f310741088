"""crawlstore's contenders: the in-memory frontier, the store a page at a time at two
durabilities, the store "by hand" (64 pages popped, then one transaction), and the place for
the group-commit API's contenders."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from crawlstore import Done, InMemFrontier, Ready, Seed, Store

from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered

#: The durability without an fsync per commit.
NOSYNC = "nosync"
SAFE = "safe"
#: Pages popped at once by the "by hand" contender.
BY_HAND = 64
STORE_FILE = "crawl.lmdb"


def _ready(popped: object) -> Ready:
    if not isinstance(popped, Ready):
        raise RuntimeError(f"crawlstore popped {popped!r}")
    return popped


class InMemory(Contender):
    key = "crawlstore-memory"
    label = 'crawlstore InMemFrontier("fifo", queues="host").dedup()'
    memory = True
    note = "pop, report Done, push_many the links"

    def open(self, path: str) -> None:
        self.frontier = InMemFrontier("fifo", queues="host").dedup()

    def seed(self, urls: Sequence[str]) -> None:
        self.frontier.push_many([Seed.get(u) for u in urls])

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        f = self.frontier
        pop, report, push_many, get = f.pop, f.report, f.push_many, Seed.get
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            seed = _ready(pop()).seed
            popped(seed.url)
            links = [get(u) for u in links_of(i)]
            report(Done(seed))
            push_many(links)
            acked(i, seed.url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        push, get = self.frontier.push, Seed.get
        for u in urls:
            push(get(u))

    def pop_report(self, k: int, batch: int) -> None:
        pop, report = self.frontier.pop, self.frontier.report
        for _ in range(k):
            report(Done(_ready(pop()).seed))

    def close(self) -> None:
        self.frontier = None  # type: ignore[assignment]


class StoreSafe(Contender):
    """A page: pop (its own commit: the lease), then one ``store.transaction()`` that reports
    it ``Done`` and pushes its links through ``dedup_with(store.seen())``."""

    key = "crawlstore-safe"
    durability = SAFE
    label = f'crawlstore Store, durability "{SAFE}", a transaction a page'
    syncs = True
    note = "pop (commit), then report + push_many in one transaction"

    def open(self, path: str) -> None:
        self.store = Store.open(os.path.join(path, STORE_FILE), durability=self.durability)
        self.frontier = self.store.frontier("fifo", queues="host").dedup_with(self.store.seen())

    def seed(self, urls: Sequence[str]) -> None:
        with self.store.transaction():
            self.frontier.push_many([Seed.get(u) for u in urls])

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        f, transaction = self.frontier, self.store.transaction
        pop, report, push_many, get = f.pop, f.report, f.push_many, Seed.get
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            seed = _ready(pop()).seed
            popped(seed.url)
            links = [get(u) for u in links_of(i)]
            with transaction():
                report(Done(seed))
                push_many(links)
            acked(i, seed.url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        f, get = self.frontier, Seed.get
        if batch == 1:
            for u in urls:
                f.push(get(u))
            return
        for i in range(0, len(urls), batch):
            seeds = [get(u) for u in urls[i : i + batch]]
            with self.store.transaction():
                f.push_many(seeds)

    def pop_report(self, k: int, batch: int) -> None:
        f = self.frontier
        if batch == 1:
            for _ in range(k):
                f.report(Done(_ready(f.pop()).seed))
            return
        done = 0
        while done < k:
            want = min(batch, k - done)
            with self.store.transaction():
                got = 0
                while got < want:  # host queues: one seed of each host at a time
                    readies = f.pop_many(want - got)
                    if not readies:
                        raise RuntimeError("crawlstore: nothing to pop")
                    f.report_many([Done(r.seed) for r in readies])
                    got += len(readies)
            done += got

    def close(self) -> None:
        self.store.close()

    def recover(self, path: str) -> Recovered:
        store = Store.open(os.path.join(path, STORE_FILE), durability=self.durability)
        frontier = store.frontier()
        frontier.reap()  # leases of the dead process go back to their queues
        queued: set[str] = set()
        after = None
        while True:
            batch = frontier.urls(state="queued", after=after, limit=1000)
            if not batch:
                break
            queued.update(s.url for s in batch)
            after = batch[-1].fingerprint
        seen = store.seen()

        def known(url: str) -> bool:
            return Seed.get(url).fingerprint in seen or frontier.url(url).state != "unknown"

        return Recovered(queued, known)


class StoreNosync(StoreSafe):
    key = "crawlstore-nosync"
    durability = NOSYNC
    label = f'crawlstore Store, durability "{NOSYNC}", a transaction a page'
    syncs = False


class StoreByHand(StoreSafe):
    """``pop_many(64)`` (a commit), then one transaction for the 64 reports and their links."""

    key = "crawlstore-by-hand"
    label = f'crawlstore Store "{SAFE}", by hand: pop_many({BY_HAND}), one transaction'
    syncs = False  # two commits per 64 pages
    loop_only = True
    note = f"pop_many({BY_HAND}) (commit), then {BY_HAND} reports + links in one transaction"

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        f, transaction = self.frontier, self.store.transaction
        pop_many, report_many, push_many, get = f.pop_many, f.report_many, f.push_many, Seed.get
        popped, acked = probe.popped, probe.acked
        i = 0
        while i < pages:
            readies = pop_many(min(BY_HAND, pages - i))
            if not readies:
                raise RuntimeError("crawlstore: nothing to pop")
            for r in readies:
                popped(r.seed.url)
            links = [get(u) for j in range(len(readies)) for u in links_of(i + j)]
            with transaction():
                report_many([Done(r.seed) for r in readies])
                push_many(links)
            for j, r in enumerate(readies):
                acked(i + j, r.seed.url)
            i += len(readies)


#: Pages in flight in the group-commit contenders (asyncio tasks, or threads).
IN_FLIGHT = 64


class WorkerAsync(StoreSafe):
    """The group-commit API from asyncio: 64 tasks share ``frontier.async_worker()``; each
    awaits a seed, builds its links, and awaits ``finish`` (its commit)."""

    key = "crawlstore-worker-async"
    loop_only = True
    trial_pages = 16 * IN_FLIGHT
    label = f'crawlstore Store "{SAFE}", async_worker(), {IN_FLIGHT} pages in flight'
    syncs = True  # an fsync a group
    note = f"{IN_FLIGHT} asyncio tasks; a group commit, one fsync, for the pages waiting"

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        import asyncio

        numbers = iter(range(pages))
        get, popped, acked = Seed.get, probe.popped, probe.acked

        async def task(worker: Any) -> None:
            for i in numbers:
                ready = await worker.next()
                if ready is None:
                    raise RuntimeError("crawlstore: nothing to pop")
                popped(ready.seed.url, i)
                await worker.finish(Done(ready.seed), [get(u) for u in links_of(i)])
                acked(i, ready.seed.url)

        async def main() -> None:
            async with self.frontier.async_worker(prefetch=IN_FLIGHT) as worker:
                await asyncio.gather(*(task(worker) for _ in range(IN_FLIGHT)))

        asyncio.run(main())


class WorkerThreads(StoreSafe):
    """The group-commit API from threads: 64 threads share ``frontier.worker()``."""

    key = "crawlstore-worker-threads"
    loop_only = True
    trial_pages = 16 * IN_FLIGHT
    label = f'crawlstore Store "{SAFE}", worker(), {IN_FLIGHT} threads'
    syncs = True
    note = f"{IN_FLIGHT} threads; a group commit, one fsync, for the pages waiting"

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        import threading

        numbers = iter(range(pages))
        lock = threading.Lock()
        get, popped, acked = Seed.get, probe.popped, probe.acked
        errors: list[BaseException] = []

        def run(worker: Any) -> None:
            try:
                while True:
                    with lock:
                        i = next(numbers, None)
                    if i is None:
                        return
                    ready = worker.next()
                    if ready is None:
                        raise RuntimeError("crawlstore: nothing to pop")
                    popped(ready.seed.url, i)
                    worker.finish(Done(ready.seed), [get(u) for u in links_of(i)]).result()
                    acked(i, ready.seed.url)
            except BaseException as exc:
                errors.append(exc)

        with self.frontier.worker(prefetch=IN_FLIGHT) as worker:
            threads = [threading.Thread(target=run, args=(worker,)) for _ in range(IN_FLIGHT)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        if errors:
            raise errors[0]


GROUP_COMMIT_CONTENDERS: list[type[Contender]] = [WorkerAsync, WorkerThreads]
