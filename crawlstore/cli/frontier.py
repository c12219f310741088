"""``crawlstore frontier CALL``: a client of a URL Frontier service (``crawlstore serve`` or any
server of API 2.6), one sub-verb a call, as the Java client of the API has them."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..extras import install_hint

if TYPE_CHECKING:
    from ..urlfrontier import URL, Client

_EXTRA = f"crawlstore frontier needs the urlfrontier extra: {install_hint('urlfrontier')}"
_Run = Callable[["Client", argparse.Namespace], int]


def _out(args: argparse.Namespace, data: Any, text: str) -> int:
    print(json.dumps(data, sort_keys=True) if args.json else text)
    return 0


def _lines(args: argparse.Namespace, values: list[str]) -> int:
    return _out(args, values, "\n".join(values))


def _url_row(url: URL) -> dict[str, Any]:
    return {"url": url.url, "key": url.key, "crawl": url.crawl,
            "metadata": {k: list(v) for k, v in url.metadata.items()},
            "refetchable_from": url.refetchable_from, "created": url.created}  # fmt: skip


# -- the calls ------------------------------------------------------------------------------------


def _chunks(urls: Iterable[URL], size: int) -> Iterable[list[URL]]:
    it = iter(urls)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def put_urls(client: Client, args: argparse.Namespace) -> int:
    from ..urlfrontier import Acks, read_urls

    urls = read_urls(args.file, crawl=args.crawl)
    if not args.batch:
        acks = client.put_urls(urls, window=args.window)
    else:  # discovered URLs through PutDiscovered, known ones through PutURLs
        acks = Acks(0, 0, 0)
        for chunk in _chunks(urls, args.window):
            new = [u for u in chunk if u.refetchable_from is None]
            known = [u for u in chunk if u.refetchable_from is not None]
            acks += client.put_discovered(new, batch=args.batch)
            acks += client.put_urls(known, window=args.window)
    data = {"ok": acks.ok, "skipped": acks.skipped, "failed": acks.failed}
    _out(args, data, f"{acks.ok:,} ok, {acks.skipped:,} skipped, {acks.failed:,} failed")
    return 1 if acks.failed else 0


def get_urls(client: Client, args: argparse.Namespace) -> int:
    urls = client.get_urls(max_urls_per_queue=args.max_urls, max_queues=args.max_queues,
                           key=args.key, crawl=args.crawl,
                           delay_requestable=args.delay)  # fmt: skip
    for url in urls:
        _out(args, _url_row(url), f"{url.url}\t{url.key}\t{url.crawl}")
    return 0


def list_queues(client: Client, args: argparse.Namespace) -> int:
    page = client.list_queues(crawl=args.crawl, start=args.start, size=args.size,
                              include_inactive=args.include_inactive)  # fmt: skip
    data = {"crawl": page.crawl, "keys": list(page.keys), "start": page.start,
            "total": page.total}  # fmt: skip
    _out(args, data, "\n".join(page.keys))
    return 0


def list_urls(client: Client, args: argparse.Namespace) -> int:
    urls = client.list_urls(crawl=args.crawl, key=args.key, filter=args.filter,
                            ignore_case=args.ignore_case, start=args.start)  # fmt: skip
    for url in itertools.islice(urls, args.size):
        text = f"{url.url}\t{url.key}\t{url.refetchable_from}\t{url.created}"
        _out(args, _url_row(url), text)
    return 0


def stats(client: Client, args: argparse.Namespace) -> int:
    s = client.stats(crawl=args.crawl, key=args.key)
    data = {"crawl": s.crawl, "size": s.size, "in_process": s.in_process, "queues": s.queues,
            "counts": dict(s.counts)}  # fmt: skip
    lines = [f"crawl: {s.crawl}", f"size: {s.size}", f"in process: {s.in_process}",
             f"queues: {s.queues}",
             *(f"{k}: {v}" for k, v in sorted(s.counts.items()))]  # fmt: skip
    _out(args, data, "\n".join(lines))
    return 0


def url_status(client: Client, args: argparse.Namespace) -> int:
    url = client.url_status(args.url, key=args.key, crawl=args.crawl)
    if url is None:
        print(f"crawlstore frontier url-status: no {args.url} in crawl {args.crawl!r}",
              file=sys.stderr)  # fmt: skip
        return 1
    row = _url_row(url)
    _out(args, row, "\n".join(f"{k}: {v}" for k, v in row.items()))
    return 0


def _removed(args: argparse.Namespace, n: int) -> int:
    return _out(args, {"removed": n}, f"{n:,} URLs removed")


def _count(args: argparse.Namespace, n: int) -> int:
    return _out(args, {"count": n}, str(n))


def set_delay(client: Client, args: argparse.Namespace) -> int:
    client.set_delay(args.delay, key=args.key, crawl=args.crawl)
    return 0


def set_limit(client: Client, args: argparse.Namespace) -> int:
    client.set_crawl_limit(args.key, args.limit, crawl=args.crawl)
    return 0


def set_active(client: Client, args: argparse.Namespace) -> int:
    client.set_active(args.state == "true")
    return 0


def get_active(client: Client, args: argparse.Namespace) -> int:
    active = client.get_active()
    return _out(args, active, str(active).lower())


def set_log_level(client: Client, args: argparse.Namespace) -> int:
    client.set_log_level(args.level, package=args.package)
    return 0


def block_queue(client: Client, args: argparse.Namespace) -> int:
    until = args.until if args.until is not None else time.time() + args.seconds
    client.block_queue_until(args.key, until, crawl=args.crawl)
    return 0


def dump(client: Client, args: argparse.Namespace) -> int:
    n = client.dump(args.output, crawl=args.crawl)
    print(f"{n:,} URLs written to {args.output}", file=sys.stderr if args.output == "-" else None)
    return 0


# -- the parser -----------------------------------------------------------------------------------

# fmt: off
_CALLS: list[tuple[str, str, _Run, str]] = [
    # name, help, run, options: c crawl, C crawl or any, k key, K key required, j --json
    ("put-urls", "add or update URLs from a file (plain URLs or JSON URLItems)", put_urls, "cj"),
    ("get-urls", "URLs due for fetching (now in process)", get_urls, "Ckj"),
    ("list-queues", "a page of a crawl's queues", list_queues, "cj"),
    ("list-crawls", "the crawls", lambda c, a: _lines(a, c.list_crawls()), "j"),
    ("list-urls", "a crawl's URLs", list_urls, "ckj"),
    ("stats", "a crawl's (a queue's) counts", stats, "ckj"),
    ("delete-queue", "remove a queue and its URLs",
     lambda c, a: _removed(a, c.delete_queue(a.key, crawl=a.crawl)), "cKj"),
    ("delete-crawl", "remove a crawl and its URLs",
     lambda c, a: _removed(a, c.delete_crawl(a.crawl)), "cj"),
    ("block-queue", "hand out nothing of a queue until a time", block_queue, "cK"),
    ("set-delay", "seconds between two URLs of a queue (of every queue without -k)",
     set_delay, "ck"),
    ("set-limit", "hand out nothing more of a queue once N URLs completed (0: no limit)",
     set_limit, "cK"),
    ("url-status", "where one URL stands", url_status, "ckj"),
    ("count-urls", "how many URLs a crawl (a queue) holds",
     lambda c, a: _count(a, c.count_urls(crawl=a.crawl, key=a.key, filter=a.filter,
                                         ignore_case=a.ignore_case)), "ckj"),
    ("purge-urls", "remove the URLs created more than D days ago (0: all)",
     lambda c, a: _removed(a, c.purge_urls(crawl=a.crawl, key=a.key, days=a.days)), "ckj"),
    ("set-active", "whether the service hands out URLs", set_active, ""),
    ("get-active", "whether the service hands out URLs", get_active, "j"),
    ("set-log-level", "the service's log level of a logger", set_log_level, ""),
    ("list-nodes", "the service's nodes", lambda c, a: _lines(a, c.list_nodes()), "j"),
    ("dump", "write every URL to a file, one JSON URLItem a line (put-urls -f reads it)",
     dump, "C"),
]
# fmt: on


def _options(p: argparse.ArgumentParser, name: str, letters: str) -> None:
    if "c" in letters:
        p.add_argument("-c", "--crawl", default="DEFAULT", help="the crawl ID (DEFAULT)")
    if "C" in letters:
        every = "any crawl" if name == "get-urls" else "every crawl"
        p.add_argument("-c", "--crawl", help=f"the crawl ID (default: {every})")
    if "k" in letters:
        p.add_argument("-k", "--key", default="", help="the queue (default: every queue)")
    if "K" in letters:
        p.add_argument("-k", "--key", required=True, help="the queue")
    if "j" in letters:
        p.add_argument("--json", action="store_true", help="output as JSON (lines)")


def _specific(p: argparse.ArgumentParser, name: str) -> None:
    add = p.add_argument
    if name == "put-urls":
        add("-f", "--file", required=True, help="the file (gzip or not; - for stdin)")
        add(
            "-b",
            "--batch",
            type=int,
            default=0,
            metavar="N",
            help="send discovered URLs through PutDiscovered, N a batch (0: all through PutURLs)",
        )
        add(
            "-w",
            "--window",
            type=int,
            default=10_000,
            metavar="N",
            help="URLs waiting for their acks at most (10000)",
        )
    elif name == "get-urls":
        add("-m", "--max-urls", type=int, default=1, metavar="N", help="URLs a queue (1)")
        add("-q", "--max-queues", type=int, default=1, metavar="N", help="queues (1)")
        add(
            "-d",
            "--delay",
            type=int,
            default=0,
            metavar="S",
            help="seconds the URLs stay in process (0: the service's default)",
        )
    elif name in ("list-queues", "list-urls"):
        add("-s", "--start", type=int, default=0, help="offset of the first (0)")
        add(
            "-n",
            "--size",
            type=int,
            default=100 if name == "list-queues" else None,
            help="how many (list-queues: 100; list-urls: all)",
        )
        if name == "list-queues":
            add(
                "-i",
                "--include-inactive",
                action="store_true",
                help="queues blocked or with nothing to hand out too",
            )
    elif name == "block-queue":
        until = p.add_mutually_exclusive_group(required=True)
        until.add_argument(
            "-u",
            "--until",
            type=float,
            metavar="EPOCH",
            help="until this time (epoch seconds; 0 unblocks)",
        )
        until.add_argument("-s", "--seconds", type=float, metavar="S", help="for S seconds")
    elif name == "set-delay":
        add("-d", "--delay", type=int, required=True, metavar="S", help="seconds")
    elif name == "set-limit":
        add("-l", "--limit", type=int, required=True, metavar="N", help="completed URLs")
    elif name == "url-status":
        add("-u", "--url", required=True, help="the URL")
    elif name == "purge-urls":
        add("-d", "--days", type=int, default=0, metavar="D", help="days (0)")
    elif name == "set-active":
        add("state", choices=("true", "false"), help="true or false")
    elif name == "set-log-level":
        add("-p", "--package", default="", help="the logger (default: the root logger)")
        add(
            "-l",
            "--level",
            default="INFO",
            choices=("TRACE", "DEBUG", "INFO", "WARN", "ERROR"),
            help="the level (INFO)",
        )
    elif name == "dump":
        add("-o", "--output", required=True, metavar="FILE", help="the file (.gz; - for stdout)")
    if name in ("list-urls", "count-urls"):
        add("-f", "--filter", help="only URLs containing this")
        add("-i", "--ignore-case", action="store_true", help="the filter in any case")


def add_frontier(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("frontier", help="call a URL Frontier service (crawlstore serve)",
                         description="Call a URL Frontier service of API 2.6 (crawlstore "
                         "serve, or any other), one call a verb; as the Java client of the API. "
                         "An unreachable service exits 3.")  # fmt: skip
    p.add_argument("--address", default="127.0.0.1:7071", metavar="HOST:PORT",
                   help="the service (127.0.0.1:7071)")  # fmt: skip
    calls = p.add_subparsers(dest="call", metavar="CALL")
    calls.required = True
    for name, text, run, letters in _CALLS:
        sub = calls.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        _options(sub, name, letters)
        _specific(sub, name)
        sub.set_defaults(handler=frontier, run=run)


def frontier(args: argparse.Namespace) -> int:
    try:
        from ..urlfrontier import Client, DumpError, FrontierError
    except ImportError:
        print(_EXTRA, file=sys.stderr)
        return 2
    where = f"crawlstore frontier {args.call}"
    try:
        with Client(args.address) as client:
            code: int = args.run(client, args)
            return code
    except DumpError as exc:
        print(f"{where}: {exc}", file=sys.stderr)
        return 2
    except FrontierError as exc:
        if exc.code == "UNAVAILABLE":
            print(f"{where}: the URL Frontier service at {args.address} is unavailable (is it "
                  f"running?): {exc.details}", file=sys.stderr)  # fmt: skip
            return 3
        print(f"{where}: {exc}", file=sys.stderr)
        return 2 if exc.code == "INVALID_ARGUMENT" else 3
