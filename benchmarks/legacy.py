"""``python -m benchmarks.legacy [--quick]``: the older benchmarks (core, durability,
recrawl, traps, store) in one run, printed as a markdown table."""

from __future__ import annotations

import argparse
import platform
import sys

from . import core, durability, recrawl, store, traps
from .harness import table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    parser.add_argument(
        "--only",
        choices=["core", "durability", "recrawl", "traps", "store"],
        action="append",
        help="run only these parts (repeatable); all of them by default",
    )
    store.add_arguments(parser)
    args = parser.parse_args()
    n = 10_000 if args.quick else 100_000
    parts = set(args.only or ["core", "durability", "recrawl", "traps", "store"])
    results = []
    if "core" in parts:
        results += core.bench_fingerprint(n // 2)
        results += core.bench_parser(n // 2)
        results += core.bench_frontier(n)
        results += core.bench_seen(n * 10 if not args.quick else n)
    if "durability" in parts:
        results += durability.bench_durability(500 if args.quick else 2_000, n // 5)
    if "recrawl" in parts:
        results += recrawl.bench_validators(n // 10)
    if "traps" in parts:
        results += traps.bench_traps(100 if args.quick else 1000, 50)
    if "store" in parts:
        results += store.bench(args, n)
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    print(table(results))


if __name__ == "__main__":
    main()
