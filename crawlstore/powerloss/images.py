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
- Truncates take effect at once. A name a ``link`` or ``rename`` made, or that the first open
  of a file created, survives once its directory is synced (or, for a created file, once the
  file is).

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

from .record import LINK, OPEN, RENAME, SYNC, TRUNC, WRITE, Op

__all__ = ["PAGE", "SECTOR", "Image", "images"]

PAGE = 4096
SECTOR = 512


@dataclass(frozen=True, slots=True)
class Image:
    """One state the store file could be left in: after ``ops`` calls of the record (the
    acknowledgements made before them count), which of the pending writes it holds (``label``:
    ``all``, ``none``, ``prefix N/M``, ``subset``, ``torn``, ``no file``), and the file's
    bytes (None: there is no file)."""

    ops: int
    label: str
    data: bytes | None


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
    random subsets and ``torn`` torn pages, drawn from ``random.Random(seed)``. A name that a
    ``link`` or ``rename`` made is durable once its directory is synced: before, images both
    with and without the file are made (``data`` None: no file)."""
    rng = random.Random(seed)
    directory = path.rsplit("/", 1)[0]
    opened: dict[int, str] = {}  # a descriptor's file number -> the path it was opened by
    bound: dict[str, str] = {}  # a name -> the file (by its first name) it stands for
    files: dict[str, _File] = {}
    durable_name = False  # whether ``path`` survives a crash as a name
    pending_name = False  # whether it exists but its directory was not synced since

    def file_of(number: int) -> _File | None:
        name = opened.get(number)
        if name is None or name == directory:
            return None
        key = bound.get(name, name)
        return files.setdefault(key, _File())

    def crash(at: int) -> Iterator[Image]:
        current = files.get(bound.get(path, path)) if (durable_name or pending_name) else None
        if current is None:
            yield Image(at, "no file", None)
            return
        if pending_name and not durable_name:
            yield Image(at, "no file", None)  # the new name did not reach the disk
        yield from current.images(at, rng, subsets=subsets, torn=torn, prefixes=prefixes)

    for at, op in enumerate(ops):
        if op.op == OPEN:
            name = op.data.decode("utf-8", "surrogateescape")
            opened[op.file] = name
            if name == path and path not in bound and not durable_name:
                pending_name = True  # made by this open (LMDB creates the file it opens)
            continue
        if op.op in (LINK, RENAME):
            old, _, new = op.data.decode("utf-8", "surrogateescape").partition("\0")
            bound[new] = bound.get(old, old)
            if new == path:
                pending_name, durable_name = True, False
            continue
        if op.op == SYNC and opened.get(op.file) == directory:
            yield from crash(at)
            durable_name = durable_name or pending_name
            pending_name = False
            continue
        target = file_of(op.file)
        if target is None:
            continue
        if op.op == WRITE:
            target.write(op)
        elif op.op == SYNC:
            if target is files.get(bound.get(path, path)):
                yield from crash(at)
            target.sync()
            if not pending_name or durable_name:
                continue
            # a file LMDB created by opening it: its name is as durable as its first sync
            if bound.get(path, path) == path:
                durable_name, pending_name = True, False
        elif op.op == TRUNC:
            target.truncate(op.offset)
    yield from crash(len(ops))


class _File:
    """One file's bytes: what is durable, and the writes since its last barrier."""

    def __init__(self) -> None:
        self.durable = bytearray()
        self.pending: list[_Write] = []

    def write(self, op: Op) -> None:
        if not op.dsync:
            self.pending.extend(_pages(op))
            return
        # the disk gets the whole pages of the write, from the page cache: with them, what
        # earlier writes put in those pages
        pages = {w.offset // PAGE for w in _pages(op)}
        same = [w for w in self.pending if w.offset // PAGE in pages]
        self.durable[:] = _apply(self.durable, [*same, *_pages(op)])
        self.pending[:] = [w for w in self.pending if w.offset // PAGE not in pages]

    def sync(self) -> None:
        self.durable[:] = _apply(self.durable, self.pending)
        self.pending.clear()

    def truncate(self, length: int) -> None:
        del self.durable[length:]
        if len(self.durable) < length:
            self.durable.extend(bytes(length - len(self.durable)))

    def images(
        self, at: int, rng: random.Random, *, subsets: int, torn: int, prefixes: int
    ) -> Iterator[Image]:
        durable, pending = self.durable, self.pending
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
