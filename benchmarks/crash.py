"""The crash-safety column, measured: what one ``kill -9`` of a crawl loop loses.

A child process (``python -m benchmarks.crash child KEY DIR``: a fresh interpreter, nothing
inherited across a fork) pushes the start URLs, prints ``S`` once that returned, then runs
the crawl loop printing ``P url`` when a seed is handed out and ``A page url`` once the
contender's commit for the page returned (for contenders without commits: once the call
returned). The parent kills it with SIGKILL after a random number of acknowledgements, then
a new process (``python -m benchmarks.crash recover KEY DIR LOG``) reopens the state and
checks it against the log:

- every URL pushed by the start or by an acknowledged page is queued, or was handed out
  (else it is lost from the queue: the crawl never gets to it);
- every seed handed out but not acknowledged is queued again (crawlstore: after ``reap()``,
  which requeues the leases of dead processes; the others: as their own recovery does);
- no page acknowledged as done is queued again;
- every page acknowledged as done is still known (else it is crawled again).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from .contenders import Probe, by_key
from .links import START, page_links, start_urls, url

ROOT = Path(__file__).resolve().parent.parent
#: Pages the child would crawl if never killed (it is killed long before).
CHILD_PAGES = 100_000
TIMEOUT = 120.0


class _Printer(Probe):
    def __init__(self) -> None:
        self.write, self.flush = sys.stdout.write, sys.stdout.flush

    def popped(self, url: str, page: int | None = None) -> None:
        self.write(f"P {url}\n" if page is None else f"Q {page} {url}\n")
        self.flush()

    def acked(self, page: int, url: str) -> None:
        self.write(f"A {page} {url}\n")
        self.flush()


def child(key: str, path: str) -> None:
    contender = by_key(key)()
    contender.open(path)
    contender.seed(start_urls())
    print("S", flush=True)
    contender.crawl(CHILD_PAGES, page_links, _Printer())
    print("F", flush=True)
    time.sleep(3600)  # wait for the kill


def check(key: str, path: str, log: str) -> dict[str, object]:
    """Reopen the killed child's state and compare it with its log (in this process)."""
    seeded = False
    acked: dict[int, str] = {}
    order: list[str] = []  # seeds in the order handed out: the i-th is page i's
    pages: dict[int, str] = {}  # or, from contenders with pages in flight, page by page
    for line in Path(log).read_text().splitlines():
        if line == "S":
            seeded = True
        elif line.startswith("P "):
            order.append(line[2:])
        elif line.startswith("Q "):
            _, page, u = line.split(" ", 2)
            pages[int(page)] = u
        elif line.startswith("A "):
            _, page, u = line.split(" ", 2)
            acked[int(page)] = u
    try:
        state = by_key(key)().recover(path)
    except Exception as exc:  # the state cannot be read back
        return {"phrase": "everything (unreadable)", "error": f"{type(exc).__name__}: {exc}"}
    queued, known = state.queued, state.known
    order = order or [pages.get(i, "") for i in range(max(pages, default=-1) + 1)]
    popped = set(order) - {""}
    pushed: dict[str, int] = {u: -1 for u in start_urls()} if seeded else {}
    for page in sorted(acked):
        for u in page_links(page):
            pushed.setdefault(u, page)
    done = set(acked.values())
    in_flight = popped - done
    dropped = [(page, u) for u, page in pushed.items() if u not in popped and u not in queued]
    # A seed handed out and not acknowledged must be queued again, unless the kill came
    # between its commit and the acknowledgement: then its links are all there.
    lost_in_flight = sorted(
        u
        for page, u in enumerate(order)
        if u in in_flight
        and u not in queued
        and not all(v in queued or v in popped or known(v) for v in page_links(page))
    )
    requeued = sorted(u for u in done if u in queued)
    forgotten = sorted(u for u in done if not known(u))
    waiting = sum(1 for u in pushed if u not in popped)
    parts = []
    if dropped:
        if len(dropped) >= 0.9 * waiting:
            parts.append(f"everything (queue lost, {len(dropped)} URLs)")
        else:
            first = min(page for page, _ in dropped)
            last = max(acked) if acked else -1
            where = "last " if first >= last // 2 else ""
            parts.append(f"{where}{len(dropped)} pushes")
    if lost_in_flight:
        parts.append(f"in-flight seeds ({len(lost_in_flight)})")
    if requeued:
        parts.append(f"done pages queued again ({len(requeued)})")
    if forgotten:
        parts.append(f"seen set: {len(forgotten)} done pages forgotten")
    return {
        "phrase": ", ".join(parts) or "nothing",
        "acknowledged": len(acked),
        "in_flight": len(in_flight),
        "pushed": len(pushed),
        "queued_after": len(queued),
        "dropped": len(dropped),
        "lost_in_flight": len(lost_in_flight),
        "done_requeued": len(requeued),
        "done_forgotten": len(forgotten),
    }


def child_env() -> dict[str, str]:
    """The environment of a child process: this checkout first on its path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def probe(
    key: str, path: str, kill_after: tuple[int, int], rng: random.Random
) -> dict[str, object]:
    """Run the child on ``path``, kill it after a random number of acknowledgements, check."""
    target = rng.randint(*kill_after)
    log = os.path.join(path, "ack.log")
    state = os.path.join(path, "state")
    os.mkdir(state)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.crash", "child", key, state],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=child_env(),
    )
    timer = threading.Timer(TIMEOUT, proc.kill)
    timer.start()
    lines, acks, killed = [], 0, False
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("A "):
                acks += 1
                if acks >= target:
                    time.sleep(rng.uniform(0, 0.005))  # land anywhere in the loop
                    proc.kill()  # SIGKILL
                    killed = True
                    break
            elif line.startswith("F"):
                break
        lines += proc.stdout.read().splitlines(keepends=True)  # what it printed before dying
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stderr = proc.stderr.read() if proc.stderr else ""
    if not killed:
        return {"phrase": "probe failed", "error": stderr.strip().splitlines()[-1:] or "no kill"}
    Path(log).write_text("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.crash", "recover", key, state, log],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=child_env(),
        timeout=TIMEOUT,
    )
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["?"]
        return {"phrase": "everything (unreadable)", "error": tail[0]}
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["killed_after"] = target
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def main(argv: list[str]) -> None:
    import logging

    logging.disable(logging.CRITICAL)
    if argv[0] == "child":
        child(argv[1], argv[2])
    elif argv[0] == "recover":
        print(json.dumps(check(argv[1], argv[2], argv[3])))
    else:
        raise SystemExit(f"usage: python -m benchmarks.crash child|recover KEY DIR [LOG]: {argv}")


if __name__ == "__main__":
    main(sys.argv[1:])

__all__ = ["START", "check", "child", "probe", "url"]
