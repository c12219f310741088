"""Text files of lines that the command line and the clients read and write: gzip for a name
ending in ``.gz``, stdin or stdout for ``-``."""

from __future__ import annotations

import gzip
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

__all__ = ["open_text"]


@contextmanager
def open_text(path: str | os.PathLike[str], mode: str) -> Iterator[IO[str]]:
    """A text file to read (``mode`` "r") or write ("w"); stdin and stdout are left open
    (stdout flushed)."""
    name = os.fspath(path)
    if name == "-":
        if mode == "r":
            yield sys.stdin
        else:
            try:
                yield sys.stdout
            finally:
                sys.stdout.flush()
        return
    if name.endswith(".gz"):
        with gzip.open(name, "rt" if mode == "r" else "wt", encoding="utf-8") as zipped:
            yield zipped
    else:
        with open(name, mode, encoding="utf-8") as file:
            yield file
