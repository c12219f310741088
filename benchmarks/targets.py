"""``python -m benchmarks.targets [RESULTS.json ...]``: crawlstore's speed targets, read off the
results of ``python -m benchmarks``, as a Markdown table. Several files are read in order, a
later one's workloads replacing an earlier one's; by default ``docs/benchmarks/results.json``,
then the other ``.json`` files beside it (runs of some workloads, such as ``--full``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks"


def _rows(workloads: dict[str, Any], name: str) -> dict[str, Any]:
    table = workloads.get(name)
    return {row["key"]: row for row in table["rows"]} if table else {}


def _per_op(rows: dict[str, Any], key: str) -> float | None:
    row = rows.get(key)
    return row["median_per_op"] if row and not row.get("skipped") else None


def _speedup(rows: dict[str, Any], key: str, base: str) -> float | None:
    mine, theirs = _per_op(rows, key), _per_op(rows, base)
    return theirs / mine if mine and theirs else None


def targets(workloads: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(target, goal, measured, met) for each target that the results can answer."""
    out: list[tuple[str, str, str, bool | None]] = []
    crawl = _rows(workloads, "crawl")

    def ratio(what: str, key: str, base: str, goal: float, rows: dict[str, Any] = crawl) -> None:
        if not rows:
            return
        got = _speedup(rows, key, base)
        out.append((what, f">= {goal:g}x", f"{got:.2f}x" if got else "not measured",
                    None if got is None else got >= goal))  # fmt: skip

    ratio("crawl loop, async_worker(), 64 in flight, vs hand-written SQLite NORMAL with host "
          "queues", "crawlstore-worker-async", "sqlite-hosts-normal", 1)  # fmt: skip
    ratio("crawl loop, the plain loop (pop_many(64), one transaction) in \"safe\", vs the raw "
          "py-lmdb floor 64 pages a transaction", "crawlstore-by-hand", "lmdb-floor-64",
          0.5)  # fmt: skip
    ratio("crawl loop, InMemFrontier, vs Scrapy memory queues",
          "crawlstore-memory", "scrapy-memory", 5)  # fmt: skip
    counted = _rows(workloads, "calls").get("crawlstore-by-hand")
    if counted and counted["extra"].get("calls a page"):
        got = float(counted["extra"]["calls a page"].replace(",", ""))
        out.append(("Python calls a page, the plain loop", "<= 400", f"{got:,.0f}", got <= 400))
    direct = _rows(workloads, "scrapy-scheduler")
    ratio("Scrapy scheduler driven directly, crawlstore.scrapy.Scheduler vs JOBDIR's disk queues",
          "crawlstore", "scrapy-jobdir", 1, direct)  # fmt: skip
    whole = _rows(workloads, "scrapy-crawl")
    ratio("a whole Scrapy crawl of the benchmark site, crawlstore's scheduler vs JOBDIR",
          "crawlstore", "scrapy-jobdir", 1, whole)  # fmt: skip
    put = _rows(workloads, "urlfrontier-put")
    ratio("URL Frontier service, one PutURLs stream, vs push_many of 256 in process",
          "put-urls-1", "inproc-256-s", 0.3, put)  # fmt: skip
    got = _rows(workloads, "urlfrontier-get")
    ratio("URL Frontier service, GetURLs 10 queues x 10 URLs of 1,000, vs pop_many in process",
          "get-10x10@1e3", "inproc-10x10@1e3", 0.5, got)  # fmt: skip
    for size in ("1e3", "1e4"):
        capped = _per_op(got, f"get-capped@{size}")
        if capped is not None:
            what = f"URL Frontier service, GetURLs with every due queue at its cap, {size} queues"
            out.append((what, "<= 5 ms", f"{capped * 1e3:.1f} ms", capped <= 0.005))
    scaling = workloads.get("scaling")
    if scaling:
        sizes = sorted({row["key"].rsplit("@", 1)[1] for row in scaling["rows"]},
                       key=lambda size: float(size.replace(",", "")))  # fmt: skip
        small, large = sizes[0], sizes[-1]
        rows = {row["key"]: row for row in scaling["rows"]}
        for key in sorted({row["key"].rsplit("@", 1)[0] for row in scaling["rows"]}):
            a, b = rows.get(f"{key}@{small}"), rows.get(f"{key}@{large}")
            if a and b and a.get("median_per_op") and b.get("median_per_op"):
                kept = a["median_per_op"] / b["median_per_op"]
                out.append((f"scaling, {key}: throughput at {large} queued / at {small}",
                            ">= 0.80", f"{kept:.2f}", kept >= 0.8))  # fmt: skip
    opened = workloads.get("open")
    if opened:
        store_rows = [r for r in opened["rows"] if r["key"].startswith("crawlstore")]
        if store_rows:
            largest = store_rows[-1]
            seconds = largest.get("median_per_op")
            out.append((f"open + first pop, {largest['label'].rsplit(', ', 1)[-1]}", "< 0.1 s",
                        f"{seconds * 1000:.1f} ms" if seconds else "not measured",
                        None if seconds is None else seconds < 0.1))  # fmt: skip
    for name, table in workloads.items():
        if not name.startswith("seen"):
            continue
        rows = {row["key"]: row for row in table["rows"]}
        for key, goal in (("store-seen", 20.0), ("store-bloom", 1.3)):
            row = rows.get(key)
            if row and row["extra"].get("compacted backup"):
                size = float(row["extra"]["compacted backup"])
                high = row["extra"].get("high-water", "?")
                out.append((f"{name}, {row['label']}: file bytes a URL at rest "
                            f"(high-water while writing: {high})", f"<= {goal:g}",
                            f"{size:g}", size <= goal))  # fmt: skip
    seeds = _rows(workloads, "seeds")
    got = _per_op(seeds, "seed-get")
    if got is not None:
        out.append(("Seed.get(url), a typical URL", "<= 3 µs", f"{got * 1e6:.2f} µs", got <= 3e-6))
    return out


def beside(workloads: dict[str, Any]) -> list[tuple[str, str]]:
    """What is reported beside the targets: (what, measured)."""
    crawl, out = _rows(workloads, "crawl"), []
    for key, what in (("crawlstore-worker-async", "async_worker(), 64 in flight"),
                      ("crawlstore-worker-threads", "worker(), 64 threads")):  # fmt: skip
        got = _speedup(crawl, key, "scrapy-jobdir")
        if got is not None:
            out.append((f"crawl loop, {what}, vs Scrapy JOBDIR", f"{got:.2f}x"))
    written = {key: row["extra"].get("4 KiB written a page")
               for key, row in _rows(workloads, "calls").items()}  # fmt: skip
    for key, what in (("crawlstore-by-hand", "the plain loop"),
                      ("lmdb-floor-64", "the raw py-lmdb floor, 64 pages a transaction"),
                      ("sqlite-hosts-normal", "SQLite NORMAL with host queues")):  # fmt: skip
        if written.get(key) not in (None, "n/a"):
            out.append((f"4 KiB pages written a page of the crawl loop, {what}", written[key]))
    return out


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]] or [
        RESULTS / "results.json",
        *sorted(p for p in RESULTS.glob("*.json") if p.name != "results.json"),
    ]
    workloads: dict[str, Any] = {}
    for path in paths:
        for table in json.loads(path.read_text())["workloads"]:
            workloads[table["workload"]] = table
    print("| target | goal | measured | met |\n|---|---|---:|---|")
    for what, goal, measured, met in targets(workloads):
        mark = "yes" if met else ("**no**" if met is not None else "?")
        print(f"| {what} | {goal} | {measured} | {mark} |")
    for what, measured in beside(workloads):
        print(f"| {what} (reported, not a target) | | {measured} | |")


if __name__ == "__main__":
    main()
