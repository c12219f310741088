"""``peek``: the seeds pop hands out next, without handing any out (read-only); of the whole
crawl, of one queue, or of the queue a host's seeds go to."""

from __future__ import annotations

import argparse
import enum
from typing import Any

from ..errors import InvalidSeed
from ..frontier import Frontier
from ..frontier.protocol import Upcoming
from ..seed import Seed
from ..store import Store
from . import when
from .queues import ONE_QUEUE, STORE, USAGE, fail, has_crawl, print_json, whole_number


def add_peek(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("peek", help="the seeds pop hands out next, without handing any out",
                         description="The next N seeds in the order pop hands them out: the "
                         "ready ones first, then the ones that come later (with when, and why), "
                         "then the ones only a report frees. Read-only: nothing is leased, so "
                         "it is safe while a crawl runs.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("-n", type=whole_number, default=10, metavar="N", help="how many seeds (10)")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--host", metavar="H", help="only the queue of this host (host[:port])")
    which.add_argument("--queue", metavar="KEY", help="only the queue with this key")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=peek)


def _tag(tag: Any) -> Any:
    return tag.value if isinstance(tag, enum.Enum) else tag


def _upcoming_row(u: Upcoming) -> dict[str, Any]:
    s = u.seed
    return {"url": s.url, "method": s.method, "fingerprint": s.fingerprint.hex(),
            "tag": _tag(s.tag), "priority": s.priority, "depth": s.depth, "queue": u.queue,
            "at": u.at, "why": u.why, "ready": u.ready}  # fmt: skip


def _host_queue(frontier: Frontier, crawl: str, host: str) -> str | int:
    """The key of the queue the seeds of ``host`` go to, or the exit code after saying why
    there is none: the crawl's queues are not per host, ``host`` is not a host, or none of
    its seeds was pushed. ``host`` without a port is on the default port of http or https."""
    if frontier.core.policy.queues == "single":
        return fail("peek", f"--host cannot apply: crawl {crawl!r} has one queue, not a queue "
                    "per host (leave --host out to peek at it)", USAGE)  # fmt: skip
    keys = []
    for scheme in ("https", "http"):  # example.com:80 is the queue of http://example.com/
        try:
            keys.append(frontier.queue_for(Seed.get(f"{scheme}://{host}/")))
        except InvalidSeed:
            return fail("peek", f"--host takes a host (host[:port]): {host!r}", USAGE)
    for key in dict.fromkeys(keys):
        if frontier.queue(key) is not None:
            return key
    return fail("peek", f"crawl {crawl!r} has no queue for host {host!r}: none of its seeds "
                "was pushed", STORE)  # fmt: skip


def peek(args: argparse.Namespace) -> int:
    with Store.open(args.path, readonly=True) as store:
        if not has_crawl(store, "peek", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        key = args.queue
        if args.host is not None:
            found = _host_queue(frontier, args.crawl, args.host)
            if isinstance(found, int):
                return found
            key = found
        elif key is not None and frontier.queue(key) is None:
            return fail("peek", f"crawl {args.crawl!r} has no queue {key!r}", STORE)
        now = frontier.clock()
        upcoming = frontier.peek(args.n, queue=key)
    if args.json:
        print_json({"crawl": args.crawl, "queue": key, "now": now,
                    "seeds": [_upcoming_row(u) for u in upcoming]})  # fmt: skip
        return 0
    for u in upcoming:
        at = "now" if u.ready else "-" if u.at is None else "+" + when.span(max(u.at - now, 0.0))
        print(f"{u.why:<8} {at:>9}  {u.seed.url}" + (f"  ({u.queue})" if u.queue else ""))
    if not upcoming and args.n > 0:
        where = f"queue {key or ONE_QUEUE}" if key is not None else f"crawl {args.crawl}"
        print(f"(nothing to hand out: {where} holds no seed queued or scheduled, nor one whose "
              "lease can be reclaimed)")  # fmt: skip
    return 0
