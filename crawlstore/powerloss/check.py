"""Checking crash images: each is opened in a forked child (LMDB may abort on a damaged file),
verified (``verify``), and held to what the workload acknowledged before its crash point:

- every acknowledged unit is there: its page done (its revisit scheduled) with its validators,
  its links known;
- nothing is handed out twice: draining the frontier pops each URL once, and none that an
  acknowledged unit finished.

``run`` records the workload (``workload.py``) in one durability mode and checks every image
of its record; ``Summary`` holds the figures.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .images import Image, images
from .record import OPEN, WRITE, Op, read_log, record
from .workload import ACKS, STORE

__all__ = [
    "ALLOWED",
    "KINDS",
    "Outcome",
    "Summary",
    "acknowledged",
    "allowed",
    "check",
    "power_loss",
    "run",
]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one image gave: whether it opened, what ``verify`` found, how many acknowledged
    units it lost, and any other invariant it broke."""

    image: Image
    opened: bool
    problems: tuple[str, ...] = ()
    lost: int = 0
    broken: tuple[str, ...] = ()


@dataclass(slots=True)
class Summary:
    """The figures of one mode: images tried, opened, verified; images that lost an
    acknowledged unit, and the most units one lost; images that broke another invariant."""

    mode: str
    #: Images of a crash before the store was first opened (while its file was being made),
    #: and how many of them do not open: no promise covers them.
    creating: int = 0
    creating_unopened: int = 0
    images: int = 0
    opened: int = 0
    verified: int = 0
    lost: int = 0
    most_lost: int = 0
    broken: int = 0
    examples: list[Outcome] = field(default_factory=list)

    def merge(self, other: Summary) -> None:
        for name in ("creating", "creating_unopened", "images", "opened", "verified", "lost",
                     "broken"):  # fmt: skip
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.most_lost = max(self.most_lost, other.most_lost)
        self.examples.extend(other.examples[: 5 - len(self.examples)])

    def add(self, outcome: Outcome, *, creating: bool = False) -> None:
        if creating:
            self.creating += 1
            self.creating_unopened += not outcome.opened or bool(outcome.problems)
            return
        self.images += 1
        self.opened += outcome.opened
        self.verified += outcome.opened and not outcome.problems
        self.lost += outcome.lost > 0
        self.most_lost = max(self.most_lost, outcome.lost)
        self.broken += bool(outcome.broken)
        bad = not outcome.opened or outcome.problems or outcome.broken or outcome.lost
        if bad and len(self.examples) < 5:
            self.examples.append(outcome)


def acknowledged(ops: list[Op], path: str) -> list[tuple[int, dict[str, Any]]]:
    """The units the workload acknowledged, each with the index of the call that completed its
    line in the record."""
    files = {op.file for op in ops if op.op == OPEN and op.data.decode() == path}
    out, buffer = [], b""
    for at, op in enumerate(ops):
        if op.op == WRITE and op.file in files:
            buffer += op.data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                out.append((at, json.loads(line)))
    return out


def check(image: Image, acked: list[dict[str, Any]], work: Path) -> Outcome:
    """The outcome of ``image``, opened in a forked child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report one JSON line, whatever happens
        os.close(read)
        try:
            said = _check_here(image, acked, work)
        except BaseException as exc:
            said = {"opened": False, "problems": [f"{type(exc).__name__}: {exc}"[:500]]}
        os.write(write, json.dumps(said).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        raw = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not raw:
        code = os.waitstatus_to_exitcode(status)
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with {code}"
        return Outcome(image, False, (f"LMDB aborted: the checking process {how}",))
    said = json.loads(raw)
    return Outcome(image, said["opened"], tuple(said.get("problems", ())),
                   said.get("lost", 0), tuple(said.get("broken", ())))  # fmt: skip


def _check_here(image: Image, acked: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    from .. import Seed, Store
    from ..storages import verify

    path = work / f"image-{os.getpid()}.lmdb"
    problems: list[str] = []
    if image.data is not None:  # None: no file, and opening makes a new store
        path.write_bytes(image.data)
    try:
        if image.data is not None:
            problems = verify(path, isolated=False)
        with Store.open(path, durability="nosync") as store:
            frontier = store.frontier()
            validators = store.validators()
            lost, finished = 0, set()
            for unit in acked:  # a unit lost is counted once: its page may come back
                ok = all(frontier.url(u).state != "unknown" for u in unit["pushed"])
                if unit["done"] is not None:
                    kept = validators.get(Seed.get(unit["done"]).fingerprint)
                    status = frontier.url(unit["done"])  # its revisit scheduled, or done
                    visited = {("done", None), ("scheduled", "revisit")}
                    ok = ok and (status.state, status.kind) in visited
                    ok = ok and kept is not None and kept.etag == unit["etag"]
                if ok and unit["done"] is not None:
                    finished.add(Seed.get(unit["done"]).fingerprint)
                lost += not ok
            broken = _drain(frontier, finished)
        return {"opened": True, "problems": problems, "lost": lost, "broken": broken}
    finally:
        for leftover in (path, Path(f"{path}-lock")):
            leftover.unlink(missing_ok=True)


def _drain(frontier: Any, finished: set[Any]) -> list[str]:
    """Pop everything: each URL once, and none that an acknowledged unit finished."""
    from .. import Done, Ready

    broken, popped = [], set()
    while isinstance(ready := frontier.pop(), Ready):
        fp = ready.seed.fingerprint
        if fp in popped:
            broken.append(f"{ready.seed.url} handed out twice")
        if fp in finished:
            broken.append(f"{ready.seed.url} handed out again after an acknowledged Done")
        popped.add(fp)
        frontier.report(Done(ready.seed))
    return broken


def run(
    mode: str, pages: int, work: Path, *, kind: str = "loop", seed: int = 0, **sample: int
) -> Summary:
    """Record the workload (``kind``: ``"loop"`` or ``"worker"``) of ``pages`` pages in
    durability ``mode`` under ``work``, then check every image of its record (``sample``: the
    image builder's ``subsets``, ``torn`` and ``prefixes``)."""
    directory = work / f"{mode}-{kind}"
    directory.mkdir(parents=True)
    log = work / f"{mode}-{kind}.log"
    done = record([sys.executable, "-m", "crawlstore.powerloss.workload", str(directory), mode,
                   str(pages), kind], directory, log)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the workload failed: {done.stderr.strip()[-2000:]}")
    ops = list(read_log(log))
    base = str(directory.resolve())
    acks = acknowledged(ops, f"{base}/{ACKS}")
    summary = Summary(f"{mode}, {kind}")
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        for image in images(ops, f"{base}/{STORE}", seed=seed, **sample):
            acked = [unit for at, unit in acks if at < image.ops]
            creating = not acked  # the first acknowledgement: the store was opened
            summary.add(check(image, acked, Path(scratch)), creating=creating)
    return summary


#: The most commits an image of each mode may lose (None: measured, not held): in "safe" its
#: last commit, that is one unit of a loop, or one group of the worker (whose units are
#: acknowledged together: at most as many as the worker's threads).
ALLOWED = {"full": 0, "safe": 1, "nosync": None}
#: What the workload runs: a page a transaction, or the group-commit worker.
KINDS = ("loop", "worker")
WORKER_THREADS = 4


def allowed(mode: str, kind: str) -> int | None:
    """The most acknowledged units an image of ``mode`` may lose, with crawl ``kind``."""
    commits = ALLOWED[mode]
    if commits is None:
        return None
    return commits * (WORKER_THREADS if kind == "worker" else 1)


def power_loss(seconds: float, *, pages: int = 20, seed: int = 1) -> int:
    """Record and check the workload in every mode and kind, round after round (each with its
    own seed), until ``seconds`` have passed; print the figures. 1 when "full" or "safe" broke
    their promise."""
    runs = [(mode, kind) for kind in KINDS for mode in ALLOWED]
    totals = {(mode, kind): Summary(f"{mode}, {kind}") for mode, kind in runs}
    deadline = time.monotonic() + seconds
    rounds = 0
    with tempfile.TemporaryDirectory(prefix="crawlstore-power-loss-") as tmp:
        while rounds == 0 or time.monotonic() < deadline:
            for mode, kind in runs:
                found = run(mode, pages, Path(tmp) / str(rounds), kind=kind, seed=seed + rounds)
                totals[mode, kind].merge(found)
            rounds += 1
    print(f"rounds {rounds}, {pages} pages a round, seeds {seed} to {seed + rounds - 1}")
    print(
        "| mode, crawl | images | open | verify | lost an acknowledged unit | most units lost "
        "| broke another invariant | while the file was made: images, not opening |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    failed = False
    for (mode, kind), s in totals.items():
        print(f"| {s.mode} | {s.images} | {s.opened} | {s.verified} | {s.lost} | {s.most_lost} "
              f"| {s.broken} | {s.creating}, {s.creating_unopened} |")  # fmt: skip
        most = allowed(mode, kind)
        if most is not None and (s.most_lost > most or s.broken or s.creating_unopened
                                 or not s.images == s.opened == s.verified):  # fmt: skip
            failed = True
            for example in s.examples:
                print(f"{s.mode}: image after call {example.image.ops} ({example.image.label}): "
                      f"opened {example.opened}, {list(example.problems)[:2]}, lost "
                      f"{example.lost}, {list(example.broken)[:2]}")  # fmt: skip
    return 1 if failed else 0
