"""Verbs over a crawl's URLs and queues: ``urls``, ``url``, ``queues``, ``delete-crawl``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from ..frontier.protocol import URLStatus
from ..store import Store

_STATES = ["queued", "in-flight", "scheduled", "done", "failed", "skipped"]


def _row(status: URLStatus) -> dict[str, Any]:
    outcome = status.outcome
    return {
        "url": status.url,
        "fingerprint": status.fingerprint.hex(),
        "state": status.state,
        "queue": status.queue,
        "at": status.at,
        "kind": status.kind,
        "created": status.created,
        "outcome": asdict(outcome) if outcome is not None else None,
    }


def _line(row: dict[str, Any]) -> str:
    outcome = row["outcome"]
    why = ""
    if outcome is not None:
        status, reason = outcome.get("status"), outcome.get("reason")
        why = "  " + " ".join(str(x) for x in (status, reason) if x is not None)
    return f"{row['state']:<10} {row['url']}{why}"


def add_urls(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("urls", help="list a crawl's URLs and their last outcome (read-only)",
                         description="The crawl's URLs (of a queue, in a state), with how "
                         "their last visit ended, a page at a time.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--queue", help="only this queue's")
    p.add_argument("--status", choices=_STATES, help="only those in this state")
    p.add_argument("--contains", help="only those whose URL contains this")
    p.add_argument("--after", metavar="FINGERPRINT", help="a page after this fingerprint (hex)")
    p.add_argument("--limit", type=int, default=100, help="URLs a page (100)")
    p.add_argument("--json", action="store_true", help="output as JSON lines")
    p.set_defaults(handler=urls)


def urls(args: argparse.Namespace) -> int:
    state = args.status.replace("-", "_") if args.status else None
    try:
        after = bytes.fromhex(args.after) if args.after else None
    except ValueError:
        print(f"crawlstore urls: --after is a fingerprint in hex: {args.after!r}", file=sys.stderr)
        return 2
    with Store.open(args.path, readonly=True) as store:
        rows = [_row(s) for s in store.frontier(crawl=args.crawl).urls(
            queue=args.queue, state=state, contains=args.contains, after=after,
            limit=args.limit)]  # fmt: skip
    for row in rows:
        print(json.dumps(row, sort_keys=True) if args.json else _line(row))
    return 0


def add_url(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("url", help="where one URL stands in a crawl (read-only)")
    p.add_argument("path", help="the store file")
    p.add_argument("url", help="the URL (or its fingerprint, in hex)")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=url)


def url(args: argparse.Namespace) -> int:
    target: str | bytes = args.url
    if "://" not in args.url:
        try:
            target = bytes.fromhex(args.url)
        except ValueError:
            print(f"crawlstore url: neither a URL nor a fingerprint: {args.url!r}",
                  file=sys.stderr)  # fmt: skip
            return 2
    try:
        with Store.open(args.path, readonly=True) as store:
            row = _row(store.frontier(crawl=args.crawl).url(target))
    except ValueError as exc:
        print(f"crawlstore url: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(row, sort_keys=True, indent=1))
    else:
        for key, value in row.items():
            print(f"{key}: {value}")
    return 0


def add_delete_crawl(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("delete-crawl", help="remove a crawl with everything it holds")
    p.add_argument("path", help="the store file")
    p.add_argument("crawl", help="the crawl to remove")
    p.set_defaults(handler=delete_crawl)


def delete_crawl(args: argparse.Namespace) -> int:
    with Store.open(args.path) as store:
        if args.crawl not in store.crawls():
            print(f"crawlstore delete-crawl: {args.path} has no crawl {args.crawl!r}",
                  file=sys.stderr)  # fmt: skip
            return 3
        removed = store.delete_crawl(args.crawl)
    print(f"crawl {args.crawl} removed ({removed:,} URLs)")
    return 0
