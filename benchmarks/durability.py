"""Throughput of each durability mode: single-operation commits and grouped ones
(``python -m benchmarks.durability``: one line a row, for ``python -m benchmarks.compare``)."""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from crawlstore import Done, Ready, Seed, Store

from .harness import Result, measure


def bench_durability(n_single: int, n_grouped: int) -> list[Result]:
    rng = random.Random(7)
    seeds = [Seed.get(f"https://host{rng.randrange(100)}.example/p/{i}") for i in range(n_grouped)]
    results = []
    for mode in ("full", "safe", "nosync"):
        tmp = Path(tempfile.mkdtemp(prefix="crawlstore-bench-"))
        try:
            with Store.open(tmp / "d.lmdb", durability=mode) as store:
                counter = iter(range(10**9))

                def single(store: Store = store, counter: Iterator[int] = counter) -> None:
                    f = store.frontier("fifo", crawl=f"s{next(counter)}")
                    for s in seeds[:n_single]:
                        f.push(s)
                    while isinstance(r := f.pop(), Ready):
                        f.report(Done(r.seed))

                def grouped(store: Store = store, counter: Iterator[int] = counter) -> None:
                    f = store.frontier("fifo", crawl=f"g{next(counter)}")
                    for i in range(0, n_grouped, 1000):
                        with store.transaction():
                            for s in seeds[i : i + 1000]:
                                f.push(s)
                    while True:
                        with store.transaction():
                            for _ in range(1000):
                                if not isinstance(r := f.pop(), Ready):
                                    break
                                f.report(Done(r.seed))
                            else:
                                continue
                        break

                results.append(measure("durability", f"{mode}: 1 op a commit (push, pop, Done)",
                                       n_single, single, repeat=2))  # fmt: skip
                results.append(measure("durability", f"{mode}: 1000 ops a commit", n_grouped,
                                       grouped, repeat=2))  # fmt: skip
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return results


if __name__ == "__main__":  # one line a row, as ``python -m benchmarks.compare`` reads them
    for row in bench_durability(300, 5_000):
        print(f"durability {row.name} (µs an op)\t{row.us_per_op:.2f}")
