"""``crawlstore crawl``: the reference crawler (the ``crawl`` extra) over a store."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import IO, TYPE_CHECKING, Any

from ..errors import CrawlstoreError
from ..extras import install_hint
from ..store import Store

if TYPE_CHECKING:
    from ..crawler import CrawlResult

_EXTRA = f"crawlstore crawl needs the crawl extra: {install_hint('crawl')}"


def add_crawl(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser(
        "crawl",
        help="crawl sites into a store (the reference crawler); run again to resume",
        description="Crawl from the seed URLs into the store: per-host politeness, robots.txt, "
        "retries, pauses on 429/503, redirects, trap avoidance, conditional revalidation and "
        "revisits by tag. Run it again with the same store and it resumes. Ctrl-C stops it "
        "cleanly (pages in flight are crawled first next time). One JSON line a page goes to "
        "--out (or to stdout when it is no terminal).",
    )
    p.add_argument("urls", nargs="+", metavar="URL", help="seed URLs")
    p.add_argument("--store", required=True, metavar="PATH", help="the store file")
    p.add_argument("--crawl", default="default", help="the crawl's name in the store")
    p.add_argument(
        "--allow-host",
        action="append",
        metavar="H",
        dest="allow_hosts",
        help="a host to crawl, and its subdomains (repeat; default: the seeds')",
    )
    p.add_argument("--max-depth", type=int, metavar="N", help="links deeper than N are left")
    p.add_argument("--concurrency", type=int, default=16, metavar="N", help="pages in flight (16)")
    p.add_argument("--delay", type=float, default=1.0, metavar="S",
                   help="seconds between two pages of one host (1.0)")  # fmt: skip
    p.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="PATTERN=TAG",
        help="tag URLs matching the regular expression (repeat; first wins)",
    )
    p.add_argument("--revisit", action="append", default=[], metavar="TAG=INTERVAL",
                   help="crawl the tag's pages again every INTERVAL (90s, 1h30m, 1d)")  # fmt: skip
    p.add_argument("--retries", type=int, default=3, help="tries after the first (3)")
    p.add_argument("--retry-delay", type=float, default=1.0, metavar="S",
                   help="seconds before the first retry, doubling (1.0)")  # fmt: skip
    p.add_argument("--timeout", type=float, default=10.0, metavar="S", help="per request (10)")
    p.add_argument("--user-agent", help="the User-Agent header, and the robots.txt agent")
    p.add_argument("--no-robots", dest="robots", action="store_false", help="ignore robots.txt")
    p.add_argument("--trap-budget", type=int, metavar="N",
                   help="at most N URLs under one URL prefix (default 4096)")  # fmt: skip
    p.add_argument("--idle", type=float, default=60.0, metavar="S",
                   help="end once nothing is due within S seconds (60)")  # fmt: skip
    p.add_argument("--max-pages", type=int, metavar="N", help="end after N pages")
    p.add_argument("--max-time", type=float, metavar="S", help="end after S seconds")
    p.add_argument("--out", metavar="FILE", help="append one JSON line a page ('-': stdout)")
    p.add_argument("--quiet", action="store_true", help="log lines instead of the live view")
    p.add_argument("--json", action="store_true", help="end with a JSON summary on stdout")
    p.set_defaults(handler=crawl)


def _pairs(values: list[str], what: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values:
        left, sep, right = value.rpartition("=")
        if not sep or not left or not right:
            raise ValueError(f"{what} must look like {what.upper()}=VALUE: {value!r}")
        pairs.append((left, right))
    return pairs


def crawl(args: argparse.Namespace) -> int:
    try:
        from ..crawler import CrawlOptions, Progress
        from ..crawler import crawl as run
    except ImportError as exc:
        print(f"{_EXTRA} ({exc.name} is missing)", file=sys.stderr)
        return 2
    from ..revisit import parse_interval

    try:
        options = CrawlOptions(
            seeds=tuple(args.urls), crawl=args.crawl,
            allow_hosts=tuple(args.allow_hosts) if args.allow_hosts else None,
            max_depth=args.max_depth, concurrency=args.concurrency, delay=args.delay,
            tags=tuple(_pairs(args.tag, "tag")),
            revisits=tuple((t, parse_interval(i)) for t, i in _pairs(args.revisit, "revisit")),
            retries=args.retries, retry_delay=args.retry_delay, timeout=args.timeout,
            robots=args.robots, trap_budget=args.trap_budget, idle=args.idle,
            max_pages=args.max_pages, max_time=args.max_time,
            **({"user_agent": args.user_agent} if args.user_agent else {}),
        )  # fmt: skip
    except (CrawlstoreError, ValueError) as exc:
        print(f"crawlstore crawl: {exc}", file=sys.stderr)
        return 2
    with ExitStack() as stack:
        out: IO[str] | None = None
        if args.out == "-" or (args.out is None and not sys.stdout.isatty()):
            out = sys.stdout
        elif args.out is not None:
            out = stack.enter_context(open(args.out, "a", encoding="utf-8"))
        store = stack.enter_context(Store.open(args.store))
        progress = Progress(live=sys.stdout.isatty() and not args.quiet and out is not sys.stdout)

        def page(record: dict[str, Any]) -> None:
            if out is not None:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")
                out.flush()

        def start(stop: asyncio.Event) -> Awaitable[CrawlResult]:
            return run(store, options, on_page=page, progress=progress, stop=stop)

        result = asyncio.run(_interruptible(start))
    counts = result.counts
    summary = {"ended": result.ended, "seconds": round(result.seconds, 3),
               "fetched": counts.fetched, "done": counts.done, "unchanged": counts.unchanged,
               "redirects": counts.redirects, "retries": counts.retries,
               "failed": counts.failed, "robots": counts.robots, "errors": counts.errors,
               "cancelled": counts.cancelled,
               "blocked": [b.prefix for b in result.blocked]}  # fmt: skip
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(f"crawlstore crawl: ended ({result.ended}) after {result.seconds:.1f}s: "
              f"{counts.fetched} fetched, {counts.done} done ({counts.unchanged} unchanged), "
              f"{counts.retries} retries, {counts.failed} failed", file=sys.stderr)  # fmt: skip
    return 130 if result.ended == "stopped" else 0


async def _interruptible(start: Callable[[asyncio.Event], Awaitable[CrawlResult]]) -> CrawlResult:
    """Run the crawl; the first Ctrl-C (or SIGTERM) stops it cleanly, a second one kills."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("crawlstore crawl: stopping (Ctrl-C again to kill)", file=sys.stderr)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    return await start(stop)
