"""``crawlstore serve``: the URL Frontier service (the ``urlfrontier`` extra) on a store."""

from __future__ import annotations

import argparse
import logging
import sys

from ..extras import install_hint

_EXTRA = f"crawlstore serve needs the urlfrontier extra: {install_hint('urlfrontier')}"


def add_serve(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser(
        "serve",
        help="serve the URL Frontier gRPC API (2.6) from a store",
        description="Serve urlfrontier.URLFrontier, all 19 calls of API 2.6, from the store: "
        "crawlers in any language share its frontier. Every acknowledged URL is committed. "
        "SIGTERM or Ctrl-C stops it cleanly. Several processes may serve one store, on one "
        "port with --reuse-port.",
    )
    p.add_argument("--store", required=True, metavar="PATH", help="the store file")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=7071, help="port to listen on (7071; 0: any)")
    p.add_argument("--node", metavar="HOST:PORT", help="what ListNodes answers (host:port)")
    p.add_argument(
        "--reuse-port",
        action="store_true",
        help="share the port with other crawlstore serve processes (SO_REUSEPORT)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=64,
        metavar="N",
        help="calls served at once; each open stream holds one (64)",
    )
    p.add_argument(
        "--durability",
        default="safe",
        choices=("safe", "full", "nosync"),
        help="what a commit promises (safe)",
    )
    p.add_argument(
        "--default-delay",
        type=float,
        metavar="S",
        help="set the store-wide delay between two URLs of a queue (as SetDelay "
        "with an empty key; a new store has 1)",
    )
    p.add_argument(
        "--metrics-port", type=int, metavar="PORT", help="serve Prometheus metrics on this port"
    )
    p.add_argument("--log-level", default="INFO", help="INFO, DEBUG, WARNING ...")
    p.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
    try:
        from ..urlfrontier.server import serve as run
    except ImportError:
        print(_EXTRA, file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")  # fmt: skip
    run(args.store, host=args.host, port=args.port, node=args.node, reuse_port=args.reuse_port,
        workers=args.workers, durability=args.durability, default_delay=args.default_delay,
        metrics_port=args.metrics_port)  # fmt: skip
    return 0
