"""Verbs that read: ``stats``, ``verify``, ``canon``. ``stats`` opens the store read-only, so it
works while a crawl writes to it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import Any

from ..store import Store, verify
from ..url import canonicalize, fingerprint


def _json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


# -- stats ----------------------------------------------------------------------------------------


def add_stats(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("stats", help="counts per state and crawl, file size (read-only)",
                         description="Counts of each crawl (or of --crawl), the file's size and "
                         "fill, its format; with --queues, each queue's. Opens the store "
                         "read-only: safe while a crawl writes to it.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", help="only this crawl")
    p.add_argument("--queues", action="store_true", help="each queue's counts too")
    p.add_argument("--after", metavar="KEY", help="queues after this key (paging)")
    p.add_argument("--limit", type=int, default=100, help="queues a page (100)")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=stats)


def stats(args: argparse.Namespace) -> int:
    with Store.open(args.path, readonly=True) as store:
        crawls = store.crawls()
        names = [args.crawl] if args.crawl else crawls
        if args.crawl and args.crawl not in crawls:
            print(f"crawlstore stats: {args.path} has no crawl {args.crawl!r}", file=sys.stderr)
            return 3
        size, used = os.path.getsize(args.path), store.file_size()
        out: dict[str, Any] = {"path": str(store.path), "format": store.meta.get("format"),
                               "file_bytes": size, "used_bytes": used, "crawls": {}}  # fmt: skip
        for name in names:
            frontier = store.frontier(crawl=name)
            crawl: dict[str, Any] = {"stats": asdict(frontier.stats())}
            if args.queues:
                queues = frontier.queues(after=args.after, limit=args.limit)
                crawl["queues"] = [asdict(q) for q in queues]
            out["crawls"][name] = crawl
    if args.json:
        _json(out)
        return 0
    fill = f" ({used / size:.0%} used)" if size else ""
    print(f"{out['path']}: format {out['format']}, {_mib(size)} file{fill}")
    for name, crawl in out["crawls"].items():
        s = crawl["stats"]
        refused = ", ".join(f"{k} {v:,}" for k, v in sorted(s["refused"].items())) or "none"
        print(f"crawl {name}: queued {s['queued']:,}, in flight {s['in_flight']:,}, "
              f"scheduled {s['scheduled']:,}; admitted {s['admitted']:,}, done {s['done']:,}, "
              f"failed {s['failed']:,}, retried {s['retried']:,}, skipped {s['skipped']:,}; "
              f"refused: {refused}")  # fmt: skip
        for q in crawl.get("queues", []):
            print(f"  {q['key'] or '(the one queue)'}: queued {q['queued']:,}, in flight "
                  f"{q['in_flight']:,}, scheduled {q['scheduled']:,}")  # fmt: skip
    return 0


# -- verify ---------------------------------------------------------------------------------------


def add_verify(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("verify", help="check the file: pages, records, counters",
                         description="Check LMDB's pages, then every record and counter. "
                         "Exit 1 with the list of problems when anything is off.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=verify_file)


def verify_file(args: argparse.Namespace) -> int:
    if not os.path.exists(args.path):
        print(f"crawlstore verify: {args.path} does not exist", file=sys.stderr)
        return 3
    problems = verify(args.path)
    if args.json:
        _json({"path": args.path, "ok": not problems, "problems": problems})
    else:
        for problem in problems:
            print(problem)
        count = len(problems)
        print(f"{args.path}: " + ("ok" if not count else
                                  f"{count} problem{'s' * (count != 1)}"))  # fmt: skip
    return 1 if problems else 0


# -- canon ----------------------------------------------------------------------------------------


def add_canon(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("canon", help="the canonical form and fingerprint of URLs",
                         description="The canonical form of each URL (what dedup compares) and "
                         "the fingerprint of a GET of it.")  # fmt: skip
    p.add_argument("urls", nargs="+", metavar="URL")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=canon)


def canon(args: argparse.Namespace) -> int:
    out, failed = [], False
    for url in args.urls:
        try:
            out.append({"url": url, "canonical": canonicalize(url),
                        "fingerprint": fingerprint("GET", url).hex()})  # fmt: skip
        except ValueError as exc:
            failed = True
            out.append({"url": url, "error": str(exc)})
            if not args.json:
                print(f"crawlstore canon: {exc}", file=sys.stderr)
    if args.json:
        _json(out)
    else:
        for row in out:
            if "error" not in row:
                print(f"{row['fingerprint']}  {row['canonical']}")
    return 2 if failed else 0
