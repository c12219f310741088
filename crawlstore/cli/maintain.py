"""Verbs that change or copy a store: ``backup``, ``reclaim``, ``migrate``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..errors import OlderFormat
from ..storages import REDIS_SCHEMES
from ..store import Store


def add_backup(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser("backup", help="a consistent copy, while a crawl runs",
                         description="Write a consistent copy of what is committed to OUT "
                         "(never overwritten) while crawls go on writing.")  # fmt: skip
    p.add_argument("path", help="the store file")
    p.add_argument("out", help="the copy to write (must not exist)")
    p.add_argument("--compact", action=argparse.BooleanOptionalAction, default=True,
                   help="only the records, in full pages (the default); --no-compact: "
                   "LMDB's page-for-page copy")  # fmt: skip
    p.set_defaults(handler=backup)


def backup(args: argparse.Namespace) -> int:
    with Store.open(args.path) as store:
        store.backup(args.out, compact=args.compact)
    print(f"{args.out}: a copy of {args.path}")
    return 0


def add_reclaim(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser(
        "reclaim",
        help="queue again the seeds of expired or orphaned leases",
        description="Put back in their queues the seeds whose lease expired or whose holder "
        "process is gone, in every crawl (or --crawl).",
    )
    p.add_argument("path", help="the store file")
    p.add_argument("--crawl", help="only this crawl")
    p.add_argument("--json", action="store_true", help="output as JSON")
    p.set_defaults(handler=reclaim)


def reclaim(args: argparse.Namespace) -> int:
    with Store.open(args.path) as store:
        names = [args.crawl] if args.crawl else store.crawls()
        counts = {name: store.frontier(crawl=name).reap() for name in names}
    if args.json:
        json.dump(counts, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        for name, n in counts.items():
            print(f"crawl {name}: {n} seed{'s' * (n != 1)} queued again")
    return 0


def add_migrate(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = verbs.add_parser(
        "migrate",
        help="rewrite a store of an older format in the current one",
        description="Rewrite a store of an older format or fingerprint version in the current "
        "one. A file: the old file is kept beside it (PATH.v1, PATH.v2, PATH.v3, PATH.fp1), "
        "and a writable open migrates by itself too. A store on Redis (redis://...) of "
        "format 2: its crawls' indexes written in place; of format 1: moved to format 3 in "
        "its own namespace, each crawl's export kept in a directory (--keep). Stop its "
        "clients first (one of format 1 left running fails at its next write; one that opens "
        "the store meanwhile is refused). Run it again to finish a migration that stopped. A "
        "store in the current format is left as it is (exit 0).",
    )
    p.add_argument("path", help="the store file, or a Redis URL")
    p.add_argument("--keep", metavar="DIR", help="a store on Redis: the new directory for "
                   "its crawls' exports (default: NS.format1 here)")  # fmt: skip
    p.set_defaults(handler=migrate)


def _current(path: str) -> dict[str, Any] | None:
    """The file's meta when it is in this crawlstore's format already (a read-only open
    reads it), None when it is older."""
    try:
        with Store.open(path, readonly=True) as store:
            return store.meta
    except OlderFormat:
        return None


def migrate(args: argparse.Namespace) -> int:
    from ..store import migrate as rewrite

    if args.path.partition("://")[0] in REDIS_SCHEMES:
        return _move(args.path, args.keep)
    if args.keep is not None:
        print("crawlstore migrate: --keep goes with a store on Redis (a file's old copy is "
              "kept beside it)", file=sys.stderr)  # fmt: skip
        return 2

    meta = _current(args.path)
    if meta is not None:
        print(f"{args.path}: in the current format already (format {meta.get('format')}, "
              f"fingerprint version {meta.get('fingerprint')}): nothing to migrate, nothing "
              "changed")  # fmt: skip
        return 0
    kept = rewrite(args.path)
    print(f"{args.path}: migrated; the old file is kept as {kept}")
    return 0


def _move(url: str, keep: str | None) -> int:
    from ..admin.redis_move import move_redis_store

    moved = move_redis_store(url, keep)
    if moved.crawls is None:
        print(f"{url}: in the current format already (format 3): nothing to migrate, "
              "nothing changed")  # fmt: skip
        return 0
    crawls = f"{len(moved.crawls)} crawls: {', '.join(moved.crawls) or 'none'}"
    if moved.kept is None:
        print(f"{url}: migrated to format 3 in place ({crawls}): their indexes written")
        return 0
    print(f"{url}: moved to format 3 ({crawls}); their exports in format 1 are kept in "
          f"{moved.kept}")  # fmt: skip
    return 0
