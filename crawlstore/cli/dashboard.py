"""``crawlstore dashboard``: a live page of a crawl, from a store opened read-only."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import signal
import sys
import threading

from ..errors import CorruptStore, NotAStore, StoreError


def add_dashboard(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser(
        "dashboard",
        help="a live page of a running crawl, in a browser (read-only)",
        description="Serve a page that shows a crawl as it runs, refreshing itself every 2 s: "
        "pages a second, its counters, its busiest, blocked and capped queues, the store "
        "file's size and growth, and a URL lookup; the same data as JSON under /api/ and "
        "Prometheus metrics at /metrics. It opens the store read-only: it never writes, and "
        "crawlers go on writing beside it. Prints the page's address as its first line; "
        "Ctrl-C or SIGTERM stops it.",
    )
    p.add_argument("path", help="the store file, or a Redis URL")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8470, help="port to listen on (8470; 0: any)")
    p.add_argument("--crawl", help="the crawl shown first (default: the store's first)")
    p.set_defaults(handler=dashboard)


def dashboard(args: argparse.Namespace) -> int:
    from ..dashboard import Dashboard
    from ..dashboard.panels import UnknownCrawl

    try:
        board = Dashboard(args.path, host=args.host, port=args.port, crawl=args.crawl)
    except UnknownCrawl as exc:
        return _fail(f"{exc} (nothing was created)")
    except (CorruptStore, NotAStore) as exc:
        if not os.path.isfile(args.path):  # (a directory)
            return _fail(str(exc))
        return _fail(f"{exc}: check it with crawlstore verify {args.path}")
    except StoreError as exc:
        return _fail(str(exc))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return _fail(f"port {args.port} on {args.host} is in use: choose another with "
                         "--port (0: any free one)")  # fmt: skip
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    print(board.url, flush=True)
    if not _loopback(args.host):
        print(f"crawlstore dashboard: warning: listening on {args.host}, where others may "
              "reach it; it has no authentication", file=sys.stderr)  # fmt: skip

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=board.httpd.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):  # (also when started with SIGINT ignored)
        signal.signal(sig, stop)
    try:
        board.serve_forever()
    finally:
        board.close()
    return 0


def _fail(message: str) -> int:
    print(f"crawlstore dashboard: {message}", file=sys.stderr)
    return 3


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
