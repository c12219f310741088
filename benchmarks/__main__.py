"""``python -m benchmarks [--smoke | --quick | --full] [--only NAME ...] [--out DIR]``: the
benchmark suite. Every comparison runs its contenders in this one process, alternating them within
each round, and reports medians and ratios. Writes results.json, results.md and one PNG
chart of ratios per workload (with matplotlib) to ``--out`` (default docs/benchmarks/).

The older parts (core, durability, recrawl, traps, the store's Issue 3 rows) stay runnable as
``python -m benchmarks.legacy``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

from .suite import ROOT, Plan, Progress, Scratch, Table, charts, markdown, run_checked, stamp
from .suite import write_json as write_results
from .workloads import WORKLOADS, Context


def main(argv: list[str] | None = None, *, prog: str = "python -m benchmarks") -> int:
    """Run the suite with the command line's arguments (``argv``; ``prog`` names the command
    in its help); 1 when a workload failed."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--smoke", action="store_true",
                      help="every workload once at toy sizes: that it runs (its numbers mean "
                      "nothing)")  # fmt: skip
    size.add_argument("--quick", action="store_true", help="the whole suite in about 3 minutes")
    size.add_argument("--full", action="store_true", help="sizes up to 1e7 (up to an hour)")
    parser.add_argument(
        "--only",
        action="append",
        choices=list(WORKLOADS),
        metavar="NAME",
        help=f"run only this workload (repeatable): {', '.join(WORKLOADS)}",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "benchmarks",
        help="where results.json, results.md and the charts go",
    )
    args = parser.parse_args(argv)
    modes = {"smoke": args.smoke, "quick": args.quick, "full": args.full}
    plan = Plan.make(next((mode for mode, on in modes.items() if on), "default"))
    names = args.only or list(WORKLOADS)
    args.out.mkdir(parents=True, exist_ok=True)
    the_stamp = stamp()
    tables: list[Table] = []
    scratch = Scratch()
    ctx = Context()
    started = time.perf_counter()
    failed = []
    try:
        with Progress() as progress:
            for name in WORKLOADS:  # in suite order: the crawl loop measures the crash column
                if name not in names:
                    continue
                run = functools.partial(WORKLOADS[name], plan, scratch, progress, ctx)
                got = run_checked(name, run, progress)
                if got is None:
                    failed.append(name)
                    tables.append(Table(name, f"{name}: failed (see the log)", "op", ""))
                else:
                    tables += got
                write_results(args.out / "results.json", the_stamp, plan, tables)
            the_stamp["seconds"] = round(time.perf_counter() - started, 1)
            write_results(args.out / "results.json", the_stamp, plan, tables)
            (args.out / "results.md").write_text(markdown(the_stamp, plan, tables) + "\n")
            written = charts(args.out, tables, progress)
    finally:
        scratch.close()
    print(
        f"wrote {args.out / 'results.json'}, {args.out / 'results.md'} and {len(written)} "
        f"charts in {time.perf_counter() - started:.0f} s"
    )
    if failed:
        print(f"workloads that failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
