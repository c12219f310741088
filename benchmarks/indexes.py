"""``python -m benchmarks.indexes --baseline DIR [--seconds S] [--rounds N]``: what the crawls'
bounded indexes (recent failures, revisits by the minute) cost the crawl loop, against a
checkout of crawlstore without them (``DIR``: e.g. ``git worktree add /tmp/base 1519f60``).

Each workload is the crawl loop of the dashboard benchmark (``pop_many(16)``, then one
transaction with the 16 reports and 10 new links a page, the default durability), in a process
of its own, for a fixed time, on a fresh store: every page done (the indexes write nothing);
a third of the pages failed with a status and reason (each a write to the ring of recent
failures); every page done under a revisit facade (each a revisit counted). Rounds alternate
the two checkouts; the claim is the ratio of pages a second, this checkout to the baseline's
(no workload more than 5% slower). On a file in the default durability, and on Redis (a local
server, the default layout of each checkout).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .servers import Node, free_ports, server_binary

#: The loop, run with each checkout's crawlstore first on the path: it uses only what both
#: have. argv: store target, workload, seconds. It prints pages done.
LOOP = r"""
import sys, time
from crawlstore import Done, Failed, Seed, Store
from crawlstore.revisit import TagIntervals
target, workload, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
HOSTS, LINKS = 500, 10
with Store.open(target) as store:
    core = store.frontier(queues="host", delay=0, max_in_flight=None)
    with store.transaction():
        core.push_many([Seed.get(f"https://h{i % HOSTS}.test/s/{i}") for i in range(20_000)])
    frontier = core.revisit(TagIntervals({"page": "1h"})) if workload == "revisits" else core
    tag = "page" if workload == "revisits" else None
    pages, link, end = 0, 0, time.monotonic() + seconds
    while time.monotonic() < end:
        batch = frontier.pop_many(16)
        links, reports = [], []
        for n, ready in enumerate(batch):
            links += [Seed.get(f"https://h{(link + k) % HOSTS}.test/l/{link + k}").with_tag(tag)
                      for k in range(LINKS)]
            link += LINKS
            if workload == "failures" and (pages + n) % 3 == 0:
                reports.append(Failed(ready.seed, status=503, reason="http 503"))
            else:
                reports.append(Done(ready.seed, status=200))
        with store.transaction():
            if workload == "revisits":
                for report in reports:
                    frontier.report(report)
            else:
                frontier.report_many(reports)
            frontier.push_many(links)
        pages += len(batch)
print(pages)
"""
WORKLOADS = ("done", "failures", "revisits")
_names = itertools.count()


def run(checkout: Path, target: str, workload: str, seconds: float) -> float:
    """Pages a second of one run of the loop with ``checkout``'s crawlstore."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "-c", LOOP, target, workload, str(seconds)], env=env,
                          capture_output=True, text=True, timeout=seconds + 300)  # fmt: skip
    if done.returncode:
        raise RuntimeError(f"{checkout}: {done.stderr.strip()[-2000:]}")
    return int(done.stdout.split()[-1]) / seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout to compare")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write indexes.json there")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    checkouts = {"with indexes": here, "baseline": args.baseline.resolve()}
    rates: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        binary = server_binary(Path(tmp))
        node = Node(binary, Path(tmp), free_ports(1)[0]) if binary else None
        try:
            for _ in range(args.rounds):
                for storage in ("file", "redis") if node else ("file",):
                    for workload in WORKLOADS:
                        for name, checkout in checkouts.items():
                            n = next(_names)
                            target = (f"redis://127.0.0.1:{node.port}/0?ns=ix{n}" if node and
                                      storage == "redis" else f"{tmp}/s{n}.lmdb")  # fmt: skip
                            rate = run(checkout, target, workload, args.seconds)
                            rates.setdefault(f"{storage} {workload}", {}).setdefault(
                                name, []).append(rate)  # fmt: skip
        finally:
            if node is not None:
                node.stop()
    print("| the crawl loop | with indexes, pages/s | baseline, pages/s | ratio |")
    print("|---|---:|---:|---:|")
    for key, by in rates.items():
        new, old = statistics.median(by["with indexes"]), statistics.median(by["baseline"])
        print(f"| {key} | {new:,.0f} | {old:,.0f} | {new / old:.2f}x |")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "indexes.json").write_text(json.dumps(rates))


if __name__ == "__main__":
    main()
