"""Verbs over a crawl's queues: ``peek`` (what pop hands out next, read-only), ``queues`` (a
page of them), ``queue`` (one: read it, or set its delay, cap, limit or block),
``delete-queue``; and the queue lines and rows ``stats --queues`` shares."""

from __future__ import annotations

import argparse
import datetime as dt
import enum
import json
import math
import re
import sys
from dataclasses import asdict
from typing import Any

from ..errors import InvalidSeed
from ..frontier.protocol import QueueInfo, Upcoming
from ..seed import Seed
from ..store import Store

#: Exit codes (as in ``cli/__init__.py``).
USAGE, STORE = 2, 3


def _json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def _fail(verb: str, message: str, code: int) -> int:
    print(f"crawlstore {verb}: {message}", file=sys.stderr)
    return code


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat(timespec="seconds")


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
    line = (f"{info.key or '(the one queue)'}: queued {info.queued:,}, in flight "
            f"{info.in_flight:,}, scheduled {info.scheduled:,}; done {c.get('done', 0):,}, "
            f"failed {c.get('failed', 0):,}; " + ", ".join(own))  # fmt: skip
    if info.blocked_until > now:
        line += f"; blocked until {_iso(info.blocked_until)} ({info.blocked_until - now:,.0f}s)"
    return line


def _crawl(store: Store, verb: str, path: str, crawl: str) -> bool:
    if crawl in store.crawls():
        return True
    _fail(verb, f"{path} has no crawl {crawl!r}", STORE)
    return False


# -- peek -------------------------------------------------------------------------------------


def add_peek(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("peek", help="the seeds pop hands out next, without handing any out",
                         description="The next N seeds in the order pop hands them out: the "
                         "ready ones first, then the ones that come later (with when, and why), "
                         "then the ones only a report frees. Read-only: nothing is leased, so "
                         "it is safe while a crawl runs.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("-n", type=_count, default=10, metavar="N", help="how many seeds (10)")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--host", metavar="H", help="only the queue of this host (host[:port])")
    which.add_argument("--queue", metavar="KEY", help="only the queue with this key")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=peek)


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {n}")
    return n


def _tag(tag: Any) -> Any:
    return tag.value if isinstance(tag, enum.Enum) else tag


def _upcoming_row(u: Upcoming) -> dict[str, Any]:
    s = u.seed
    return {"url": s.url, "method": s.method, "fingerprint": s.fingerprint.hex(),
            "tag": _tag(s.tag), "priority": s.priority, "depth": s.depth, "queue": u.queue,
            "at": u.at, "why": u.why, "ready": u.ready}  # fmt: skip


def _ahead(seconds: float) -> str:
    """How far ahead, for a person: +1.5s, +30s, +12m, +2.5h, +3.0d."""
    s = max(seconds, 0.0)
    if s < 10:
        return f"+{s:.1f}s"
    if s < 120:
        return f"+{s:.0f}s"
    if s < 7200:
        return f"+{s / 60:.0f}m"
    if s < 172800:
        return f"+{s / 3600:.1f}h"
    return f"+{s / 86400:.1f}d"


def peek(args: argparse.Namespace) -> int:
    with Store.open(args.path, readonly=True) as store:
        if not _crawl(store, "peek", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        key = args.queue
        if args.host is not None:
            try:
                key = frontier.queue_for(Seed.get(f"https://{args.host}/"))
            except InvalidSeed:
                return _fail("peek", f"--host takes a host (host[:port]): {args.host!r}", USAGE)
        if key is not None and frontier.queue(key) is None:
            return _fail("peek", f"crawl {args.crawl!r} has no queue {key!r}", STORE)
        now = frontier.clock()
        upcoming = frontier.peek(args.n, queue=key)
    if args.json:
        _json({"crawl": args.crawl, "queue": key, "now": now,
               "seeds": [_upcoming_row(u) for u in upcoming]})  # fmt: skip
        return 0
    for u in upcoming:
        when = "now" if u.ready else "-" if u.at is None else _ahead(u.at - now)
        print(f"{u.why:<8} {when:>9}  {u.seed.url}" + (f"  ({u.queue})" if u.queue else ""))
    return 0


# -- queues -----------------------------------------------------------------------------------


def add_queues(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("queues", help="a page of a crawl's queues with their counts (read-only)",
                         description="The crawl's queues in key order, a page at a time: what "
                         "each holds, what finished, its own delay, max in flight and limit "
                         "(or the crawl's), its block.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--after", metavar="KEY", help="the queues after this key (the next page)")
    p.add_argument("--limit", type=_positive_int, default=100, help="queues a page (100)")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=queues)


def _positive_int(text: str) -> int:
    n = _count(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {n}")
    return n


def queues(args: argparse.Namespace) -> int:
    with Store.open(args.path, readonly=True) as store:
        if not _crawl(store, "queues", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        now = frontier.clock()
        page = frontier.queues(after=args.after, limit=args.limit)
    after = page[-1].key if len(page) == args.limit else None
    if args.json:
        _json({"crawl": args.crawl, "queues": [queue_row(q) for q in page], "next": after})
        return 0
    for q in page:
        print(queue_line(q, now))
    if after is not None:
        print(f"(more: --after {after!r})")
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
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not +SECONDS, an ISO-8601 time, or a unix time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.timestamp()


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
    return None if text == "crawl" else _positive_int(text)


def _limit(text: str) -> int | None:
    return None if text == "none" else _count(text)


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
        if not _crawl(store, "queue", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        now = frontier.clock()
        if block is not None:
            try:
                changes["blocked_until"] = parse_time(block, now)
            except ValueError as exc:
                return _fail("queue", f"--block-until: {exc}", USAGE)
        if not changes:
            info = frontier.queue(args.key)
            if info is None:
                return _fail("queue", f"crawl {args.crawl!r} has no queue {args.key!r}", STORE)
        else:
            with store.transaction():
                if frontier.queue(args.key) is None and not args.create:
                    return _fail("queue", f"crawl {args.crawl!r} has no queue {args.key!r} "
                                 "(--create sets it ahead of its first seed)", STORE)  # fmt: skip
                info = frontier.set_queue(args.key, **changes)
    assert info is not None
    if args.json:
        _json(queue_row(info))
    else:
        print(queue_line(info, now))
    return 0


# -- delete-queue -----------------------------------------------------------------------------


def add_delete_queue(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("delete-queue", help="remove a queue with its seeds and URLs",
                         description="Remove the queue with its queued, in-flight and scheduled "
                         "seeds, its URLs and counters.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("key", help="the queue's key")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=delete_queue)


def delete_queue(args: argparse.Namespace) -> int:
    with Store.open(args.path) as store:
        if not _crawl(store, "delete-queue", args.path, args.crawl):
            return STORE
        frontier = store.frontier(crawl=args.crawl)
        with store.transaction():
            info = frontier.queue(args.key)
            if info is None:
                return _fail("delete-queue", f"crawl {args.crawl!r} has no queue {args.key!r}",
                             STORE)  # fmt: skip
            urls = frontier.delete_queue(args.key)
    seeds = info.queued + info.in_flight + info.scheduled
    if args.json:
        _json({"queue": args.key, "seeds": seeds, "queued": info.queued,
               "in_flight": info.in_flight, "scheduled": info.scheduled, "urls": urls})  # fmt: skip
    else:
        print(f"queue {args.key or '(the one queue)'} removed: {seeds:,} seeds ({info.queued:,} "
              f"queued, {info.in_flight:,} in flight, {info.scheduled:,} scheduled), {urls:,} "
              "URLs")  # fmt: skip
    return 0
