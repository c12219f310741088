"""Verbs that run something of their own: ``demo`` (a crawl killed and resumed, checked),
``bench`` (the benchmark suite of a checkout) and ``torture`` (the crash torture). Each parses
its own arguments."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from ..extras import install_hint

_CHECKOUT = Path(__file__).resolve().parent.parent.parent


def add_demo(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    verbs.add_parser("demo", help="crawl a local site, SIGKILL the crawler, resume, revisit; "
                     "checked", add_help=False)  # fmt: skip


def add_bench(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    verbs.add_parser("bench", help="the benchmark suite (a source checkout's benchmarks/)",
                     add_help=False)  # fmt: skip


def add_torture(verbs: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    verbs.add_parser("torture", help="the crash torture: workers killed with SIGKILL, checked",
                     add_help=False)  # fmt: skip


def bench(argv: list[str]) -> int:
    """Run ``benchmarks`` (``python -m benchmarks``) from the checkout this package is in."""
    if not (_CHECKOUT / "benchmarks" / "__main__.py").is_file():
        print(
            "crawlstore bench runs the benchmark suite of a source checkout, which this "
            f"installation ({_CHECKOUT}) is not: clone the repository, then run\n"
            "  pip install -e '.[bench]' && crawlstore bench --quick",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(_CHECKOUT))
    # by name: the checkout's benchmarks are not part of the package (nor of its type check)
    suite = importlib.import_module("benchmarks.__main__")
    return int(suite.main(argv, prog="crawlstore bench"))


def demo(argv: list[str]) -> int:
    try:
        import httpx  # noqa: F401
        import protego  # noqa: F401
        import selectolax  # noqa: F401
    except ImportError as exc:
        print(f"crawlstore demo needs the crawl extra ({exc.name} is missing): "
              f"{install_hint('crawl')}", file=sys.stderr)  # fmt: skip
        return 2
    from ..demo import main as demo_main

    return demo_main(argv)


def torture(argv: list[str]) -> int:
    from ..torture import main as torture_main

    return torture_main(argv, prog="crawlstore torture")
