"""``crawlstore demo``: the store surviving a kill, shown on a generated local site.

It serves a few hundred pages on loopback hosts (``crawlstore.demo.site``), crawls them with
``crawlstore crawl`` in a child process, kills that process with SIGKILL part way, runs the
same command again (it resumes), changes a few pages, waits for the revisits to come due and
crawls once more (unchanged pages answer 304). Then it checks, from the store and the site's
own request log, that nothing was lost and nothing was done twice, prints a summary and exits
non-zero when a check fails. Nothing leaves 127.0.0.x.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from ..store import Store
from .checks import Check, check_crawl, check_revisit
from .site import DemoSite

__all__ = ["main"]

REVISIT = 15.0  # seconds: longer than the crawl, so the revisit pass is its own
TRAP_BUDGET = 40


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="crawlstore demo", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--dir", type=Path, help="keep the store and page logs here "
                        "(default: a temporary directory, removed at the end)")  # fmt: skip
    parser.add_argument("--pages", type=int, default=300, help="pages of the site (300)")
    parser.add_argument("--hosts", type=int, default=4, help="hosts of the site (4)")
    parser.add_argument("--seed", type=int, default=1, help="the site's random seed")
    args = parser.parse_args(argv)
    with DemoSite(pages=args.pages, hosts=args.hosts, seed=args.seed) as site, _workdir(
        args.dir
    ) as work:  # fmt: skip
        return _demo(site, work)


def _demo(site: DemoSite, work: Path) -> int:
    path = work / "crawl.lmdb"
    hosts = sorted({origin.split("//")[1] for origin in site.origins})
    say(f"crawlstore demo: {site.size} pages on {len(hosts)} hosts ({', '.join(hosts)})")
    say(f"the store: {path}\n")

    logs = [work / f"pages-{n}.jsonl" for n in (1, 2, 3)]
    for old in [*logs, path, path.with_name(path.name + "-lock")]:  # a demo starts afresh
        old.unlink(missing_ok=True)
    killed_after = _run_and_kill(site, path, logs[0], at=len(site.expected()) // 3)
    say(f"1. crawl: killed with SIGKILL after {killed_after} pages were committed")
    second = _run(site, path, logs[1])
    say(f"2. the same command again: it resumed and ended ({second['ended']}) after "
        f"{second['seconds']:.1f}s, {second['fetched']} pages more")  # fmt: skip
    checks = check_crawl(site, path, _lines(logs[0]), _lines(logs[1]), REVISIT, TRAP_BUDGET)

    changed = [site.page_path(n) for n in range(3, site.size, site.size // 5)][:5]
    for page in changed:
        site.change(page)
    due, count = _revisits(path)
    wait = max(0.0, due - time.time())
    say(f"3. changed {len(changed)} pages; waiting {wait:.1f}s for {count} revisits to come due")
    time.sleep(wait)
    third = _run(site, path, logs[2], "--max-pages", str(count), "--idle", "5")
    pages = _lines(logs[2])
    statuses = Counter(p.get("status") for p in pages)
    say(f"   the revisit pass: {third['fetched']} pages, {statuses[304]} unchanged (304), "
        f"{statuses[200]} sent in full\n")  # fmt: skip
    checks += check_revisit(site, pages, changed, count)
    _summary(site, path, second, checks)
    failed = [c for c in checks if not c.ok]
    say(f"\n{len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


def _command(site: DemoSite, path: Path, out: Path, *extra: str) -> list[str]:
    hosts = sorted({origin.split("//")[1].split(":")[0] for origin in site.origins})
    return [sys.executable, "-m", "crawlstore", "crawl", site.url(site.page_path(0)),
            "--store", str(path), *(a for h in hosts for a in ("--allow-host", h)),
            "--delay", "0.02", "--concurrency", "8", "--retry-delay", "0.2", "--idle", "2",
            "--trap-budget", str(TRAP_BUDGET), "--tag", r"/\d+$=page",
            "--revisit", f"page={REVISIT:g}s", "--out", str(out), "--quiet", "--json",
            *extra]  # fmt: skip


def _env() -> dict[str, str]:
    loopback = ",".join(f"127.0.0.{i}" for i in range(1, 20))
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY"), loopback]))
    return {**os.environ, "NO_PROXY": no_proxy, "no_proxy": no_proxy}


def _run_and_kill(site: DemoSite, path: Path, out: Path, *, at: int) -> int:
    """Start the crawl, SIGKILL it once ``at`` pages are committed; how many were."""
    child = subprocess.Popen(_command(site, path, out), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env=_env())  # fmt: skip
    deadline = time.monotonic() + 120
    while child.poll() is None and len(_lines(out)) < at and time.monotonic() < deadline:
        time.sleep(0.005)
    if child.poll() is not None:
        raise SystemExit(f"crawlstore demo: the crawl ended before the kill: {_stderr(child)}")
    child.send_signal(signal.SIGKILL)
    child.wait()
    return len(_lines(out))


def _run(site: DemoSite, path: Path, out: Path, *extra: str) -> dict[str, Any]:
    done = subprocess.run(_command(site, path, out, *extra), capture_output=True, text=True,
                          env=_env(), timeout=300)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"crawlstore demo: the crawl failed ({done.returncode}): {done.stderr}")
    summary: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return summary


def _stderr(child: subprocess.Popen[bytes]) -> str:
    return child.stderr.read().decode(errors="replace") if child.stderr else ""


def _lines(log: Path) -> list[dict[str, Any]]:
    """The page lines of a log; a line cut by a kill is not one."""
    if not log.exists():
        return []
    lines = []
    for line in log.read_text().splitlines():
        with suppress(json.JSONDecodeError):
            lines.append(json.loads(line))
    return lines


def _revisits(path: Path) -> tuple[float, int]:
    """When the first revisit is due, and how many are scheduled."""
    with Store.open(path, readonly=True) as store:
        frontier = store.frontier()
        due, count, after = float("inf"), 0, None
        while page := frontier.urls(state="scheduled", after=after, limit=1000):
            for status in page:
                if status.kind == "revisit" and status.at is not None:
                    due, count = min(due, status.at), count + 1
            after = page[-1].fingerprint
    return due, count


def _summary(site: DemoSite, path: Path, second: dict[str, Any], checks: list[Check]) -> None:
    with Store.open(path, readonly=True) as store:
        stats = store.frontier().stats()
    refused = ", ".join(f"{reason} {n}" for reason, n in sorted(stats.refused.items()))
    say(
        f"pages              {stats.done} visits done (revisits too), {stats.failed} failed, "
        f"{stats.skipped} skipped (robots.txt)"
    )
    say(f"links refused      {refused}")
    say(
        f"trap prefixes      {', '.join(second['blocked']) or 'none'} "
        f"({site.count(path_prefix='/calendar/')} calendar pages fetched, budget {TRAP_BUDGET})"
    )
    say(
        f"retried            {stats.retried} (a 503, then 200; a 429 with Retry-After, host paused)"
    )
    say(f"revisits           {stats.unchanged} unchanged (304) in all\n")  # fmt: skip
    say("checks")
    for check in checks:
        say(f"  {'ok  ' if check.ok else 'FAIL'} {check.what}")
        if not check.ok:
            say(f"       {check.detail}")


def say(line: str) -> None:
    print(line, flush=True)


@contextmanager
def _workdir(given: Path | None) -> Iterator[Path]:
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    temp = Path(tempfile.mkdtemp(prefix="crawlstore-demo-"))
    try:
        yield temp
    finally:
        shutil.rmtree(temp, ignore_errors=True)
