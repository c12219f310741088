"""``import --from-jobdir``: what a stopped Scrapy job would resume (its queued requests and
the fingerprints its dupefilter saw) into a new crawl. Needs the ``scrapy`` extra."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict

from ..errors import JobdirError
from ..extras import install_hint
from .target import import_target


def load_jobdir(args: argparse.Namespace) -> int:
    try:
        from ..scrapy.jobdir import import_jobdir
    except ImportError as exc:
        print(f"crawlstore import: --from-jobdir needs Scrapy: {install_hint('scrapy')} "
              f"({exc.__cause__ or exc})", file=sys.stderr)  # fmt: skip
        return 2
    warnings = logging.StreamHandler(sys.stderr)
    warnings.setFormatter(logging.Formatter("crawlstore import: %(message)s"))
    logger = logging.getLogger("crawlstore.scrapy")
    logger.addHandler(warnings)
    logger.propagate = False
    try:
        with import_target(args.path) as store:
            done = import_jobdir(store, args.from_jobdir, crawl=args.crawl or "default")
    except JobdirError as exc:
        print(f"crawlstore import: {exc}; nothing was imported", file=sys.stderr)
        return 3
    finally:
        logger.removeHandler(warnings)
        logger.propagate = True
    if args.json:
        json.dump({"path": args.path, "jobdir": args.from_jobdir, **asdict(done)}, sys.stdout,
                  sort_keys=True)  # fmt: skip
        sys.stdout.write("\n")
    else:
        print(f"{args.path}: crawl {done.crawl}: {done.queued:,} requests queued from "
              f"{args.from_jobdir}, {done.fingerprints:,} fingerprints in its seen set; "
              f"{done.skipped:,} skipped, {done.duplicates:,} duplicates")  # fmt: skip
    return 0
