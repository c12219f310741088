"""``python -m benchmarks.compare OLD NEW``: the same workloads on two checkouts of crawlstore (for
example ``git worktree add /tmp/old <commit>``), each in its own process, alternating over
several rounds; the best round of each, and the ratio new / old (above 1: new is slower).

Workloads, all on a store in "group" mode (no fsync: what is measured is the library):

- the crawl loop: pop a page, then one transaction that reports it ``Done`` and pushes its 10
  links through ``dedup_with(store.seen())``, half of them seen already, over 200 hosts;
- ``push_many`` of 1000 seeds a call through dedup;
- ``pop_many`` + ``report_many`` of 1000 a transaction;
- ``pop`` + ``report`` one call each, 1000 pairs a transaction.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

_WORKLOADS = r"""
import tempfile, time
from crawlstore import Done, Seed, Store

def seed_of(ready):
    return getattr(ready, "seed", ready)  # pop_many hands out Ready items, or seeds before

links = [Seed.get(f"https://h{(i * 7) % 200}.example/p/{i // 2}") for i in range(10000)]
seeds = [Seed.get(f"https://www.site{i % 50}.example/path/item-{i}") for i in range(5000)]
out = {}
with Store.open(tempfile.mkdtemp() + "/loop.lmdb", durability="group") as st:
    f = st.frontier("fifo").dedup_with(st.seen())
    f.push_many([Seed.get(f"https://h{i}.example/") for i in range(1000)])
    t = time.process_time()
    for p in range(1000):
        ready = f.pop()
        with st.transaction():
            f.report(Done(ready.seed))
            f.push_many(links[p * 10 : p * 10 + 10])
    out["crawl loop, a transaction a page (µs a page)"] = (time.process_time() - t) / 1000
with Store.open(tempfile.mkdtemp() + "/batch.lmdb", durability="group") as st:
    f = st.frontier("fifo").dedup_with(st.seen())
    t = time.process_time()
    for i in range(0, 5000, 1000):
        f.push_many(seeds[i : i + 1000])
    out["push_many via dedup, 1000 a call (µs a seed)"] = (time.process_time() - t) / 5000
    t = time.process_time()
    for _ in range(5):
        with st.transaction():
            got = f.pop_many(1000)
            f.report_many([Done(seed_of(r)) for r in got])
    out["pop_many + report_many, 1000 a txn (µs a seed)"] = (time.process_time() - t) / 5000
with Store.open(tempfile.mkdtemp() + "/each.lmdb", durability="group") as st:
    f = st.frontier("fifo")
    f.push_many(seeds)
    t = time.process_time()
    for _ in range(5):
        with st.transaction():
            for _ in range(1000):
                ready = f.pop()
                f.report(Done(ready.seed))
    out["pop + report a call each, 1000 a txn (µs a seed)"] = (time.process_time() - t) / 5000
for name, seconds in out.items():
    print(f"{name}\t{seconds * 1e6:.2f}")
"""


def _run(checkout: str, script: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout)}
    done = subprocess.run([sys.executable, script], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: {done.stderr.strip()[-2000:]}")
    rows = (line.rpartition("\t") for line in done.stdout.splitlines())
    return {name: float(value) for name, _, value in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="a checkout of crawlstore (the directory holding crawlstore/)")
    parser.add_argument("new", help="another checkout")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, dict[str, list[float]]] = {
        "old": defaultdict(list),
        "new": defaultdict(list),
    }
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(_WORKLOADS)
    try:
        for round_ in range(args.rounds):
            for side in ("old", "new"):
                start = time.monotonic()
                for name, value in _run(getattr(args, side), f.name).items():
                    results[side][name].append(value)
                print(f"round {round_ + 1}, {side}: {time.monotonic() - start:.0f} s",
                      file=sys.stderr)  # fmt: skip
    finally:
        os.unlink(f.name)
    print("| workload | old µs | new µs | new / old |\n|---|---:|---:|---:|")
    for name, values in results["old"].items():
        old, new = min(values), min(results["new"][name])
        print(f"| {name} | {old:.1f} | {new:.1f} | {new / old:.2f}x |")


if __name__ == "__main__":
    main()
