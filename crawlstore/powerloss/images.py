"""Crash images: every state a store's file could be left in by a power loss, from a record of
its writes, under a stated model.

The model (the page cache of one file, as ALICE and CrashMonkey model it):

- A write reaches the disk at some time after it returns, unless a barrier forced it: an
  ``fsync`` or ``fdatasync`` of the file makes every earlier write to it durable; a write
  through an ``O_DSYNC`` descriptor is durable when it returns, with the rest of its pages.
  Files are told apart by path (LMDB writes its meta page through a second descriptor of the
  same file); the lock file is not data.
- Between barriers, any subset of the writes may have reached the disk, each in whole pages
  (4096 bytes); a write that reached it wins over an older one of the same page, as the page
  cache holds only the newest. A sample of images tears one page instead: only some of its
  512-byte sectors reached the disk.
- Truncates take effect at once.

A crash point is a moment just before a barrier of the store file (and the end of the record):
any crash between two barriers leaves an image that a crash just before the second could also
leave, with fewer acknowledgements to keep. At each crash point the builder yields the image
with every pending write, with none, each prefix of them in the order they were made, and a
bounded, seeded sample of subsets and torn pages.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from .record import OPEN, SYNC, TRUNC, WRITE, Op

__all__ = ["PAGE", "SECTOR", "Image", "images"]

PAGE = 4096
SECTOR = 512


@dataclass(frozen=True, slots=True)
class Image:
    """One state the store file could be left in: after ``ops`` calls of the record (the
    acknowledgements made before them count), which of the pending writes it holds (``label``:
    ``all``, ``none``, ``prefix N/M``, ``subset``, ``torn``), and the file's bytes."""

    ops: int
    label: str
    data: bytes


@dataclass(slots=True)
class _Write:
    offset: int
    data: bytes


def _pages(op: Op) -> list[_Write]:
    """A write, cut at page boundaries: the unit that reaches the disk or not."""
    out, at, data = [], op.offset, op.data
    while data:
        take = min(len(data), PAGE - at % PAGE)
        out.append(_Write(at, data[:take]))
        at, data = at + take, data[take:]
    return out


def _apply(base: bytearray, writes: list[_Write]) -> bytes:
    image = bytearray(base)
    for w in writes:
        end = w.offset + len(w.data)
        if end > len(image):
            image.extend(bytes(end - len(image)))
        image[w.offset : end] = w.data
    return bytes(image)


def _torn(base: bytearray, writes: list[_Write], rng: random.Random) -> bytes:
    """Every pending write but one, of which only some sectors reached the disk."""
    victim = rng.randrange(len(writes))
    kept: list[_Write] = []
    for i, w in enumerate(writes):
        if i != victim:
            kept.append(w)
            continue
        for start in range(0, len(w.data), SECTOR):
            if rng.random() < 0.5:
                kept.append(_Write(w.offset + start, w.data[start : start + SECTOR]))
    return _apply(base, kept)


def images(
    ops: list[Op],
    path: str,
    *,
    seed: int = 0,
    subsets: int = 4,
    torn: int = 2,
    prefixes: int = 16,
) -> Iterator[Image]:
    """The crash images of the file at ``path`` from the record ``ops``: at each crash point,
    all, none, up to ``prefixes`` prefixes (evenly spread when there are more), ``subsets``
    random subsets and ``torn`` torn pages, drawn from ``random.Random(seed)``."""
    rng = random.Random(seed)
    files = {op.file: op.data.decode("utf-8", "surrogateescape") for op in ops if op.op == OPEN}
    durable = bytearray()
    pending: list[_Write] = []

    def crash(at: int) -> Iterator[Image]:
        yield Image(at, "all", _apply(durable, pending))
        if not pending:
            return
        yield Image(at, "none", bytes(durable))
        n = len(pending)
        cuts = range(1, n) if n - 1 <= prefixes else sorted(rng.sample(range(1, n), prefixes))
        for cut in cuts:
            yield Image(at, f"prefix {cut}/{n}", _apply(durable, pending[:cut]))
        for _ in range(subsets if n > 1 else 0):
            yield Image(at, "subset", _apply(durable, [w for w in pending if rng.random() < 0.5]))
        for _ in range(torn):
            yield Image(at, "torn", _torn(durable, pending, rng))

    for at, op in enumerate(ops):
        if files.get(op.file) != path:
            continue
        if op.op == WRITE:
            if op.dsync:
                # the disk gets the whole pages of the write, from the page cache: with them,
                # what earlier writes put in those pages
                pages = {w.offset // PAGE for w in _pages(op)}
                same = [w for w in pending if w.offset // PAGE in pages]
                durable[:] = _apply(durable, [*same, *_pages(op)])
                pending[:] = [w for w in pending if w.offset // PAGE not in pages]
            else:
                pending.extend(_pages(op))
        elif op.op == SYNC:
            yield from crash(at)
            durable[:] = _apply(durable, pending)
            pending.clear()
        elif op.op == TRUNC:
            del durable[op.offset :]
            if len(durable) < op.offset:
                durable.extend(bytes(op.offset - len(durable)))
    yield from crash(len(ops))
