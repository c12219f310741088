"""Verbs over a crawl's queues: ``queues`` (a page of them), ``queue`` (one: read it, or set its
delay, cap, limit or block), ``delete-queue``; and the queue lines, rows and pages, and the
argument types, other verbs share."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import shlex
import sys
from dataclasses import asdict
from typing import Any

from ..frontier import Frontier
from ..frontier.protocol import QueueInfo
from ..store import Store
from . import when

#: Exit codes (as in ``cli/__init__.py``).
USAGE, STORE = 2, 3
#: What text output calls the key of a crawl's only queue (its key is "").
ONE_QUEUE = "(the one queue)"


def print_json(value: Any) -> None:
    """``value`` on stdout as indented JSON."""
    json.dump(value, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def fail(verb: str, message: str, code: int) -> int:
    """Say on stderr what went wrong; ``code``, the exit code."""
    print(f"crawlstore {verb}: {message}", file=sys.stderr)
    return code


def whole_number(text: str) -> int:
    """An argument that is a whole number of 0 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {n}")
    return n


def _seconds(s: float) -> str:
    return f"{s:g}s"


# -- what a queue looks like: shared with ``stats --queues`` -------------------------------------


def queue_row(info: QueueInfo) -> dict[str, Any]:
    """A queue as JSON: every field of ``QueueInfo`` (None: the crawl's setting)."""
    return asdict(info)


def queue_line(info: QueueInfo, now: float) -> str:
    """A queue in one line: what it holds, what finished, its own settings, its block."""
    c = info.counts
    crawls = "the crawl's"
    delay = _seconds(info.delay) if info.delay is not None else crawls
    cap = info.max_in_flight if info.max_in_flight is not None else crawls
    limit = info.limit if info.limit is not None else "none"
    own = [f"delay {delay}", f"max in flight {cap}", f"limit {limit}"]
    line = (f"{info.key or ONE_QUEUE}: queued {info.queued:,}, in flight "
            f"{info.in_flight:,}, scheduled {info.scheduled:,}; done {c.get('done', 0):,}, "
            f"failed {c.get('failed', 0):,}; " + ", ".join(own))  # fmt: skip
    if info.blocked_until > now:
        line += f"; blocked until {when.shown(info.blocked_until, now)}"
    return line


def has_crawl(store: Store, verb: str, path: str, crawl: str) -> bool:
    """Whether the store has the crawl (if not, it says so on stderr)."""
    if crawl in store.crawls():
        return True
    fail(verb, f"{path} has no crawl {crawl!r}", STORE)
    return False


# -- queues -----------------------------------------------------------------------------------


def add_queues(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("queues", help="a page of a crawl's queues with their counts (read-only)",
                         description="The crawl's queues in key order, a page at a time: what "
                         "each holds, what finished, its own delay, max in flight and limit "
                         "(or the crawl's), its block.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--after", metavar="KEY", help="the queues after this key (the next page)")
    p.add_argument("--limit", type=positive_int, default=100, help="queues a page (100)")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=queues)


def positive_int(text: str) -> int:
    """An argument that is a whole number of 1 or more."""
    n = whole_number(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {n}")
    return n


def queue_page(
    frontier: Frontier, after: str | None, limit: int
) -> tuple[list[QueueInfo], str | None]:
    """A page of at most ``limit`` queues after ``after``, and the key to pass as ``--after``
    for the next page (None: this page is the last)."""
    page = frontier.queues(after=after, limit=limit + 1)
    return page[:limit], page[limit - 1].key if len(page) > limit else None


def more_line(what: str, limit: int, after: str) -> str:
    """What text output says after a page that ``--limit`` cut: how to see the rest."""
    return f"(the first {limit:,} {what}; the next page: --after {shlex.quote(after)})"


def queues(args: argparse.Namespace) -> int:
    with Store.open(args.path, readonly=True) as store:
        if not has_crawl(store, "queues", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        now = frontier.clock()
        page, after = queue_page(frontier, args.after, args.limit)
    if args.json:
        print_json({"crawl": args.crawl, "queues": [queue_row(q) for q in page], "next": after})
        return 0
    for q in page:
        print(queue_line(q, now))
    if after is not None:
        print(more_line("queues", args.limit, after))
    return 0


# -- queue ------------------------------------------------------------------------------------

_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(text: str, now: float) -> float:
    """``+60`` (seconds from now; ``+5m``, ``+2h``, ``+1d``), an ISO-8601 time (UTC unless it
    says otherwise), or a unix time (seconds since 1970)."""
    text = text.strip()
    relative = re.fullmatch(r"\+(\d+(?:\.\d*)?)([smhd]?)", text)
    if relative:
        return now + float(relative.group(1)) * _UNITS[relative.group(2)]
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value) or value < 1e9:
            raise ValueError(f"{text!r} is not a unix time (seconds since 1970): for seconds "
                             f"from now, write +{text}")  # fmt: skip
        return value
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not +SECONDS, an ISO-8601 time, or a unix time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.timestamp()


def _delay(text: str) -> float | None:
    if text == "crawl":
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seconds, or 'crawl': {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a delay is 0 seconds or more: {text!r}")
    return value


def _cap(text: str) -> int | None:
    return None if text == "crawl" else positive_int(text)


def _limit(text: str) -> int | None:
    return None if text == "none" else whole_number(text)


def add_queue(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("queue", help="one queue: read it, or set its delay, cap, limit, block",
                         description="With no setting, print the queue (read-only). With "
                         "settings, change them in one transaction and print the queue. A key "
                         "the crawl has no queue for is refused, unless --create.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("key", help="the queue's key (its host, with per-host queues)")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument(
        "--delay",
        type=_delay,
        default=argparse.SUPPRESS,
        metavar="S|crawl",
        help="seconds between two pops of it ('crawl': the crawl's again)",
    )
    p.add_argument(
        "--max-in-flight",
        type=_cap,
        default=argparse.SUPPRESS,
        metavar="N|crawl",
        help="its seeds in flight at once ('crawl': the crawl's again)",
    )
    p.add_argument(
        "--limit",
        type=_limit,
        default=argparse.SUPPRESS,
        metavar="N|none",
        help="how many of its seeds may finish, then no more ('none': no limit)",
    )
    block = p.add_mutually_exclusive_group()
    block.add_argument("--block-until", metavar="T", default=argparse.SUPPRESS,
                       help="pop nothing from it before T: +SECONDS (+5m, +2h, +1d), an "
                       "ISO-8601 time (UTC unless it says), or a unix time")  # fmt: skip
    block.add_argument("--unblock", action="store_true", help="end its block")
    p.add_argument(
        "--create",
        action="store_true",
        help="set a queue the crawl has no seed of yet (kept for its first seed)",
    )
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=queue)


def queue(args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {}
    for name, setting in (("delay", "delay"), ("max_in_flight", "max_in_flight"),
                          ("limit", "limit")):  # fmt: skip
        if hasattr(args, name):
            changes[setting] = getattr(args, name)
    block = getattr(args, "block_until", None)
    if args.unblock:
        changes["blocked_until"] = 0.0
    with Store.open(args.path, readonly=not changes and block is None) as store:
        if not has_crawl(store, "queue", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        now = frontier.clock()
        if block is not None:
            try:
                changes["blocked_until"] = parse_time(block, now)
            except ValueError as exc:
                return fail("queue", f"--block-until: {exc}", USAGE)
        if not changes:
            info = frontier.queue(args.key)
            if info is None:
                return fail("queue", f"crawl {args.crawl!r} has no queue {args.key!r}", STORE)
        else:
            with store.transaction():
                if frontier.queue(args.key) is None and not args.create:
                    return fail("queue", f"crawl {args.crawl!r} has no queue {args.key!r} "
                                 "(--create sets it ahead of its first seed)", STORE)  # fmt: skip
                info = frontier.set_queue(args.key, **changes)
    assert info is not None
    if args.json:
        print_json(queue_row(info))
    else:
        print(queue_line(info, now))
    return 0


# -- delete-queue -----------------------------------------------------------------------------


def add_delete_queue(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("delete-queue", help="remove a queue with its seeds and URLs",
                         description="Remove the queue with its seeds (queued, in flight and "
                         "scheduled), its URLs and counters.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("key", help="the queue's key")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=delete_queue)


def delete_queue(args: argparse.Namespace) -> int:
    with Store.open(args.path) as store:
        if not has_crawl(store, "delete-queue", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        with store.transaction():
            info = frontier.queue(args.key)
            if info is None:
                return fail("delete-queue", f"crawl {args.crawl!r} has no queue {args.key!r}",
                             STORE)  # fmt: skip
            urls = frontier.delete_queue(args.key)
    seeds = info.queued + info.in_flight + info.scheduled
    if args.json:
        print_json({"queue": args.key, "seeds": seeds, "queued": info.queued,
               "in_flight": info.in_flight, "scheduled": info.scheduled, "urls": urls})  # fmt: skip
    else:
        print(f"queue {args.key or ONE_QUEUE} removed: {seeds:,} seeds ({info.queued:,} "
              f"queued, {info.in_flight:,} in flight, {info.scheduled:,} scheduled), {urls:,} "
              "URLs")  # fmt: skip
    return 0
