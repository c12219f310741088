"""Issue 2's benchmarks: canonicalise + fingerprint, InMemFrontier push/pop, BloomSeen vs set."""

from __future__ import annotations

import hashlib
import heapq
import random
import tracemalloc
from collections import deque

import mmh3

from crawlstore import BloomSeen, Done, Fingerprint, InMemFrontier, Ready, Seed, fingerprint

from .harness import Result, measure


def make_urls(n: int, rng: random.Random) -> list[str]:
    hosts = [f"www.site{i}.example" for i in range(50)]
    out = []
    for i in range(n):
        params = [f"id={i}", "page=2", "sort=asc", "utm_source=feed", "q=red+lamp", "ref=home"]
        query = "&".join(rng.sample(params, rng.randrange(0, 4)))
        out.append(f"https://{rng.choice(hosts)}/path/to/item-{i}" + (f"?{query}" if query else ""))
    return out


def bench_fingerprint(n: int) -> list[Result]:
    urls = make_urls(n, random.Random(1))
    results = []
    try:
        from w3lib.url import canonicalize_url

        def scrapy_like() -> None:
            for u in urls:
                h = hashlib.sha1()
                h.update(b"GET")
                h.update(canonicalize_url(u).encode())
                h.update(b"")
                h.digest()

        results.append(measure("fingerprint", "w3lib canonicalize_url + SHA-1 (Scrapy)", n,
                               scrapy_like, note="keeps utm_*, keeps :443"))  # fmt: skip
    except ImportError:
        pass
    results.append(measure("fingerprint", "crawlstore fingerprint()", n,
                           lambda: [fingerprint("GET", u) for u in urls]))  # fmt: skip
    results.append(measure("fingerprint", "crawlstore Seed.get() (validates + fingerprints)", n,
                           lambda: [Seed.get(u) for u in urls]))  # fmt: skip
    return results


def bench_parser(n: int) -> list[Result]:
    import can_ada

    urls = make_urls(n, random.Random(2))
    results = []
    try:
        import ada_url

        results.append(measure("url parser", "ada-url URL(u).href (CFFI)", n,
                               lambda: [ada_url.URL(u).href for u in urls]))  # fmt: skip
    except ImportError:
        pass
    results.append(measure("url parser", "can_ada parse(u).href (pybind11)", n,
                           lambda: [can_ada.parse(u).href for u in urls]))  # fmt: skip
    return results


def bench_frontier(n: int) -> list[Result]:
    seeds = [Seed.get(u) for u in make_urls(n, random.Random(3))]
    rng = random.Random(4)
    prio = [s.with_priority(rng.randrange(-100, 100)) for s in seeds]
    results = []

    def deque_cycle() -> None:
        q: deque[Seed] = deque()
        for s in seeds:
            q.append(s)
        while q:
            q.popleft()

    def heap_cycle() -> None:
        h: list[tuple[int, int, Seed]] = []
        for i, s in enumerate(prio):
            heapq.heappush(h, (-s.priority, i, s))
        while h:
            heapq.heappop(h)

    def frontier_cycle(order: str, batch: list[Seed], dedup: bool = False) -> None:
        f = InMemFrontier(order)
        chain = f.dedup() if dedup else f
        for s in batch:
            chain.push(s)
        while isinstance(r := chain.pop(), Ready):
            chain.report(Done(r.seed))

    results.append(measure("frontier push+pop", "collections.deque (no leases, no stats)", n,
                           deque_cycle))  # fmt: skip
    results.append(measure("frontier push+pop", "InMemFrontier.fifo push+pop+Done", n,
                           lambda: frontier_cycle("fifo", seeds)))  # fmt: skip
    results.append(measure("frontier push+pop", "InMemFrontier.fifo().dedup()", n,
                           lambda: frontier_cycle("fifo", seeds, True)))  # fmt: skip
    results.append(measure("priority push+pop", "heapq (no leases, no stats)", n, heap_cycle))
    results.append(measure("priority push+pop", "InMemFrontier.priority push+pop+Done", n,
                           lambda: frontier_cycle("priority", prio)))  # fmt: skip
    return results


def _fps(n: int, salt: bytes) -> list[Fingerprint]:
    return [Fingerprint(mmh3.mmh3_x64_128_digest(salt + i.to_bytes(8, "big"))) for i in range(n)]


def bench_seen(n: int) -> list[Result]:
    fps = _fps(n, b"in")
    results = []

    def set_insert() -> None:
        seen: set[bytes] = set()
        for fp in fps:
            if fp not in seen:
                seen.add(fp)

    def bloom_insert() -> None:
        bloom = BloomSeen(n, 0.01)
        for fp in fps:
            bloom.insert(fp)

    tracemalloc.start()
    as_set = {bytes(fp) for fp in fps}  # the table and the 16-byte objects
    set_bytes = tracemalloc.get_traced_memory()[0] / n
    tracemalloc.stop()
    del as_set
    bloom = BloomSeen(n, 0.01)
    for fp in fps:
        bloom.insert(fp)
    absent = _fps(100_000, b"out")
    rate = sum(fp in bloom for fp in absent) / len(absent)
    results.append(measure("seen set", "Python set of fingerprints: check+add", n, set_insert,
                           note=f"{set_bytes:.1f} B/URL, exact"))  # fmt: skip
    note = f"{bloom.nbytes / n:.2f} B/URL, measured fp {rate:.2%}"
    results.append(measure("seen set", "BloomSeen(n, 1%): insert", n, bloom_insert, note=note))
    return results
