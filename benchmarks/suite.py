"""The suite's machinery: plans, rounds that alternate contenders, results, progress, the
environment stamp and the output files (results.json, results.md, charts)."""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
_T = TypeVar("_T")


@dataclass(frozen=True)
class Plan:
    """Sizes and repetitions of one mode (``--smoke``, ``--quick``, default, ``--full``)."""

    mode: str
    rounds: int
    heavy_rounds: int  # rounds of the workloads that fill big files (seen, open, scaling)
    run_seconds: float  # what one timed crawl run should last (pages are calibrated to it)
    min_pages: int
    max_pages: int
    ops: int  # push / pop ops a run, grouped rows and contenders without an fsync a commit
    sync_ops: int  # push / pop ops a run, a commit each with an fsync
    seen_sizes: tuple[int, ...]
    open_sizes: tuple[int, ...]
    scale_sizes: tuple[int, ...]
    scale_pages: int
    scale_sync_pages: int
    validator_pages: int
    validator_sync_pages: int
    kill_after: tuple[int, int]
    budget: float  # seconds a contender may take at one size of seen/open/scaling
    scrapy_pages: int  # pages of the demo site of the real Scrapy crawls
    scrapy_rounds: int  # rounds of the real Scrapy crawls (a process each)

    @classmethod
    def make(cls, mode: str) -> Plan:
        if mode == "smoke":  # every workload once at toy sizes: the suite runs; no numbers
            return cls(mode, 1, 1, 0.01, 10, 3_000, 100, 20, (10_000,), (10_000,),
                       (1_000, 10_000), 100, 20, 100, 20, (10, 30), 30.0, 30, 1)  # fmt: skip
        if mode == "quick":
            return cls(mode, 3, 2, 0.15, 30, 3_000, 1_000, 100, (100_000,), (100_000,),
                       (10_000, 100_000), 300, 60, 1_000, 100, (40, 100), 60.0, 60, 1)  # fmt: skip
        if mode == "full":
            return cls(mode, 5, 3, 6.0, 200, 200_000, 50_000, 3_000, (1_000_000, 10_000_000),
                       (100_000, 1_000_000, 10_000_000), (100_000, 1_000_000, 10_000_000),
                       5_000, 500, 50_000, 3_000, (200, 400), 600.0, 2_000, 5)  # fmt: skip
        return cls(mode, 5, 3, 1.5, 100, 50_000, 10_000, 500, (1_000_000,),
                   (100_000, 1_000_000), (100_000, 1_000_000), 3_000, 300, 20_000, 1_000,
                   (200, 400), 240.0, 500, 3)  # fmt: skip


# -- results -------------------------------------------------------------------------------------


@dataclass
class Row:
    key: str
    label: str
    ops: int = 0  # operations (pages, URLs, opens) per run
    times: list[float] = field(default_factory=list)  # seconds per run, one per round
    baseline: str | None = None  # key of the row this one is compared to (None: the table's)
    crash: str = ""
    note: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    skipped: str = ""  # why the row has no measurement

    @property
    def per_op(self) -> float | None:
        if self.skipped or not self.times or not self.ops:
            return None
        return statistics.median(self.times) / self.ops


@dataclass
class Table:
    workload: str
    title: str
    unit: str  # "page", "URL", "op", "open", "seed"
    baseline: str  # key of the baseline row
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # extra columns, in order
    timed: bool = True  # False: counts only, in the extra columns (no times, no ratios)

    def row(self, key: str) -> Row | None:
        return next((r for r in self.rows if r.key == key), None)

    def ratio(self, row: Row) -> float | None:
        base = self.row(row.baseline or self.baseline)
        if base is None or base.per_op is None or row.per_op is None:
            return None
        return base.per_op / row.per_op


# -- running -------------------------------------------------------------------------------------


class Scratch:
    """Fresh directories on the normal disk (``BENCH_TMP`` or the system's temp dir)."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="crawlstore-bench-", dir=os.environ.get("BENCH_TMP"))

    def fresh(self) -> str:
        return tempfile.mkdtemp(dir=self.root)

    def path(self, name: str) -> str:
        """A file's path, ``name`` in a fresh directory of its own (``drop`` removes both)."""
        return os.path.join(self.fresh(), name)

    @staticmethod
    def drop(path: str) -> None:
        """Remove the file at ``path`` and its directory (one of ``path``'s)."""
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    @contextlib.contextmanager
    def dir(self) -> Iterator[str]:
        path = self.fresh()
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def alternate(
    rows: Sequence[Row], rounds: int, run: Callable[[Row, int], float], progress: Progress
) -> None:
    """``rounds`` rounds; within each, every row's run once, the order rotated each round.
    A row whose run raises is marked skipped with the error, the others go on."""
    live = [r for r in rows if not r.skipped]
    for i in range(rounds):
        k = i % len(live) if live else 0
        for row in live[k:] + live[:k]:
            if row.skipped:
                continue
            try:
                row.times.append(run(row, i))
            except Exception as exc:
                row.skipped = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
                row.times.clear()
            progress.advance()


# -- progress ------------------------------------------------------------------------------------


class Progress:
    """rich.progress when rich is installed, plain lines otherwise."""

    def __init__(self) -> None:
        self._rich: Any = None
        self._task: Any = None
        self._total = self._done = 0
        self._name = ""
        if not sys.stdout.isatty():  # a log file: rich would draw nothing until the end
            return
        try:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress
        except ImportError:
            print("rich is not installed: plain progress lines", file=sys.stderr)
            return
        self._rich = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            transient=False,
        )

    def __enter__(self) -> Progress:
        if self._rich is not None:
            self._rich.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.__exit__(*exc)

    def start(self, name: str, total: int) -> None:
        self._name, self._total, self._done = name, total, 0
        if self._rich is not None:
            self._task = self._rich.add_task(name, total=total)
        else:
            print(f"[{time.strftime('%H:%M:%S')}] {name}: {total} steps", flush=True)

    def advance(self, what: str = "") -> None:
        self._done += 1
        if self._rich is not None and self._task is not None:
            self._rich.update(self._task, advance=1)
        elif what or self._done == self._total:
            print(f"[{time.strftime('%H:%M:%S')}] {self._name} {self._done}/{self._total} {what}",
                  flush=True)  # fmt: skip

    def note(self, text: str) -> None:
        if self._rich is not None:
            self._rich.console.print(text)
        else:
            print(text, flush=True)


# -- the stamp -----------------------------------------------------------------------------------

PACKAGES = ["crawlstore", "lmdb", "msgpack", "mmh3", "bitarray", "can_ada", "scrapy", "w3lib",
            "ada-url", "persist-queue", "diskcache", "queuelib", "rbloom", "matplotlib",
            "rich", "redis", "hiredis"]  # fmt: skip


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return None


def stamp() -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    import crawlstore

    versions["crawlstore (imported)"] = str(Path(crawlstore.__file__).parent)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": [Path(sys.executable).name, "-m", "benchmarks", *sys.argv[1:]],
        "cores": os.cpu_count(),
        "memory_bytes": _memory(),
        "cpu": _cpu_model(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain")),
    }


# -- output --------------------------------------------------------------------------------------


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def write_json(path: Path, stamp_: dict[str, Any], plan: Plan, tables: list[Table]) -> None:
    data = {
        "stamp": stamp_,
        "plan": asdict(plan),
        "workloads": [
            {
                **{k: v for k, v in asdict(t).items() if k != "rows"},
                "rows": [
                    {**asdict(r), "median_per_op": r.per_op,
                     "ops_per_s": 1 / r.per_op if r.per_op else None, "ratio": t.ratio(r)}
                    for r in t.rows
                ],
            }
            for t in tables
        ],
    }  # fmt: skip
    path.write_text(json.dumps(data, indent=1) + "\n")


def markdown(stamp_: dict[str, Any], plan: Plan, tables: list[Table]) -> str:
    v = stamp_["versions"]
    mem = stamp_["memory_bytes"]
    lines = [
        "# crawlstore benchmark results",
        "",
        f"`{' '.join(stamp_['command'])}` ({plan.mode}), {stamp_['date']}; "
        f"{stamp_['cores']} cores, {mem / 2**30:.0f} GiB, {stamp_['cpu']}; {stamp_['os']}; "
        f"Python {stamp_['python']}; git {stamp_['git_commit'][:10] or '?'}"
        f"{' (dirty tree)' if stamp_['git_dirty'] else ''}.",
        "",
        "Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val and "(" not in k),
        "",
        f"Each row: the median of {plan.rounds} rounds ({plan.heavy_rounds} for seen sets, "
        "opening and scaling), contenders alternating within each round, a fresh directory "
        "per contender per round. **Ratios are the claims** (baseline row / row: above 1 is "
        "faster than the baseline); absolute times move up to 2x between runs on these "
        "machines.",
        "",
    ]
    for t in tables:
        lines += [f"## {t.title}", ""]
        extra = t.columns
        timing = [f"median / {t.unit}", f"{t.unit}s/s", "ratio"] if t.timed else []
        head = ["contender", *timing, *extra, "crash safety (kill -9 loses)", "note"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(timing) + len(extra))
                                    + ["---", "---"]) + "|")  # fmt: skip
        for r in t.rows:
            ratio = t.ratio(r)
            per = r.per_op
            label = f"**{r.label}** (baseline)" if r.key in (t.baseline, r.baseline) else r.label
            note = r.skipped or r.note
            if r.baseline and r.baseline not in (t.baseline, r.key) and t.row(r.baseline):
                note = f"ratio to {t.row(r.baseline).label}; {note}".rstrip("; ")  # type: ignore[union-attr]
            times = [_time(per), f"{1 / per:,.0f}" if per else "—",
                     f"{ratio:.2f}x" if ratio is not None else "—"] if t.timed else []  # fmt: skip
            cells = [label, *times, *(r.extra.get(c, "") for c in extra), r.crash or "—", note]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
        for n in t.notes:
            lines.append(f"- {n}")
        if t.notes:
            lines.append("")
    return "\n".join(lines)


def charts(out: Path, tables: list[Table], progress: Progress) -> list[str]:
    """One bar chart of ratios per workload; none (with a note) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress.note("matplotlib is not installed: no charts")
        return []
    written = []
    for t in tables:
        rows = [(r.label, t.ratio(r)) for r in t.rows]
        rows = [(label, ratio) for label, ratio in rows if ratio is not None]
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.4))
        labels = [label if len(label) < 70 else label[:67] + "..." for label, _ in rows]
        ax.barh(labels[::-1], [ratio for _, ratio in rows][::-1], color="#4c72b0")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("ratio to the baseline (log scale; > 1: faster)")
        ax.set_title(t.title if len(t.title) < 90 else t.title[:87] + "...", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        fig.tight_layout()
        name = f"{t.workload}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(name)
    return written


def run_checked(what: str, operation: Callable[[], _T], progress: Progress) -> _T | None:
    """Run a workload; a failure is printed and the suite goes on."""
    try:
        return operation()
    except Exception as exc:
        import traceback

        progress.note(f"{what} failed: {type(exc).__name__}: {exc}")
        traceback.print_exc()
        return None
