"""``crawlstore crawl``, the reference crawler, as users run it: the console script in a
subprocess against a generated site on loopback addresses (robots.txt, redirects, a 429 with
Retry-After, a 503 then 200, a calendar trap, ETags), killed with SIGKILL and resumed; and a
revisit pass in process, on a clock moved on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from cli_helpers import COMMAND, cli
from helpers import env_without

from crawlstore import Store
from crawlstore.crawler import CrawlOptions, crawl
from crawlstore.demo.site import DemoSite

BUDGET = 25


@pytest.fixture
def site() -> Any:
    with DemoSite(pages=80, hosts=3, seed=7, slow=0.2) as demo:
        yield demo


def command(site: DemoSite, store: Path, out: Path, *extra: str) -> list[str]:
    hosts = sorted({urlsplit(o).hostname or "" for o in site.origins})
    return [*COMMAND, "crawl", site.url(site.page_path(0)), "--store", str(store),
            *(a for h in hosts for a in ("--allow-host", h)), "--delay", "0",
            "--concurrency", "6", "--retry-delay", "0.1", "--idle", "1.5",
            "--trap-budget", str(BUDGET), "--out", str(out), "--quiet", "--json",
            *extra]  # fmt: skip


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line cut by a kill
            out.append(json.loads(line))
    return out


def run(argv: list[str], timeout: float = 120) -> dict[str, Any]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (done.returncode, done.stderr)
    summary: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return summary


def visited(store: Path, urls: set[str]) -> set[str]:
    with Store.open(store, readonly=True) as opened:
        frontier = opened.frontier()
        return {u for u in urls if (s := frontier.url(u)).outcome and s.outcome.state == "done"}


def test_crawls_the_whole_site_obeying_robots_and_bounding_the_trap(
    site: DemoSite, tmp_path: Path
) -> None:
    store, out = tmp_path / "s.lmdb", tmp_path / "pages.jsonl"
    summary = run(command(site, store, out))
    assert summary["ended"] == "idle" and summary["failed"] == 0
    assert visited(store, site.expected()) == site.expected()
    assert site.count(path_prefix="/private/") == 0 and summary["robots"] >= 1
    assert 0 < site.count(path_prefix="/calendar/") <= BUDGET
    assert [p for p in summary["blocked"] if p.endswith("/calendar/")]
    by_path = {urlsplit(p["url"]).path: p for p in lines(out) if "status" in p}
    redirects = [p for p in lines(out) if p.get("outcome") == "redirect"]
    assert redirects and all(p["status"] in (301, 302) for p in redirects)
    flaky = [s for _, _, p, s in site.log if p == "/flaky"]
    busy = [(t, s) for t, _, p, s in site.log if p == "/busy"]
    assert flaky == [503, 200]
    assert [s for _, s in busy] == [429, 200] and busy[1][0] - busy[0][0] >= 1.0  # Retry-After
    page = by_path[site.page_path(0)]
    assert set(page) >= {"url", "status", "at", "seconds", "size", "sha256", "links",
                         "unchanged", "outcome", "depth"}  # fmt: skip
    assert page["status"] == 200 and page["links"] > 0 and len(page["sha256"]) == 64


def test_killed_at_random_points_and_resumed_loses_nothing(site: DemoSite, tmp_path: Path) -> None:
    store = tmp_path / "s.lmdb"
    rng = random.Random(3)
    expected = site.expected()
    committed: list[dict[str, Any]] = []
    kills = 0
    for run_no in range(4):
        out = tmp_path / f"pages-{run_no}.jsonl"
        child = subprocess.Popen(command(site, store, out), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)  # fmt: skip
        at = rng.randrange(3, len(expected) // 6)  # four runs leave pages for the last
        deadline = time.monotonic() + 60
        while child.poll() is None and len(lines(out)) < at and time.monotonic() < deadline:
            time.sleep(0.002)
        assert child.poll() is None, "the crawl ended before its kill"
        child.send_signal(signal.SIGKILL)
        child.wait()
        kills += 1
        ours = lines(out)
        acked = {p["url"] for p in ours if p.get("outcome") in ("done", "redirect")}
        assert visited(store, acked) == acked  # every page acknowledged is in the store
        committed += ours
    run(command(site, store, tmp_path / "pages-last.jsonl"))
    assert visited(store, expected) == expected  # every page, none lost
    pages = Counter(p for _, _, p, s in site.log if s == 200 and p in site.pages)
    assert set(pages) == set(site.pages)
    assert max(pages.values()) <= 1 + kills  # fetched again only when a kill cut it short
    assert sum(pages.values()) - len(pages) <= kills * 6
    done_before = {p["url"] for p in committed if p.get("outcome") == "done"}
    again = [p for p in lines(tmp_path / "pages-last.jsonl") if p["url"] in done_before]
    assert not again  # a page committed is never fetched twice


class Ahead:
    """The system clock, ``seconds`` ahead (0 at first)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> float:
        return time.time() + self.seconds


def test_a_revisit_pass_is_answered_with_304s(site: DemoSite, tmp_path: Path) -> None:
    """In process, on a store whose clock moves an hour on between the runs: a pass that is
    slow to crawl has no revisit coming due within it, and the next run needs no wait."""
    hosts = tuple(sorted({urlsplit(o).hostname or "" for o in site.origins}))
    options = CrawlOptions(seeds=(site.url(site.page_path(0)),), allow_hosts=hosts, delay=0,
                           concurrency=6, retry_delay=0.1, idle=1.5, trap_budget=BUDGET,
                           tags=((r"/\d+$", "page"),), revisits=(("page", 3600.0),))  # fmt: skip
    clock, pages = Ahead(), []
    with Store.open(tmp_path / "s.lmdb", clock=clock) as store:
        first = asyncio.run(crawl(store, options))
        assert first.ended == "idle"
        changed = site.page_path(5)
        site.change(changed)
        due = store.frontier().count(state="scheduled")
        assert due > 0
        clock.seconds = 3600
        second = asyncio.run(crawl(store, replace(options, max_pages=due), on_page=pages.append))
    pages = [p for p in pages if "status" in p]
    assert second.counts.fetched == due == len(pages)
    for page in pages:
        path = urlsplit(page["url"]).path
        known = site.pages.get(path)
        if known is not None:
            assert page["status"] == (304 if known.validators and path != changed else 200), page
            assert page["unchanged"] is (page["status"] == 304)
    assert second.counts.unchanged == sum(p["status"] == 304 for p in pages) > 0


def test_ctrl_c_stops_cleanly_and_a_second_run_resumes(site: DemoSite, tmp_path: Path) -> None:
    store, out = tmp_path / "s.lmdb", tmp_path / "pages.jsonl"
    child = subprocess.Popen(command(site, store, out, "--delay", "0.05"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while len(lines(out)) < 10 and time.monotonic() < deadline:
        time.sleep(0.002)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=60)
    assert child.returncode == 130, stderr
    assert json.loads(stdout.splitlines()[-1])["ended"] == "stopped"
    with Store.open(store, readonly=True) as opened:
        stats = opened.frontier().stats()
    assert stats.in_flight == 0  # in-flight pages were reported Cancelled, prefetched given back
    assert stats.queued > 0
    run(command(site, store, tmp_path / "again.jsonl"))
    assert visited(store, site.expected()) == site.expected()


def test_bad_arguments_exit_2_naming_the_problem(tmp_path: Path) -> None:
    store = tmp_path / "s.lmdb"
    for args, message in [
        (["--tag", "no-equals"], "tag must look like"),
        (["--tag", "(=x"], "no regular expression"),
        (["--revisit", "page=soon"], "interval 'soon'"),
        (["--concurrency", "0"], "concurrency"),
    ]:
        done = cli("crawl", "https://example.com/", "--store", store, *args, check=2)
        assert message in done.stderr and "Traceback" not in done.stderr
    done = cli("crawl", "ftp://example.com/", "--store", store, check=2)
    assert "ftp://example.com/" in done.stderr
    assert not store.exists()  # nothing was opened


def test_without_the_crawl_extra_it_says_which_to_install(tmp_path: Path) -> None:
    env = env_without(tmp_path, "httpx")
    for verb in (["crawl", "https://example.com/", "--store", str(tmp_path / "s")], ["demo"]):
        done = subprocess.run([sys.executable, "-m", "crawlstore", *verb], capture_output=True,
                              text=True, env=env, timeout=60)  # fmt: skip
        assert done.returncode == 2
        assert "pip install -e '.[crawl]'" in done.stderr and "httpx" in done.stderr
