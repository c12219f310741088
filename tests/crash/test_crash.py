"""Crash safety: a child crawls a store and is killed with SIGKILL at random instants; after
each kill the parent reopens the store and checks it against what the child acknowledged.

``CRAWLSTORE_CRASH_KILLS`` sets the number of kills (50 by default; more for a long run).
"""

from __future__ import annotations

import os
import random
import select
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crawler
import pytest

from crawlstore import Seed, Store

KILLS = int(os.environ.get("CRAWLSTORE_CRASH_KILLS", "50"))


@dataclass
class Acknowledged:
    """What the children were told was committed, over every run of one crawl."""

    admitted: set[str] = field(default_factory=set)
    done: set[str] = field(default_factory=set)
    finished_runs: int = 0


def run_child(
    path: Path, crawl_name: str, rng: random.Random, child: Any = crawler.crawl
) -> tuple[list[str], bool]:
    """Fork a crawler, read its acknowledgements, SIGKILL it after a random number of them
    and a random delay; return the lines read and whether it finished before the kill."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        code = 0
        try:
            child(str(path), crawl_name, write_fd, rng.randrange(2**32))
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_fd)
    lines: list[str] = []
    buffer = b""
    kill_after = rng.randrange(1, 40)
    deadline = time.monotonic() + 60
    while len(lines) < kill_after and time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 1.0)
        if not ready:
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        lines.extend(c.decode() for c in complete)
    time.sleep(rng.uniform(0, 0.01))  # land somewhere in the next operations
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    while chunk := os.read(read_fd, 65536):  # acknowledgements sent before the kill count
        buffer += chunk
    os.close(read_fd)
    *complete, _ = buffer.split(b"\n")
    lines.extend(c.decode() for c in complete)
    if os.WIFEXITED(status):
        assert os.WEXITSTATUS(status) == 0, "the crawler failed"
    return lines, "END" in lines


def check(path: Path, crawl_name: str, acked: Acknowledged) -> bool:
    """Reopen the store and check the invariants; True when the crawl is complete."""
    with Store.open(path) as store:
        frontier = store.frontier(crawl=crawl_name)
        frontier.core.reap()  # the dead child's leases come back
        seen = store.seen(crawl=crawl_name)
        validators = store.validators(crawl=crawl_name)
        snap = frontier.snapshot()
        stats = frontier.stats()
        # leased seeds came back
        assert stats.in_flight == 0 and not snap.in_flight
        # counters equal contents
        assert stats.queued == len(snap.queued) and stats.scheduled == len(snap.scheduled)
        held = [s.fingerprint for s in snap]
        # nothing queued twice
        assert not [fp for fp, n in Counter(held).items() if n > 1]
        seen_fps = set(seen)
        assert len(seen_fps) == len(seen) == stats.admitted
        finished = seen_fps - set(held)
        assert set(held) <= seen_fps
        assert len(finished) == stats.done + stats.failed
        # nothing acknowledged is lost
        fps = {url: Seed.get(url).fingerprint for url in acked.admitted | acked.done}
        assert {fps[u] for u in acked.admitted} <= seen_fps
        assert {fps[u] for u in acked.done} <= finished
        for url in acked.done:
            assert validators.get(fps[url]) is not None, url
        assert len(validators) == stats.done
        # a page's links were admitted with its Done (one transaction), and nothing else was:
        # pages only a failed page links to are never found, so "complete" is not "all pages"
        site = [crawler.page_url(n) for n in range(crawler.SITE_PAGES)]
        done = [url for url in site if validators.get(Seed.get(url).fingerprint) is not None]
        found = {crawler.page_url(0), *(link for url in done for link in crawler.links_of(url))}
        assert seen_fps == {Seed.get(url).fingerprint for url in found}
        return len(held) == 0


@pytest.mark.parametrize(
    ("child", "kills"),
    [(crawler.crawl, KILLS), (crawler.crawl_grouped, max(5, KILLS // 3))],
    ids=["plain", "group-commit"],
)
def test_sigkill_at_random_instants_loses_nothing(tmp_path: Path, child: Any, kills: int) -> None:
    path = tmp_path / "crash.lmdb"
    rng = random.Random(int(os.environ.get("CRAWLSTORE_CRASH_SEED", "20261130")))
    killed = crawls = 0
    crawl_name, acked = "crawl0", Acknowledged()
    while killed < kills:
        lines, finished = run_child(path, crawl_name, rng, child)
        killed += not finished
        for line in lines:
            kind, *urls = line.split()
            if kind == "LAST":
                continue
            if kind == "P":
                acked.admitted.update(urls)
            elif kind == "D":
                acked.done.add(urls[0])
                acked.admitted.update(urls[1:])
        complete = check(path, crawl_name, acked)
        last = [line for line in lines if line.startswith("LAST ")]
        assert complete or not finished, f"the crawler ended with work left: {last}"
        if complete:
            crawls += 1
            crawl_name, acked = f"crawl{crawls}", Acknowledged()
    assert killed >= kills
