"""``python -m benchmarks.compare OLD NEW``: the same workloads on two checkouts of crawlstore (for
example ``git worktree add /tmp/old <commit>``), each in its own process, alternating over
several rounds. Both sides run NEW's benchmark code (``benchmarks.hotpath``, and with
``--suite durability`` ``benchmarks.durability``) over their own ``crawlstore``, so that an older
checkout is measured by the same workloads. Each round pairs an old and a new run taken back to
back, so that what the machine does meanwhile moves both; the table gives each side's median,
the median of the rounds' new / old ratios (above 1: new is slower) and the spread of those
ratios (the middle half of the rounds lie within it), and the ratio of each side's best round
(what a busy machine cannot make faster: the steadiest figure where other work shares the
machine). A change is real when the ratio is outside 1 by more than the spread.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict


def _side(checkout: str, benchmarks: str) -> str:
    """A directory whose ``crawlstore`` is ``checkout``'s and whose ``benchmarks`` is
    ``benchmarks``'s: what a side's processes import."""
    root = tempfile.mkdtemp(prefix="crawlstore-compare-")
    os.symlink(
        os.path.abspath(os.path.join(checkout, "crawlstore")), os.path.join(root, "crawlstore")
    )
    os.symlink(
        os.path.abspath(os.path.join(benchmarks, "benchmarks")), os.path.join(root, "benchmarks")
    )
    return root


def _run(root: str, suite: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-m", f"benchmarks.{suite}"], env=env, cwd=root,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{root}: {done.stderr.strip()[-2000:]}")
    rows = (line.rpartition("\t") for line in done.stdout.splitlines())
    return {name: float(value) for name, _, value in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="a checkout of crawlstore (the directory holding crawlstore/)")
    parser.add_argument("new", help="another checkout")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--suite", action="append", choices=["hotpath", "durability"],
                        help="what to run (repeatable; default: hotpath)")  # fmt: skip
    args = parser.parse_args()
    args.suite = args.suite or ["hotpath"]
    results: dict[str, dict[str, list[float]]] = {
        "old": defaultdict(list),
        "new": defaultdict(list),
    }
    roots = {side: _side(getattr(args, side), args.new) for side in ("old", "new")}
    try:
        for round_ in range(args.rounds):
            for side in ("old", "new"):
                start = time.monotonic()
                for suite in args.suite:
                    for name, value in _run(roots[side], suite).items():
                        results[side][name].append(value)
                print(f"round {round_ + 1}, {side}: {time.monotonic() - start:.0f} s",
                      file=sys.stderr)  # fmt: skip
    finally:
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    print(f"{args.rounds} rounds; old: {args.old}, new: {args.new}\n")
    print(
        "| workload | old µs (median) | new µs (median) | new / old (median of rounds) "
        "| spread of the ratio | best new / best old |\n|---|---:|---:|---:|---:|---:|"
    )
    for name, olds in results["old"].items():
        news = results["new"][name]
        ratios = sorted(n / o for o, n in zip(olds, news, strict=True))
        quarter = len(ratios) // 4
        low, high = ratios[quarter], ratios[-1 - quarter]
        print(
            f"| {name} | {statistics.median(olds):.1f} | {statistics.median(news):.1f} | "
            f"{statistics.median(ratios):.3f}x | {low:.3f}x to {high:.3f}x | "
            f"{min(news) / min(olds):.3f}x |"
        )


if __name__ == "__main__":
    main()
