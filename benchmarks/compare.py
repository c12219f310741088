"""``python -m benchmarks.compare OLD NEW``: the same workloads on two checkouts of crawlstore (for
example ``git worktree add /tmp/old <commit>``), each in its own process, alternating over
several rounds. Each round pairs an old and a new run taken back to back, so that what the machine
does meanwhile moves both; the table gives each side's median, the median of the rounds' new / old
ratios (above 1: new is slower) and the spread of those ratios (the middle half of the rounds lie
within it). A change is real when the ratio is outside 1 by more than the spread.

Workloads, all on a store with ``durability="nosync"`` (no fsync: what is measured is the
library), each the best of three passes inside its process:

- the crawl loop: pop a page, then one transaction that reports it ``Done`` and pushes its 10
  links through ``dedup_with(store.seen())``, half of them seen already, over 200 hosts;
- ``push_many`` of 1000 seeds a call through dedup;
- ``pop_many`` + ``report_many`` of 1000 a transaction;
- ``pop`` + ``report`` one call each, 1000 pairs a transaction.
"""

from __future__ import annotations

import argparse
import os
import statistics
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

def best(name, n, setup, run):
    times = []
    for _ in range(3):
        with Store.open(tempfile.mkdtemp() + "/b.lmdb", durability="nosync") as st:
            f = setup(st)
            t = time.process_time()
            run(st, f)
            times.append(time.process_time() - t)
    out[name] = min(times) / n

def loop_setup(st):
    f = st.frontier("fifo").dedup_with(st.seen())
    f.push_many([Seed.get(f"https://h{i}.example/") for i in range(1000)])
    return f

def loop(st, f):
    for p in range(1000):
        ready = f.pop()
        with st.transaction():
            f.report(Done(ready.seed))
            f.push_many(links[p * 10 : p * 10 + 10])

def push_many(st, f):
    for i in range(0, 5000, 1000):
        f.push_many(seeds[i : i + 1000])

def pop_many_setup(st):
    f = st.frontier("fifo").dedup_with(st.seen())
    f.push_many(seeds)
    return f

def pop_many(st, f):
    for _ in range(5):
        with st.transaction():
            got = f.pop_many(1000)
            f.report_many([Done(seed_of(r)) for r in got])

def each_setup(st):
    f = st.frontier("fifo")
    f.push_many(seeds)
    return f

def each(st, f):
    for _ in range(5):
        with st.transaction():
            for _ in range(1000):
                ready = f.pop()
                f.report(Done(ready.seed))

best("crawl loop, a transaction a page (µs a page)", 1000, loop_setup, loop)
best("push_many via dedup, 1000 a call (µs a seed)", 5000,
     lambda st: st.frontier("fifo").dedup_with(st.seen()), push_many)
best("pop_many + report_many, 1000 a txn (µs a seed)", 5000, pop_many_setup, pop_many)
best("pop + report a call each, 1000 a txn (µs a seed)", 5000, each_setup, each)
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
    parser.add_argument("--rounds", type=int, default=9)
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
    print(f"{args.rounds} rounds; old: {args.old}, new: {args.new}\n")
    print(
        "| workload | old µs (median) | new µs (median) | new / old (median of rounds) "
        "| spread of the ratio |\n|---|---:|---:|---:|---:|"
    )
    for name, olds in results["old"].items():
        news = results["new"][name]
        ratios = sorted(n / o for o, n in zip(olds, news, strict=True))
        quarter = len(ratios) // 4
        low, high = ratios[quarter], ratios[-1 - quarter]
        print(
            f"| {name} | {statistics.median(olds):.1f} | {statistics.median(news):.1f} | "
            f"{statistics.median(ratios):.3f}x | {low:.3f}x to {high:.3f}x |"
        )


if __name__ == "__main__":
    main()
