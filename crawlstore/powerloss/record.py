"""Recording what a process writes to a store's files: the ``recorder.c`` shim, compiled with
the system's C compiler and loaded with ``LD_PRELOAD`` into a child, logs every write, truncate
and sync to the files of one directory, in the order the calls returned. ``read_log`` reads the
log back as ``Op`` values."""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import CrawlstoreError

__all__ = ["NoCompiler", "Op", "compile_recorder", "read_log", "record"]

OPEN, WRITE, TRUNC, SYNC, CLOSE, MSYNC, LINK, RENAME = 1, 2, 3, 4, 5, 6, 7, 8
#: Writes through a descriptor opened with ``O_DSYNC`` or ``O_SYNC`` are durable on return.
DSYNC = 1
_HEADER = struct.Struct("<BBHIQ")
_SOURCE = "recorder.c"


class NoCompiler(CrawlstoreError):
    """The recorder needs a C compiler (``cc``, ``gcc`` or ``clang``), and this machine has
    none: install one (Debian and Ubuntu: ``apt-get install gcc``)."""


@dataclass(frozen=True, slots=True)
class Op:
    """One recorded call: ``op`` (``OPEN``, ``WRITE``, ``TRUNC``, ``SYNC``, ``CLOSE``,
    ``MSYNC``, ``LINK``, ``RENAME``), the file's number (its order of opening), ``dsync`` for a
    write through an ``O_DSYNC`` descriptor, the offset (a truncate's length), the data, the
    opened path, or a link's or rename's two paths ("from\\0to")."""

    op: int
    file: int
    dsync: bool
    offset: int
    data: bytes


def compile_recorder(cache: Path | None = None) -> Path:
    """The shim as a shared object, compiled once per version of its source into ``cache``
    (the system's temporary directory by default). ``NoCompiler`` when there is no compiler."""
    source = resources.files(__package__).joinpath(_SOURCE).read_bytes()
    digest = hashlib.sha256(source).hexdigest()[:16]
    target = (cache or Path(tempfile.gettempdir())) / f"crawlstore-recorder-{digest}.so"
    if target.exists():
        return target
    compiler = next((c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if compiler is None:
        raise NoCompiler(NoCompiler.__doc__ or "")
    with tempfile.TemporaryDirectory() as work:
        src = Path(work) / _SOURCE
        src.write_bytes(source)
        out = Path(work) / "recorder.so"
        done = subprocess.run(
            [compiler, "-shared", "-fPIC", "-O2", "-o", str(out), str(src), "-ldl", "-lpthread"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise CrawlstoreError(f"the recorder did not compile: {done.stderr.strip()[-2000:]}")
        os.replace(out, target)  # atomic: two processes compiling at once both end with one
    return target


def record(
    argv: Sequence[str],
    directory: Path,
    log: Path,
    *,
    fault: str | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (a Python child: ``sys.executable`` first) with every write to the files of
    ``directory`` logged into ``log``; ``fault`` (``"write:N:ERRNO"`` or ``"sync:N:ERRNO"``)
    fails the Nth write or sync to them (a file named ``acks`` aside) with ``ERRNO``."""
    env = {**os.environ, "LD_PRELOAD": str(compile_recorder()),
           "CRAWLSTORE_RECORD_DIR": str(directory.resolve()),
           "CRAWLSTORE_RECORD_LOG": str(log)}  # fmt: skip
    if fault is not None:
        env["CRAWLSTORE_FAULT"] = fault
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=timeout)


def read_log(log: Path) -> Iterator[Op]:
    """The recorded calls, in order; a record cut short at the end (the child killed while
    writing it) is dropped."""
    raw = log.read_bytes()
    at, size = 0, len(raw)
    while at + _HEADER.size <= size:
        op, flags, file, length, offset = _HEADER.unpack_from(raw, at)
        start = at + _HEADER.size
        if start + length > size:
            return
        yield Op(op, file, bool(flags & DSYNC), offset, raw[start : start + length])
        at = start + length
