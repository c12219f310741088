"""Verbs that move a crawl in and out: ``export`` and ``import`` (the store's versioned record
stream as strict JSON lines, in bounded memory; written gzip by suffix, read gzip by its first
bytes) and ``seed`` (URLs pushed through dedup)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidSnapshot
from ..seed import Seed
from ..store import Store
from ..textfiles import open_text
from . import jobdir
from .bar import progress
from .exportfile import ExportFile, read_export, to_line
from .target import import_target

#: Pushed a transaction by ``seed``, records a transaction by ``import`` (the store's own).
_BATCH = 1000


# -- export / import ------------------------------------------------------------------------------


def add_export(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("export", help="a crawl as JSON lines (gzip by suffix)",
                         description="Write a crawl (its frontier in every state, seen set, "
                         "validators, counters) as versioned JSON lines, read from one snapshot "
                         "while crawls go on writing.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("-o", "--output", default="-", help="a file (.gz: gzip), or - for stdout")
    p.set_defaults(handler=export)


def export(args: argparse.Namespace) -> int:
    with Store.open(args.path, readonly=True) as store:
        if args.crawl not in store.crawls():
            print(f"crawlstore export: {args.path} has no crawl {args.crawl!r}", file=sys.stderr)
            return 3
        total = store.frontier(crawl=args.crawl).count()
        with open_text(args.output, "w") as out, progress(f"export {args.crawl}", total) as advance:
            for record in store.export(crawl=args.crawl):
                out.write(to_line(record) + "\n")
                advance(record.get("type") == "url")
    return 0


def add_import(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("import", help="load an export into a crawl that holds nothing yet",
                         description="Load JSON lines written by 'crawlstore export' "
                         "into a crawl (the export's name, or --crawl) that holds nothing "
                         "yet; or, with --from-jobdir, what a stopped Scrapy job would "
                         "resume.")  # fmt: skip
    p.add_argument("path", help="the store file (created if missing)")
    p.add_argument("dump", nargs="?", help="the export (gzip or not), or - for stdin")
    p.add_argument("--crawl", help="load into this crawl (default: the export's name, or "
                   "'default' for a JOBDIR)")  # fmt: skip
    p.add_argument("--from-jobdir", metavar="DIR", help="instead of an export, what a stopped "
                   "Scrapy job would resume (needs crawlstore[scrapy])")  # fmt: skip
    p.add_argument("--json", action="store_true", help="output as JSON (with --from-jobdir)")
    p.set_defaults(handler=load)


def _records(dump: ExportFile) -> Iterator[dict[str, Any]]:
    with progress(f"import {dump.path}") as advance:
        for record in dump.records():
            advance(1)
            yield record


def load(args: argparse.Namespace) -> int:
    if (args.dump is None) == (args.from_jobdir is None):
        print("crawlstore import: give an export or --from-jobdir DIR (one of the two)",
              file=sys.stderr)  # fmt: skip
        return 2
    if args.from_jobdir is not None:
        return jobdir.load_jobdir(args)
    if args.json:
        print("crawlstore import: --json goes with --from-jobdir", file=sys.stderr)
        return 2
    with read_export(args.dump) as dump:
        try:
            with import_target(args.path) as store:
                name = store.load(_records(dump), crawl=args.crawl)
        except InvalidSnapshot as exc:
            where = "stdin" if args.dump == "-" else args.dump
            if exc.record is not None:
                where += f", line {dump.line_of(exc.record)}"
            print(f"crawlstore import: {where}: {exc}", file=sys.stderr)
            return 3
    print(f"{args.path}: crawl {name} loaded from {args.dump}")
    return 0


# -- seed -----------------------------------------------------------------------------------------


def add_seed(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("seed", help="push URLs from a file or stdin, through dedup",
                         description="Push each URL (one a line; blank lines and lines "
                         "starting with # are skipped) into the crawl, through its exact seen "
                         "set.")  # fmt: skip
    p.add_argument("path", help="the store file (created if missing)")
    p.add_argument("file", help="a file of URLs, or - for stdin")
    p.add_argument("--crawl", default="default", help="the crawl (default: 'default')")
    p.add_argument("--tag", help="tag every seed")
    p.add_argument("--priority", type=int, default=0, help="priority of every seed (0)")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=seed)


def seed(args: argparse.Namespace) -> int:
    counts = {"admitted": 0, "refused": 0, "invalid": 0}
    with open_text(args.file, "r") as source, Store.open(args.path) as store:
        frontier = store.frontier(crawl=args.crawl).dedup_with(store.seen(crawl=args.crawl))
        batch: list[Seed] = []
        for number, line in enumerate(source, 1):
            url = line.strip()
            if not url or url.startswith("#"):
                continue
            try:
                one = Seed.get(url)
            except ValueError as exc:
                counts["invalid"] += 1
                print(f"crawlstore seed: line {number}: {exc}", file=sys.stderr)
                continue
            if args.tag is not None:
                one = one.with_tag(args.tag)
            if args.priority:
                one = one.with_priority(args.priority)
            batch.append(one)
            if len(batch) >= _BATCH:
                _push(store, frontier, batch, counts)
        _push(store, frontier, batch, counts)
    if args.json:
        json.dump(counts, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print(f"admitted {counts['admitted']:,}, refused {counts['refused']:,}, "
              f"not URLs {counts['invalid']:,}")  # fmt: skip
    return 2 if counts["invalid"] else 0


def _push(store: Store, frontier: Any, batch: list[Seed], counts: dict[str, int]) -> None:
    if batch:
        with store.transaction():
            admissions = frontier.push_many(batch)
        admitted = sum(1 for a in admissions if a)
        counts["admitted"] += admitted
        counts["refused"] += len(admissions) - admitted
        batch.clear()
