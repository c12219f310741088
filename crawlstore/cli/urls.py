"""Verbs over a crawl's URLs: ``urls`` (a page of them, filtered on their state and last
outcome), ``url`` (where one stands), ``delete-crawl``."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Any

from ..frontier.protocol import OUTCOMES, STATES, URLStatus
from ..store import Store
from . import when
from .queues import ONE_QUEUE, more_line, positive_int


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
    """A URL in one line: its state, the URL, and how its last visit ended when that says more
    than its state (``scheduled  URL  failed 404``)."""
    outcome = row["outcome"]
    why = []
    if outcome is not None:
        if outcome["state"] != row["state"]:
            why.append(outcome["state"])
        why += [str(x) for x in (outcome["status"], outcome["reason"]) if x is not None]
    return f"{row['state']:<10} {row['url']}" + ("  " + " ".join(why) if why else "")


def _http_status(text: str) -> int:
    try:
        code = int(text)
    except ValueError:
        code = 0
    if not 100 <= code <= 599:
        raise argparse.ArgumentTypeError(f"an HTTP status code, 100 to 599: {text!r}")
    return code


def add_urls(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("urls", help="list a crawl's URLs and their last outcome (read-only)",
                         description="The crawl's URLs with their state and how their last "
                         "visit ended, a page at a time in fingerprint order; each filter "
                         "given keeps only the URLs it matches. A page cut by --limit ends "
                         "with the --after that shows the next.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--queue", help="only this queue's")
    p.add_argument("--status", choices=STATES, help="only those in this state now")
    p.add_argument("--outcome", choices=OUTCOMES,
                   help="only those whose last visit ended so, whatever their state now (a "
                   "failed page a crawl revisits is scheduled)")  # fmt: skip
    p.add_argument("--http-status", type=_http_status, metavar="N",
                   help="only those whose last visit ended with this status code")  # fmt: skip
    p.add_argument("--reason", metavar="R",
                   help="only those whose last visit ended with exactly this reason")  # fmt: skip
    p.add_argument("--contains", metavar="S", help="only those whose URL contains this")
    p.add_argument("--after", metavar="FINGERPRINT", help="a page after this fingerprint (hex)")
    p.add_argument("--limit", type=positive_int, default=100, metavar="N",
                   help="URLs a page, 1 or more (100)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="output as JSON lines")
    p.set_defaults(handler=urls)


def urls(args: argparse.Namespace) -> int:
    try:
        after = bytes.fromhex(args.after) if args.after else None
    except ValueError:
        print(f"crawlstore urls: --after is a fingerprint in hex: {args.after!r}", file=sys.stderr)
        return 2
    with Store.open(args.path, readonly=True) as store:
        page = store.frontier(crawl=args.crawl).urls(
            queue=args.queue, state=args.status, contains=args.contains, outcome=args.outcome,
            http_status=args.http_status, reason=args.reason, after=after,
            limit=args.limit + 1)  # fmt: skip
    for status in page[: args.limit]:
        row = _row(status)
        print(json.dumps(row, sort_keys=True) if args.json else _line(row))
    if len(page) > args.limit:  # the page was cut: say how to see the rest
        last = page[args.limit - 1].fingerprint.hex()
        print(more_line("URLs", args.limit, last), file=sys.stderr if args.json else sys.stdout)
    return 0


def add_url(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("url", help="where one URL stands in a crawl (read-only)",
                         description="Where one URL (or fingerprint) stands in the crawl: its "
                         "state, queue, when it is due or its lease ends, when it was first "
                         "admitted, and how its last visit ended. Times are in local time "
                         "(epoch seconds with --json).")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("url", help="the URL (or its fingerprint, in hex)")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=url)


def _url_lines(status: URLStatus, now: float) -> list[str]:
    """``url``'s text: a line a field that applies, times in local time."""
    lines = [f"url: {status.url}"] if status.url else []
    lines += [f"fingerprint: {status.fingerprint.hex()}", f"state: {status.state}"]
    if status.state == "unknown":
        return [*lines[:-1], "state: unknown (the crawl holds no such URL)"]
    if status.queue is not None:
        lines.append(f"queue: {status.queue or ONE_QUEUE}")
    if status.at is not None:
        lines.append(f"{'due' if status.state == 'scheduled' else 'lease ends'}: "
                     f"{when.shown(status.at, now)}")  # fmt: skip
    if status.kind is not None:
        lines.append(f"scheduled for: {status.kind}")
    if status.created is not None:
        lines.append(f"created: {when.shown(status.created, now)}")
    outcome = status.outcome
    if outcome is None:
        lines.append("last outcome: none (not visited yet)")
    else:
        said = [f"status {outcome.status}"] if outcome.status is not None else []
        said += [f"reason {outcome.reason!r}"] if outcome.reason is not None else []
        lines.append(f"last outcome: {outcome.state}, {when.shown(outcome.at, now)}"
                     + "".join(f", {x}" for x in said))  # fmt: skip
    return lines


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
            frontier = store.frontier(crawl=args.crawl)
            status, now = frontier.url(target), frontier.clock()
    except ValueError as exc:
        print(f"crawlstore url: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(_row(status), sort_keys=True, indent=1))
    else:
        print("\n".join(_url_lines(status, now)))
    return 0


def add_delete_crawl(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("delete-crawl", help="remove a crawl with everything it holds",
                         description="Remove the crawl with everything it holds: its "
                         "frontier, seen set, validators and counters.")  # fmt: skip
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
