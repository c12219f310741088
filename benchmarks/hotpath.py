"""``python -m benchmarks.hotpath``: the hot path, as ``python -m benchmarks.compare`` measures
it. One line a workload: its name, a tab, microseconds an operation (the best of three passes,
each on a fresh store with ``durability="nosync"``: no fsync, what is measured is the library).

- the crawl loop: pop a page, then one transaction that reports it ``Done`` and pushes its 10
  links through ``dedup_with(store.seen())``, half of them seen already, over 200 hosts;
- ``push_many`` of 1000 seeds a call through dedup;
- ``pop_many`` + ``report_many`` of 1000 a transaction;
- ``pop`` + ``report`` one call each, 1000 pairs a transaction.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from crawlstore import Done, Seed, Store

LINKS = [Seed.get(f"https://h{(i * 7) % 200}.example/p/{i // 2}") for i in range(10000)]
SEEDS = [Seed.get(f"https://www.site{i % 50}.example/path/item-{i}") for i in range(5000)]


def _seed_of(ready: Any) -> Seed:
    return getattr(ready, "seed", ready)  # type: ignore[no-any-return]  # older: seeds


def best(n: int, setup: Callable[[Store], Any], run: Callable[[Store, Any], None]) -> float:
    """Seconds an operation: the best of three passes, each on a fresh store."""
    times = []
    for _ in range(3):
        tmp = tempfile.mkdtemp(prefix="crawlstore-hotpath-")
        try:
            with Store.open(tmp + "/b.lmdb", durability="nosync") as st:
                f = setup(st)
                start = time.process_time()
                run(st, f)
                times.append(time.process_time() - start)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return min(times) / n


def _loop_setup(st: Store) -> Any:
    f = st.frontier("fifo").dedup_with(st.seen())
    f.push_many([Seed.get(f"https://h{i}.example/") for i in range(1000)])
    return f


def _loop(st: Store, f: Any) -> None:
    for p in range(1000):
        ready = f.pop()
        with st.transaction():
            f.report(Done(ready.seed))
            f.push_many(LINKS[p * 10 : p * 10 + 10])


def _push_many(st: Store, f: Any) -> None:
    for i in range(0, 5000, 1000):
        f.push_many(SEEDS[i : i + 1000])


def _filled(st: Store, *, dedup: bool) -> Any:
    f = st.frontier("fifo")
    if dedup:
        f = f.dedup_with(st.seen())
    f.push_many(SEEDS)
    return f


def _pop_many(st: Store, f: Any) -> None:
    for _ in range(5):
        with st.transaction():
            got = f.pop_many(1000)
            f.report_many([Done(_seed_of(r)) for r in got])


def _each(st: Store, f: Any) -> None:
    for _ in range(5):
        with st.transaction():
            for _ in range(1000):
                ready = f.pop()
                f.report(Done(ready.seed))


def workloads() -> dict[str, float]:
    """Microseconds an operation, by workload."""
    out = {
        "crawl loop, a transaction a page (µs a page)": best(1000, _loop_setup, _loop),
        "push_many via dedup, 1000 a call (µs a seed)": best(
            5000, lambda st: st.frontier("fifo").dedup_with(st.seen()), _push_many
        ),
        "pop_many + report_many, 1000 a txn (µs a seed)": best(
            5000, lambda st: _filled(st, dedup=True), _pop_many
        ),
        "pop + report a call each, 1000 a txn (µs a seed)": best(
            5000, lambda st: _filled(st, dedup=False), _each
        ),
    }
    return {name: seconds * 1e6 for name, seconds in out.items()}


if __name__ == "__main__":
    for name, micros in workloads().items():
        print(f"{name}\t{micros:.2f}")
