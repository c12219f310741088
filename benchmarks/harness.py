"""A tiny timing harness: best of N runs, per-operation microseconds, ratios against a baseline."""

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


def measure(group: str, name: str, ops: int, run: Callable[[], object], *, repeat: int = 3,
            setup: Callable[[], object] | None = None, note: str = "") -> Result:  # fmt: skip
    """Best of ``repeat`` runs of ``run`` (``setup`` runs untimed before each)."""
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
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
