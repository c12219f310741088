"""Verbs that read: ``stats`` (and ``stats --watch``, a live view), ``verify``, ``canon``.
``stats`` opens the store read-only, so it works while a crawl writes to it."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from dataclasses import asdict
from typing import Any

from ..frontier.protocol import Stats
from ..store import Store, verify
from ..url import explain, fingerprint
from .queues import more_line, positive_int, queue_line, queue_page, queue_row


def _json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


def _bytes(n: int) -> str:
    """A size for people: 512 B, 44.0 KiB, 4.8 MiB, 1.2 GiB."""
    if n < 1024:
        return f"{n} B"
    size, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:,.1f} {unit}"


# -- stats ----------------------------------------------------------------------------------------


def add_stats(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("stats", help="counts per state and crawl, file size (read-only)",
                         description="Counts of each crawl (or of --crawl); the file's format "
                         "and size, and how much of it holds records (the rest is free pages, "
                         "reused before the file grows); with --queues, each queue's counts, a "
                         "page of --limit queues. Opens the store read-only: safe while a crawl "
                         "writes to it.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", help="only this crawl")
    p.add_argument("--queues", action="store_true", help="each queue's counts too")
    p.add_argument("--after", metavar="KEY", help="queues after this key (paging)")
    p.add_argument("--limit", type=positive_int, default=100, metavar="N",
                   help="queues a page, with --queues (100)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="output as JSON (lines, with --watch)")
    watch = p.add_argument_group("a live view of a running crawl")
    watch.add_argument("--watch", action="store_true",
                       help="refresh every --interval seconds until Ctrl-C: pages done a second "
                       "over the last interval, done, queued, in flight, scheduled, errors "
                       "(failed + retried); a live table with rich on a terminal, else a line "
                       "an interval")  # fmt: skip
    watch.add_argument(
        "--interval", type=_interval, default=1.0, metavar="S", help="seconds between refreshes (1)"
    )
    watch.add_argument("--count", type=_refreshes, metavar="K", help="stop after K refreshes")
    p.set_defaults(handler=stats)


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"more than 0 seconds: {text!r}")
    return value


def _refreshes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"1 or more: {text!r}")
    return value


def stats(args: argparse.Namespace) -> int:
    if args.watch:
        return watch(args)
    if args.count is not None:
        print("crawlstore stats: --count goes with --watch", file=sys.stderr)
        return 2
    with Store.open(args.path, readonly=True) as store:
        crawls = store.crawls()
        names = [args.crawl] if args.crawl else crawls
        if args.crawl and args.crawl not in crawls:
            print(f"crawlstore stats: {args.path} has no crawl {args.crawl!r}", file=sys.stderr)
            return 3
        out: dict[str, Any] = {"path": store.location, "format": store.meta.get("format"),
                               **_sizes(store), "crawls": {}}  # fmt: skip
        for name in names:
            frontier = store.frontier(crawl=name)
            crawl: dict[str, Any] = {"stats": asdict(frontier.stats())}
            if args.queues:
                crawl["queues"], crawl["queues_next"] = queue_page(frontier, args.after,
                                                                   args.limit)  # fmt: skip
            out["crawls"][name] = crawl
        now = store.clock()
    if args.json:
        for crawl in out["crawls"].values():
            if "queues" in crawl:
                crawl["queues"] = [queue_row(q) for q in crawl["queues"]]
        _json(out)
        return 0
    print(_file_line(out))
    for name, crawl in out["crawls"].items():
        s = crawl["stats"]
        refused = ", ".join(f"{k} {v:,}" for k, v in sorted(s["refused"].items())) or "none"
        print(f"crawl {name}: queued {s['queued']:,}, in flight {s['in_flight']:,}, "
              f"scheduled {s['scheduled']:,}; admitted {s['admitted']:,}, done {s['done']:,}, "
              f"failed {s['failed']:,}, retried {s['retried']:,}, skipped {s['skipped']:,}; "
              f"refused: {refused}")  # fmt: skip
        for q in crawl.get("queues", []):
            print("  " + queue_line(q, now))
        if crawl.get("queues_next") is not None:
            print("  " + more_line("queues", args.limit, crawl["queues_next"]))
    return 0


def _file_line(out: dict[str, Any]) -> str:
    """The store's line: its format; a file's size, what of it holds records, what is free."""
    line = f"{out['path']}: format {out['format']}"
    if out["file_bytes"] is None:  # a store on a server
        return line
    return (f"{line}, {_bytes(out['file_bytes'])} file: {_bytes(out['used_bytes'])} of "
            f"records, {_bytes(out['free_bytes'])} of free pages (reused before the file "
            "grows; a backup leaves them out)")  # fmt: skip


def _sizes(store: Store) -> dict[str, int | None]:
    """The store file's size, the bytes of it that hold records and the free ones (None for a
    store on a server)."""
    if "://" in store.location:
        return {"file_bytes": None, "used_bytes": None, "free_bytes": None}
    size = os.path.getsize(store.path)
    used = min(store.records_size(), size)
    return {"file_bytes": size, "used_bytes": used, "free_bytes": size - used}


def _watched(store: Store, only: str | None) -> dict[str, Stats]:
    """Each watched crawl's stats, read now (every crawl, as the store holds them now)."""
    names = [only] if only else store.crawls()
    return {name: store.frontier(crawl=name).stats() for name in names}


def _watch_rows(before: dict[str, Stats], after: dict[str, Stats], seconds: float,
                at: float) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    for name, s in after.items():
        done_before = before[name].done if name in before else s.done
        rows.append({"time": at, "crawl": name, "rate": (s.done - done_before) / seconds,
                     "done": s.done, "queued": s.queued, "in_flight": s.in_flight,
                     "scheduled": s.scheduled, "errors": s.failed + s.retried})  # fmt: skip
    return rows


def _watch_line(row: dict[str, Any]) -> str:
    clock = time.strftime("%H:%M:%S", time.localtime(row["time"]))
    return (f"{clock} crawl {row['crawl']}: {row['rate']:,.1f} pages/s, done {row['done']:,}, "
            f"queued {row['queued']:,}, in flight {row['in_flight']:,}, scheduled "
            f"{row['scheduled']:,}, errors {row['errors']:,}")  # fmt: skip


def _watch_table(rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title=time.strftime("%H:%M:%S"), title_justify="left")
    table.add_column("crawl")
    for column in ("pages/s", "done", "queued", "in flight", "scheduled", "errors"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(r["crawl"], f"{r['rate']:,.1f}", f"{r['done']:,}", f"{r['queued']:,}",
                      f"{r['in_flight']:,}", f"{r['scheduled']:,}", f"{r['errors']:,}")  # fmt: skip
    return table


def _rich_live() -> Any:
    """A rich ``Live`` for a terminal, or None (no terminal, or rich not installed: the
    ``cli`` extra brings it)."""
    if not sys.stdout.isatty():
        return None
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        return None
    return Live(console=Console(file=sys.stdout), auto_refresh=False)


def watch(args: argparse.Namespace) -> int:
    """``stats --watch``: every ``--interval`` seconds, what changed since the last refresh;
    Ctrl-C (or ``--count`` refreshes) ends it, as done (exit 0)."""
    with Store.open(args.path, readonly=True) as store:
        if args.crawl and args.crawl not in store.crawls():
            print(f"crawlstore stats: {args.path} has no crawl {args.crawl!r}", file=sys.stderr)
            return 3
        live = None if args.json else _rich_live()
        try:
            with live if live is not None else contextlib.nullcontext():
                before, then = _watched(store, args.crawl), time.monotonic()
                refreshes = 0
                while args.count is None or refreshes < args.count:
                    time.sleep(args.interval)
                    after, now = _watched(store, args.crawl), time.monotonic()
                    rows = _watch_rows(before, after, max(now - then, 1e-9), time.time())
                    before, then = after, now
                    refreshes += 1
                    if live is not None:
                        live.update(_watch_table(rows), refresh=True)
                        continue
                    for row in rows:
                        print(json.dumps(row, sort_keys=True) if args.json else _watch_line(row))
                    sys.stdout.flush()
        except KeyboardInterrupt:
            pass  # how a watch ends
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
    if "://" in args.path:
        print(f"crawlstore verify: checks a store file; {args.path} is a store on a server "
              "(its server checks its own data)", file=sys.stderr)  # fmt: skip
        return 2
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
    p = verbs.add_parser("canon", help="the canonical form and fingerprint of URLs, and why",
                         description="The canonical form of each URL (what dedup compares), "
                         "the fingerprint of a GET of it, and each rule that changed a part of "
                         "it on the way (none for a URL that is canonical already).")  # fmt: skip
    p.add_argument("urls", nargs="+", metavar="URL")
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="only the fingerprint and canonical form, one line a URL",
    )
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=canon)


def _shown(value: str | None) -> str:
    return "(none)" if value is None else repr(value)


def canon(args: argparse.Namespace) -> int:
    out, failed = [], False
    for url in args.urls:
        try:
            explained = explain(url)
        except ValueError as exc:
            failed = True
            out.append({"url": url, "error": str(exc)})
            if not args.json:
                print(f"crawlstore canon: {exc}", file=sys.stderr)
            continue
        out.append({"url": url, "canonical": explained.canonical,
                    "fingerprint": fingerprint("GET", url).hex(),
                    "steps": [asdict(step) for step in explained.steps]})  # fmt: skip
    if args.json:
        _json(out)
    else:
        for row in out:
            if "error" in row:
                continue
            print(f"{row['fingerprint']}  {row['canonical']}")
            if args.quiet:
                continue
            for step in row["steps"]:
                print(f"  {step['rule']}: {step['part']} {_shown(step['before'])} -> "
                      f"{_shown(step['after'])}")  # fmt: skip
    return 2 if failed else 0
