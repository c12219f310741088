"""Files of lines that the command line and the clients read and write, stdin or stdout for
``-``: one read is gzip when its first bytes are gzip's (whatever its name), one written is gzip
when its name ends in ``.gz``."""

from __future__ import annotations

import gzip
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["open_bytes", "open_text"]

#: The first bytes of every gzip stream (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"


class _Rejoined(io.RawIOBase):
    """A binary stream whose first bytes were read ahead, put back in front of the rest."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        super().__init__()
        self._head = head
        self._read = getattr(rest, "read1", rest.read)  # what is there, without waiting for more

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        out = memoryview(buffer).cast("B")
        if self._head:
            count = min(len(out), len(self._head))
            out[:count], self._head = self._head[:count], self._head[count:]
            return count
        data: bytes = self._read(len(out))
        out[: len(data)] = data
        return len(data)


@contextmanager
def open_bytes(path: str | os.PathLike[str]) -> Iterator[gzip.GzipFile | io.BufferedReader]:
    """The bytes of a file, or of stdin for ``-`` (left open), decompressed when they start
    as gzip does."""
    name = os.fspath(path)
    with open(name, "rb") if name != "-" else nullcontext(sys.stdin.buffer) as raw:
        head = raw.read(len(GZIP_MAGIC))  # fewer only at the end
        source: io.BufferedReader = io.BufferedReader(_Rejoined(head, raw))
        yield gzip.GzipFile(fileobj=source, mode="rb") if head == GZIP_MAGIC else source


@contextmanager
def open_text(path: str | os.PathLike[str], mode: str) -> Iterator[IO[str]]:
    """A text file to read (``mode`` "r") or write ("w"), UTF-8; stdin and stdout are left
    open (stdout flushed)."""
    name = os.fspath(path)
    if mode == "r":
        with open_bytes(name) as source:
            yield io.TextIOWrapper(source, encoding="utf-8")
        return
    if name == "-":
        try:
            yield sys.stdout
        finally:
            sys.stdout.flush()
        return
    if name.endswith(".gz"):
        with gzip.open(name, "wt", encoding="utf-8") as zipped:
            yield zipped
    else:
        with open(name, "w", encoding="utf-8") as file:
            yield file
