"""``python -m benchmarks.dashboard [--quick | --full] [--out DIR]``: what ``crawlstore
dashboard`` costs.

- **Beside a crawl**: a crawl loop in a process of its own (``pop_many(16)``, then one
  transaction with the 16 reports and 10 new links a page, the default durability) for a fixed
  time, alone and with a dashboard process beside it that a client polls as the page does
  (``/api/summary`` and ``/api/queues`` every 2 s) and ten times as often; rounds alternate.
  The claim is the ratio of pages a second with the dashboard to without.
- **A refresh at scale**: the time of one refresh (the summary, the queue panels, the recent
  failures, reasons, traps and revisits, one URL lookup) on stores of growing size, 10,000
  hosts each, 20,000 of their URLs visited (half failed, half done with a revisit over the
  next day): it should not grow with the URLs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from crawlstore import Done, Failed, Seed, Store
from crawlstore.dashboard import Dashboard

HOSTS = 500
LINKS = 10


def _seed(path: Path, urls: int, hosts: int, visited: int = 0) -> None:
    """``urls`` queued over ``hosts``; of them, ``visited`` handed out and reported: every
    other one failed (three reasons), the others done with a revisit over the next day."""
    with Store.open(path, durability="nosync") as store:
        frontier = store.frontier(queues="host", delay=0, max_in_flight=None)
        batch = 100_000
        for start in range(0, urls, batch):
            with store.transaction():
                frontier.push_many([Seed.get(f"https://h{i % hosts}.test/s/{i}")
                                    for i in range(start, min(urls, start + batch))])  # fmt: skip
        now = time.time()
        for n in range(0, visited, 1000):
            with store.transaction():
                for i, ready in enumerate(frontier.pop_many(1000), n):
                    if i % 2:
                        reason = ("timeout", "dns", "http 503")[i % 3]
                        frontier.report(Failed(ready.seed, reason=reason))
                    else:
                        frontier.report(Done(ready.seed, status=200))
                        frontier.schedule(ready.seed, now + 86400 * i / visited, kind="revisit")


def _crawl(path: str, seconds: float, out: Any) -> None:
    """The crawl loop, for ``seconds``: pages done."""
    with Store.open(path) as store:
        frontier = store.frontier(queues="host", delay=0, max_in_flight=None)
        pages, link, end = 0, 0, time.monotonic() + seconds
        while time.monotonic() < end:
            batch = frontier.pop_many(16)
            links = []
            for _ in batch:
                links += [Seed.get(f"https://h{(link + k) % HOSTS}.test/l/{link + k}")
                          for k in range(LINKS)]  # fmt: skip
                link += LINKS
            with store.transaction():
                frontier.report_many([Done(r.seed) for r in batch])
                frontier.push_many(links)
            pages += len(batch)
        out.put(pages)


def _poll(url: str, every: float, stop: Any) -> None:
    """A client of the dashboard, as its page: the two panels every ``every`` seconds."""
    while not stop.is_set():
        for path in ("api/summary", "api/queues"):
            with urllib.request.urlopen(url + path, timeout=30) as reply:
                reply.read()
        stop.wait(every)


def _dashboard(path: str, ready: Any, stop: Any) -> None:
    with Dashboard(path).start() as board:
        ready.put(board.url)
        stop.wait()


def beside(seconds: float, rounds: int) -> dict[str, list[float]]:
    """Pages a second of the crawl loop alone, and with a dashboard polled every 2 s and every
    0.2 s; each round on a fresh store."""
    ctx = multiprocessing.get_context("spawn")
    out: dict[str, list[float]] = {"alone": [], "every 2 s": [], "every 0.2 s": []}
    for _ in range(rounds):
        for name in out:
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "crawl.lmdb"
                _seed(path, 20_000, HOSTS)
                results, stop, ready = ctx.Queue(), ctx.Event(), ctx.Queue()
                helpers = []
                if name != "alone":
                    board = ctx.Process(target=_dashboard, args=(str(path), ready, stop))
                    board.start()
                    url = ready.get(timeout=60)
                    every = 2.0 if name == "every 2 s" else 0.2
                    helpers = [board, ctx.Process(target=_poll, args=(url, every, stop))]
                    helpers[1].start()
                crawler = ctx.Process(target=_crawl, args=(str(path), seconds, results))
                crawler.start()
                pages = results.get(timeout=seconds + 120)
                crawler.join()
                stop.set()
                for helper in reversed(helpers):  # the poller's last request answered first
                    helper.join(30)
                out[name].append(pages / seconds)
    return out


def refresh(sizes: list[int]) -> dict[int, float]:
    """Milliseconds of one refresh (median of 20) on a store of each size, 10,000 hosts."""
    out = {}
    for urls in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "big.lmdb"
            _seed(path, urls, 10_000, visited=min(urls // 2, 20_000))
            with Dashboard(str(path)) as board:
                times = []
                for i in range(20):
                    start = time.perf_counter()
                    board.panels.summary("default")
                    board.panels.queues("default")
                    board.panels.recent("default")
                    board.panels.url("default", f"https://h{i}.test/s/{i}")
                    times.append(time.perf_counter() - start)
            out[urls] = statistics.median(times) * 1000
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="3 s runs, 2 rounds, up to 1e5 URLs")
    size.add_argument("--full", action="store_true", help="10 s runs, 5 rounds, up to 1e7 URLs")
    parser.add_argument("--out", type=Path, help="write dashboard.json there")
    args = parser.parse_args(argv)
    seconds, rounds = (3.0, 2) if args.quick else (10.0, 5) if args.full else (5.0, 3)
    sizes = [10**4, 10**5] + ([10**6] if not args.quick else []) + ([10**7] if args.full else [])
    rates = beside(seconds, rounds)
    alone = statistics.median(rates["alone"])
    print("| the crawl loop | pages/s (median) | ratio to alone |\n|---|---:|---:|")
    for name, values in rates.items():
        print(
            f"| {name if name == 'alone' else 'dashboard polled ' + name} | "
            f"{statistics.median(values):,.0f} | {statistics.median(values) / alone:.2f}x |"
        )
    costs = refresh(sizes)
    print("\n| URLs in the store (10,000 hosts) | one refresh (every panel, a lookup) |")
    print("|---:|---:|")
    for urls, ms in costs.items():
        print(f"| {urls:,} | {ms:.1f} ms |")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "dashboard.json").write_text(json.dumps({"rates": rates, "refresh_ms": costs}))


if __name__ == "__main__":
    main()
