"""``crawlstore``: the command line. ``crawlstore bench`` runs the benchmark suite."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = ["main"]

_CHECKOUT = Path(__file__).resolve().parent.parent


def _bench(argv: list[str]) -> int:
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
    from benchmarks.__main__ import main as bench_main

    sys.argv = ["crawlstore bench", *argv]  # the suite reads its own arguments
    bench_main()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="crawlstore", description=__doc__)
    parser.add_argument("command", choices=["bench"], help="bench: the benchmark suite")
    if not args or args[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if args else 2
    command, rest = parser.parse_args(args[:1]).command, args[1:]
    if command == "bench":
        return _bench(rest)
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
