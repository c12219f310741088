"""``crawlstore`` (also ``python -m crawlstore``): the command line.

Every verb has ``--help``. Output that is data has ``--json``. Errors go to stderr. Exit
codes: 0 done, 1 a check found problems, 2 a usage error, 3 the store could not be used (not
a store, missing, damaged, read-only ...).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from ..errors import CrawlstoreError
from . import (
    crawl,
    dashboard,
    exchange,
    frontier,
    inspect,
    maintain,
    peek,
    queues,
    run,
    serve,
    urls,
)

__all__ = ["main"]

#: Exit codes.
OK, PROBLEMS, USAGE, STORE = 0, 1, 2, 3

_VERBS: list[Callable[[argparse._SubParsersAction], None]] = [  # type: ignore[type-arg]
    inspect.add_stats,
    inspect.add_verify,
    inspect.add_canon,
    peek.add_peek,
    queues.add_queues,
    queues.add_queue,
    queues.add_delete_queue,
    urls.add_urls,
    urls.add_url,
    urls.add_delete_crawl,
    exchange.add_seed,
    exchange.add_export,
    exchange.add_import,
    maintain.add_backup,
    maintain.add_reclaim,
    maintain.add_migrate,
    crawl.add_crawl,
    serve.add_serve,
    dashboard.add_dashboard,
    frontier.add_frontier,
    run.add_demo,
    run.add_bench,
    run.add_torture,
]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="crawlstore",
        description="The crawl state of a Python crawler, in one file.",
        epilog="exit codes: 0 done, 1 a check found problems, 2 usage, 3 the store failed",
    )
    verbs = top.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for add in _VERBS:
        add(verbs)
    return top


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    top = parser()
    own = {"demo": run.demo, "bench": run.bench, "torture": run.torture}
    if args and args[0] in own:  # they parse their own arguments
        return own[args[0]](args[1:])
    try:
        parsed = top.parse_args(args)
    except SystemExit as exit_:  # argparse: --help (0) or a usage error (2)
        return int(exit_.code or 0)
    try:
        code: int = parsed.handler(parsed)
    except CrawlstoreError as exc:
        print(f"crawlstore {parsed.verb}: {exc}", file=sys.stderr)
        return STORE
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OK
    except OSError as exc:
        print(f"crawlstore {parsed.verb}: {exc}", file=sys.stderr)
        return STORE
    except KeyboardInterrupt:
        return 130
    return code
