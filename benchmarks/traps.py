"""Issue 5's figures: what one tracked prefix costs in memory, and a push through avoid_traps."""

from __future__ import annotations

import shutil
import tempfile
import tracemalloc
from pathlib import Path

from crawlstore import InMemFrontier, Seed, Store

from .harness import Result, measure


def bench_traps(prefixes: int, per_prefix: int) -> list[Result]:
    seeds = [Seed.get(f"https://site{p}.example/section/dir{i % 10}/page{i}")
             for p in range(prefixes) for i in range(per_prefix)]  # fmt: skip
    n = len(seeds)

    # A filter inside refuses every seed, so nothing is queued: what remains is trap state.
    traps = InMemFrontier.fifo().filter(lambda seed: False).avoid_traps()
    state = traps.core.state("traps")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for seed in seeds:
        traps.push(seed)
    tracked = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    note = (
        f"{prefixes} prefixes, {per_prefix} URLs in 10 directories each: "
        f"{tracked / prefixes / 1024:.1f} KiB of state a prefix ({len(state)} entries)"
    )
    results = [
        measure(
            "traps: push",
            "InMemFrontier.fifo() push",
            n,
            lambda: [InMemFrontier.fifo().push(s) for s in seeds][:0],
            repeat=2,
        ),
        measure(
            "traps: push",
            "InMemFrontier.fifo().avoid_traps() push",
            n,
            lambda: [InMemFrontier.fifo().avoid_traps().push(s) for s in seeds][:0],
            repeat=2,
            note=note,
        ),
    ]
    tmp = Path(tempfile.mkdtemp(prefix="crawlstore-bench-"))
    try:
        with Store.open(tmp / "t.lmdb", durability="nosync") as store:
            counter = iter(range(10**6))

            def on_store(avoid: bool) -> None:
                f = store.frontier("fifo", crawl=f"c{next(counter)}")
                chain = f.avoid_traps() if avoid else f
                for i in range(0, n, 1000):
                    chain.push_many(seeds[i : i + 1000])

            results.append(measure("traps: push on the store, 1000 a commit", "store frontier",
                                   n, lambda: on_store(False), repeat=2))  # fmt: skip
            results.append(measure("traps: push on the store, 1000 a commit",
                                   "store frontier .avoid_traps()", n, lambda: on_store(True),
                                   repeat=2))  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results
