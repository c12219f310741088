"""``crawlstore demo``: the store surviving a kill, shown on a generated local site.

It serves a few hundred pages on loopback hosts (``crawlstore.demo.site``) and crawls them with
``crawlstore crawl`` in a child process. It kills that process with SIGKILL a third of the way,
runs the same command again (it resumes) and stops it once the first pass is over, changes a
few pages, and once the revisits come due crawls again and stops after one round of them
(unchanged pages answer 304). Then it checks, from the store and the site's own request log,
that nothing was lost and nothing was done twice, prints the store's counters split into their
parts and the commands that show the store (which it keeps), and exits 1 when a check fails
(3 when a step could not run).

Each crawl stops when its step is over. Revisits that fall due go ahead of pages not yet
crawled, so the revisit interval must be longer than a pass over the site: on a machine where
the first crawl shows it is not, the demo starts over with a longer one. Nothing leaves
127.0.0.x.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

from ..errors import CrawlstoreError
from .checks import Check, check_crawl, check_revisit
from .runs import DemoError, command, when
from .site import DemoSite
from .state import revisits_due, statuses, visited
from .steps import StartOver, kill_part_way, resume, revisit_round, say, start_over
from .summary import Visits, commands, summary

__all__ = ["main"]

REVISIT = 15.0  # seconds: a page is crawled again this long after its visit
TRAP_BUDGET = 40


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="crawlstore demo", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--dir", type=Path, help="keep the store and the page logs here "
                        "(default: a new directory in the temporary directory)")  # fmt: skip
    parser.add_argument("--pages", type=int, default=300, help="pages of the site (300)")
    parser.add_argument("--hosts", type=int, default=4, help="hosts of the site (4)")
    parser.add_argument("--seed", type=int, default=1, help="the site's random seed")
    parser.add_argument("--revisit", type=float, default=REVISIT, metavar="S",
                        help=f"seconds before a page is crawled again ({REVISIT:g}; longer "
                        "when a pass over the site takes longer here)")  # fmt: skip
    args = parser.parse_args(argv)
    if not args.revisit > 0:
        parser.error(f"--revisit must be more than 0 seconds: {args.revisit:g}")
    site = partial(DemoSite, pages=args.pages, hosts=args.hosts, seed=args.seed)
    try:
        site()  # its arguments checked
    except ValueError as exc:
        parser.error(str(exc))
    work: Path = args.dir or Path(tempfile.mkdtemp(prefix="crawlstore-demo-"))
    revisit: float = args.revisit
    try:
        work.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                with site() as served:
                    return _demo(served, work, revisit)
            except StartOver as slow:
                revisit = slow.interval
    except KeyboardInterrupt:
        print(f"\ncrawlstore demo: interrupted; the store is in {work}", file=sys.stderr)
        return 130
    except (DemoError, CrawlstoreError, OSError, subprocess.SubprocessError) as exc:
        print(f"crawlstore demo: {exc}", file=sys.stderr)
        return 3


def _demo(site: DemoSite, work: Path, revisit: float) -> int:
    """The three crawls, the checks and the summary, with the store in ``work``; the exit
    status, or ``StartOver`` when a pass over the site takes too long for ``revisit``."""
    path = work / "crawl.lmdb"
    logs = [work / f"pages-{n}.jsonl" for n in (1, 2, 3)]
    for old in [*logs, path, path.with_name(path.name + "-lock")]:  # a demo starts afresh
        old.unlink(missing_ok=True)
    expected = site.expected()
    hosts = sorted({origin.split("//")[1] for origin in site.origins})
    say(f"crawlstore demo: a site of {len(expected)} pages (redirects included) and an endless "
        f"calendar, on {len(hosts)} hosts ({', '.join(hosts)})")  # fmt: skip
    say(f"the store: {path}")
    say(
        "watch it in a browser as it runs, from another terminal: crawlstore dashboard "
        f"{shlex.quote(str(path))}\n"
    )
    crawl = partial(command, site, path, revisit, TRAP_BUDGET)

    first, pace = kill_part_way(crawl(), logs[0], len(expected) // 3, revisit / 2)
    before = [set(), visited(statuses(path))]
    say(f"   killed after {first.seconds:.1f}s: {len(before[1])} pages were in the store")
    one_pass = pace * (len(expected) + TRAP_BUDGET)
    if revisit < 1.25 * one_pass:
        start_over(f"about {one_pass:.0f}s", 2 * one_pass, revisit)
    second = resume(crawl(), logs[1], path, expected, (before[1], when(first.pages[0])), revisit)
    found = statuses(path)
    before.append(visited(found))
    came_due = len(Visits([second], before[1:2]).revisits())
    say(f"   the first pass was over after {second.seconds:.1f}s: {len(before[2] - before[1])} "
        f"pages more, {len(expected & before[2])} of the site's {len(expected)} in all"
        + (f" ({came_due} revisits came due meanwhile)" if came_due else ""))  # fmt: skip
    checks = check_crawl(site, path, first.pages, second.pages, revisit, TRAP_BUDGET)

    changed = [site.page_path(n) for n in range(3, site.size, site.size // 5)][:5]
    for page in changed:
        site.change(page)
    due = revisits_due(found)
    third = revisit_round(crawl("--idle", f"{revisit:g}"), logs[2], due, len(changed))
    checks += check_revisit(site, third.pages, changed, due, revisit)

    say("the store's counters (as crawlstore stats shows them), each the sum of its parts")
    for line in summary(path, statuses(path), expected, Visits([first, second, third], before)):
        say(f"  {line}")
    blocked = (third.summary or second.summary or {}).get("blocked") or ["none"]
    say(f"  {'trap prefixes':<15}{', '.join(blocked)} (a budget of {TRAP_BUDGET} URLs a "
        "prefix)\n")  # fmt: skip
    return _verdict(checks, path)


def _verdict(checks: list[Check], path: Path) -> int:
    say("checks")
    for check in checks:
        say(f"  {'ok  ' if check.ok else 'FAIL'} {check.what}")
        if not check.ok:
            say(f"       {check.detail}")
    failed = [c for c in checks if not c.ok]
    say(f"\n{len(checks) - len(failed)} of {len(checks)} checks passed\n")
    say(f"the store is kept in {path.parent}, with the page logs of the three crawls; look "
        "into it with")  # fmt: skip
    for line in commands(path):
        say(f"  {line}")
    return 1 if failed else 0
