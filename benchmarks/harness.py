"""The benchmarks' timing harness: one timed run (``timed``), the best of N (``measure``),
per-operation microseconds, a markdown table with ratios against a baseline (``table``), and
sizes as the tables name them (``label``). ``python -m benchmarks`` takes medians of
``timed`` runs over alternating rounds (``suite.alternate``); the older benchmarks, the best of
``measure``."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Result:
    group: str
    name: str
    ops: int
    seconds: float
    note: str = ""

    @property
    def us_per_op(self) -> float:
        return self.seconds / self.ops * 1e6


def timed(run: Callable[[], object]) -> float:
    """Seconds ``run`` takes, after a full collection."""
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def label(n: int) -> str:
    """``1e5`` for a power of ten, else the number with separators."""
    exp = len(str(n)) - 1
    return f"1e{exp}" if n == 10**exp else f"{n:,}"


def measure(group: str, name: str, ops: int, run: Callable[[], object], *, repeat: int = 3,
            setup: Callable[[], object] | None = None, note: str = "") -> Result:  # fmt: skip
    """Best of ``repeat`` runs of ``run`` (``setup`` runs untimed before each)."""
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        best = min(best, timed(run))
    return Result(group, name, ops, best, note)


def table(results: list[Result]) -> str:
    """A markdown table; the first row of each group is the baseline of its ratios."""
    lines = ["| group | what | ops | µs/op | ops/s | ratio to first of group | note |",
             "|---|---|---:|---:|---:|---:|---|"]  # fmt: skip
    base: dict[str, float] = {}
    for r in results:
        base.setdefault(r.group, r.us_per_op)
        ratio = base[r.group] / r.us_per_op
        lines.append(
            f"| {r.group} | {r.name} | {r.ops:,} | {r.us_per_op:.2f} | "
            f"{1e6 / r.us_per_op:,.0f} | {ratio:.2f}x | {r.note} |"
        )
    return "\n".join(lines)
