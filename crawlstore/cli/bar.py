"""A progress bar on stderr for long verbs (``export``, ``import``): drawn with rich when stderr
is a terminal and rich is installed (the crawl extra has it), nothing otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress(what: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """``advance(n)`` moves the bar on by ``n`` records (of ``total``, when known)."""
    if not sys.stderr.isatty():
        yield lambda n: None
        return
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:
        yield lambda n: None
        return
    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=total)
        yield lambda n: bar.advance(task, n)
