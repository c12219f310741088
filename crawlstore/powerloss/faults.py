"""Disk full and I/O errors, injected by the recorder at one write or one sync of the recorded
crawl: the crawl must stop with a typed error, and the file it leaves must open, verify and hold
every unit acknowledged before the error.

After an I/O error crawlstore writes nothing more through that store in that process (the
kernel may have dropped the pages it could not write; a later sync that succeeds proves nothing
of them): the error's message says to close it and open it again in a new process.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from .check import Outcome, acknowledged, check
from .images import Image
from .record import OPEN, SYNC, WRITE, read_log, record
from .workload import ACKS, STORE

__all__ = ["Injected", "calls", "inject"]


@dataclass(frozen=True, slots=True)
class Injected:
    """One run with a fault: the fault, the last line the crawl printed to stderr (its error),
    and the outcome of the file it left."""

    fault: str
    error: str
    outcome: Outcome


def calls(mode: str, pages: int, work: Path) -> tuple[int, int]:
    """How many writes and syncs the crawl makes to its store's files, with no fault: the
    places a fault can be put."""
    directory = work / "count"
    directory.mkdir(parents=True)
    log = work / "count.log"
    argv = [sys.executable, "-m", "crawlstore.powerloss.workload", str(directory), mode, str(pages)]
    record(argv, directory, log)
    ops = list(read_log(log))
    store = {op.file for op in ops if op.op == OPEN and not op.data.endswith(b"/" + ACKS.encode())}
    writes = sum(op.op == WRITE and op.file in store for op in ops)
    syncs = sum(op.op == SYNC and op.file in store for op in ops)
    return writes, syncs


def inject(mode: str, pages: int, fault: str, work: Path) -> Injected:
    """Run the crawl with ``fault`` (``"write:N:ERRNO"`` or ``"sync:N:ERRNO"``) and check the
    file it left, as it is (no power loss: what the process wrote is what a reader sees)."""
    directory = work / fault.replace(":", "-")
    directory.mkdir(parents=True)
    log = work / f"{directory.name}.log"
    argv = [sys.executable, "-m", "crawlstore.powerloss.workload", str(directory), mode, str(pages)]
    done = record(argv, directory, log, fault=fault)
    error = (done.stderr.strip().splitlines() or [""])[-1]
    ops = list(read_log(log))
    acked = [unit for _, unit in acknowledged(ops, f"{directory.resolve()}/{ACKS}")]
    path = directory / STORE
    image = Image(len(ops), "as left", path.read_bytes() if path.exists() else None)
    return Injected(fault, error, check(image, acked, work))
