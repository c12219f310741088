"""Crash torture: crawl workers on one store are killed with SIGKILL at random instants; after
each round the store is reopened and checked against what the workers acknowledged.

    crawlstore torture --minutes 10 --workers 4

Each worker runs a randomised crawl over a generated site (with a calendar trap) through every
view and facade (two in five through the group-commit worker, with three threads): ``revisit``,
``dedup_with(store.seen())``, ``retry``, ``tag_backoff``, ``avoid_traps``, validators, grouped
transactions and batch calls, on a store whose map starts small so it grows under the kills. A
worker writes a line to its stdout only after the commit it describes returned. Prints one
summary line: rounds, kills, operations verified, violations.

    crawlstore torture --power-loss --minutes 10

replays instead what the disk saw of a crawl in each durability mode, and checks every image a
power loss could leave (``crawlstore.powerloss``): prints a table of images tried, opened,
verified, and acknowledged units lost.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import Backoff, Cancelled, Done, Failed, Retry, RetryPolicy, Seed, Skipped, Store
from .frontier.traps import TrapPolicy
from .revisit import RevisitTags, revisit
from .store import verify
from .validators import Validator

SITE = 1500
HOST = "https://site.test"


#: The site's pages sit in one directory, so fan-out is not a budget here; the calendar's
#: URLs are (it has no end).
TRAPS = TrapPolicy(max_urls=SITE + 100, max_fanout=None)


class Tag(RevisitTags):
    PAGE = revisit("3s")


def links_of(url: str) -> list[str]:
    path = url[len(HOST) :]
    if path.startswith("/cal/"):  # an endless calendar: a trap
        n = int(path.rsplit("/", 1)[1])
        return [f"{HOST}/cal/{n + 1}", f"{HOST}/cal/{n + 2}"]
    n = int(path.rsplit("/", 1)[1])
    out = [f"{HOST}/p/{m}" for m in (2 * n + 1, 2 * n + 2, n // 2, (n * 7) % SITE) if m < SITE]
    return out + ([f"{HOST}/cal/{n}"] if n % 50 == 0 else [])


def worker(path: str, seed: int) -> None:
    """One crawl worker; it runs until killed (revisits keep it busy)."""
    rng = random.Random(seed)
    out = sys.stdout

    def ack(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    store = Store.open(path, durability=rng.choice(["safe", "nosync"]), map_size=2**20)
    frontier = (
        store.frontier("fifo", lease_time=30, reap_interval=0.2)
        .revisit(Tag)
        .dedup_with(store.seen())
        .retry_with(RetryPolicy(2, base_delay=0.01, jitter=0))
        .tag_backoff()
        .avoid_traps_with(TRAPS)
    )
    validators = store.validators()
    if frontier.push(Seed.get(f"{HOST}/p/0").with_tag(Tag.PAGE)):
        ack(f"P {HOST}/p/0")
    if rng.random() < 0.4:  # threads through the group-commit worker instead
        _group_commit(frontier, validators, rng, ack)
        return
    while True:
        batch = [ready.seed for ready in frontier.pop_many(rng.choice([1, 1, 3, 10]))]
        if not batch:
            time.sleep(0.01)
            continue
        ack("L " + " ".join(s.url for s in batch))
        done: list[Seed] = []
        for s in batch:
            roll = rng.random()
            if roll < 0.06:
                frontier.report(Retry(s))
                ack(f"R {s.url}")
            elif roll < 0.09:
                frontier.report(Cancelled(s))
            elif roll < 0.10:
                ack(f"S {s.url}")  # before the commit: a kill between the two must not look
                frontier.report(Skipped(s))  # like a lost revisit (the check allows either)
            elif roll < 0.11:
                frontier.report(Failed(s))
            elif roll < 0.12:
                frontier.report(Backoff(Tag.PAGE, until=frontier.clock() + 0.05))
                frontier.report(Retry(s))
            else:
                done.append(s)
        if not done:
            continue
        with store.transaction():  # reports, validators and links: one commit
            admitted = []
            for s in done:
                frontier.report(Done(s))
                validators.put(s.fingerprint, Validator(etag=f'"{s.url}"'))
                links = [Seed.get(u).with_tag(Tag.PAGE).with_depth(s.depth + 1)
                         for u in links_of(s.url)]  # fmt: skip
                admitted += [
                    ln.url for ln, a in zip(links, frontier.push_many(links), strict=True) if a
                ]
        ack(" ".join(["D", *(s.url for s in done)]))
        if admitted:
            ack(" ".join(["P", *admitted]))


def _group_commit(frontier: Any, validators: Any, rng: random.Random,
                  ack: Callable[[str], None]) -> None:  # fmt: skip
    """Three threads crawling through ``frontier.worker()``: each page a unit of the worker's
    group commits, acknowledged once its future resolved (the unit is committed)."""
    lock = threading.Lock()

    def said(line: str) -> None:
        with lock:
            ack(line)

    with frontier.worker(prefetch=rng.choice([4, 16]), validators=validators) as group:

        def crawl() -> None:
            for ready in group:
                s = ready.seed
                if rng.random() < 0.06:
                    group.finish(Retry(s)).result()
                    said(f"R {s.url}")
                    continue
                links = [Seed.get(u).with_tag(Tag.PAGE).with_depth(s.depth + 1)
                         for u in links_of(s.url)]  # fmt: skip
                validator = Validator(etag=f'"{s.url}"')
                admissions = group.finish(Done(s), links, validator=validator).result()
                said(f"D {s.url}")
                admitted = [ln.url for ln, a in zip(links, admissions, strict=True) if a]
                if admitted:
                    said(" ".join(["P", *admitted]))

        threads = [threading.Thread(target=crawl, daemon=True) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


@dataclass
class Record:
    """What the workers acknowledged, over the whole run."""

    admitted: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)
    lines: int = 0

    def read(self, text: str) -> None:
        for line in text.splitlines():
            kind, _, rest = line.partition(" ")
            urls = rest.split()
            self.lines += 1
            if kind == "P":
                self.admitted.update(urls)
            elif kind == "D":
                self.done.update(urls)
            elif kind == "S":
                self.skipped.update(urls)


def check(path: Path, record: Record) -> list[str]:
    """The invariants of a store nobody is writing: a list of violations."""
    if not path.exists():  # every worker was killed before it created the file
        return [f"{record.lines} acknowledgements but no store"] if record.lines else []
    violations = list(verify(path))
    with Store.open(path) as store:
        frontier = store.frontier("fifo", reap_interval=0)
        frontier.reap()  # the killed workers' leases come back
        stats = frontier.stats()
        snap = frontier.snapshot()
        if stats.in_flight or snap.in_flight:
            violations.append(f"{stats.in_flight} seeds still leased by dead workers")
        held = Counter(s.fingerprint for s in snap)
        violations += [f"queued twice: {fp.hex()}" for fp, n in held.items() if n > 1]
        seen = set(store.seen())
        violations += [f"held but not seen: {fp.hex()}" for fp in held if fp not in seen]
        validators = store.validators()
        blocked = [b.prefix for b in frontier.avoid_traps_with(TRAPS).blocked()]
        for url in record.admitted:
            if Seed.get(url).fingerprint not in seen:
                violations.append(f"acknowledged push lost: {url}")
        for url in record.done:
            fp = Seed.get(url).fingerprint
            if fp not in seen:
                violations.append(f"acknowledged Done is not in the seen set: {url}")
            if validators.get(fp) is None:
                violations.append(f"acknowledged Done lost its validators: {url}")
            # a page done is crawled again: its revisit is scheduled (or already queued),
            # unless a later visit skipped it or its prefix became a blocked trap
            trapped = any(url.startswith(prefix) for prefix in blocked)
            if fp not in held and url not in record.skipped and not trapped:
                violations.append(f"acknowledged Done lost its revisit: {url}")
    return violations


def torture(
    path: Path, *, seconds: float, workers: int, seed: int = 1, min_kills: int = 0
) -> tuple[int, int, int, list[str]]:
    """Rounds of ``workers`` processes, each killed at a random instant; returns (rounds,
    kills, operations verified, violations)."""
    rng = random.Random(seed)
    record = Record()
    rounds = kills = 0
    violations: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline or kills < min_kills:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "crawlstore.torture",
                    "--worker",
                    str(path),
                    str(rng.randrange(2**32)),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(workers)
        ]
        end = time.monotonic() + rng.uniform(0.3, 1.2)
        for proc in sorted(procs, key=lambda _: rng.random()):  # each at its own instant
            time.sleep(max(0.0, min(end - time.monotonic(), rng.uniform(0, 0.4))))
            os.kill(proc.pid, signal.SIGKILL)
        for proc in procs:
            stdout, stderr = proc.communicate()
            record.read(stdout.decode())
            if proc.returncode != -signal.SIGKILL:
                violations.append(f"worker ended on its own ({proc.returncode}): {stderr[-500:]!r}")
            kills += proc.returncode == -signal.SIGKILL
        rounds += 1
        violations += [v for v in check(path, record) if v not in violations]  # each once
    return rounds, kills, record.lines, violations


def main(argv: list[str] | None = None, *, prog: str = "python -m crawlstore.torture") -> int:
    """Run the torture with the command line's arguments (``argv``; ``prog`` names the
    command in its help); 1 when it found a violation."""
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=1.0, metavar="M",
                        help="how long to run, in minutes (1)")  # fmt: skip
    parser.add_argument("--workers", type=int, default=4, metavar="N",
                        help="worker processes killed each round (4)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, metavar="S",
                        help="the random seed of the run, to repeat it (1)")  # fmt: skip
    parser.add_argument("--power-loss", action="store_true",
                        help="instead: replay what the disk saw of a crawl, in every durability "
                             "mode, and check every image a power loss could leave (needs a C "
                             "compiler)")  # fmt: skip
    parser.add_argument("--pages", type=int, default=20, metavar="P",
                        help="with --power-loss: pages a recorded crawl makes (20)")  # fmt: skip
    parser.add_argument("--worker", nargs=2, metavar=("PATH", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker[0], int(args.worker[1]))
        return 0
    if args.power_loss:
        from .powerloss.check import power_loss

        return power_loss(args.minutes * 60, pages=args.pages, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="crawlstore-torture-") as tmp:
        rounds, kills, ops, violations = torture(
            Path(tmp) / "torture.lmdb", seconds=args.minutes * 60, workers=args.workers,
            seed=args.seed,
        )  # fmt: skip
    for violation in violations[:20]:
        print("violation:", violation)
    print(f"rounds {rounds}, kills {kills}, operations verified {ops}, "
          f"violations {len(violations)}")  # fmt: skip
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
