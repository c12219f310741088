"""``crawlstore demo``, the README's first command: it runs, shows its progress, adds up its
summary, keeps its store, stops each crawl when its step is over (a slower machine makes it
start over with a longer revisit interval), its checks pass, a check that fails makes it fail,
and an error is one line."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from cli_helpers import COMMAND, cli

from crawlstore import Store
from crawlstore.crawler import CrawlOptions, crawl
from crawlstore.demo.checks import check_crawl
from crawlstore.demo.runs import COMMITTED, DemoError, Page, command, run_crawl
from crawlstore.demo.site import DemoSite
from crawlstore.demo.steps import StartOver, resume


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _added_up(out: str) -> list[str]:
    """The lines ``... total = n what + n what`` of ``out``, each checked to add up."""
    equations = [line for line in out.splitlines() if " = " in line]
    for line in equations:
        left, right = line.split(" = ")
        total = _number(left.split()[-1])
        parts = [_number(part.split()[0]) for part in right.split(" + ")]
        assert total == sum(parts), line
    return equations


def _step(out: str, number: int) -> str:
    """What the demo printed in step ``number``: up to the next step or blank line."""
    return re.split(r"\n(?:\d\. |\n)", out.split(f"\n{number}. ", 1)[1], maxsplit=1)[0]


def test_the_readme_command_ends_adds_up_and_keeps_its_store(tmp_path: Path) -> None:
    """``crawlstore demo`` as the README has it: every check passes, each step shows its
    progress as it goes, the summary adds up (with what ``crawlstore stats`` says), and the
    store is kept, with the commands that show it."""
    done = subprocess.run([*COMMAND, "demo"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TMPDIR": str(tmp_path)})  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, (out, done.stderr)
    assert "10 of 10 checks passed" in out and "FAIL" not in out and not done.stderr
    for number, unit in ((1, "pages committed"), (2, "pages of the site"), (3, "revisits")):
        shown = re.findall(rf"^   (\d+) of \d+ {unit}$", _step(out, number), re.M)
        assert shown and shown == sorted(shown, key=int), (number, shown)
    equations = _added_up(out)
    assert len(equations) >= 9, equations
    assert re.search(r"the round took [\d.]+s: +(\d+) = ", out)
    [kept] = [Path(p) for p in re.findall(r"the store is kept in (\S+),", out)]
    assert kept.parent == tmp_path and (kept / "crawl.lmdb").is_file()
    [watch] = re.findall(r"from another terminal: (crawlstore dashboard .*)$", out, re.M)
    assert shlex.split(watch)[2] == str(kept / "crawl.lmdb")  # the page of the running crawl
    shown_commands = out.split("look into it with\n")[1].splitlines()
    assert [shlex.split(c)[:2] for c in shown_commands] == [
        ["crawlstore", "stats"], ["crawlstore", "urls"], ["crawlstore", "peek"]]  # fmt: skip
    said = [cli(*shlex.split(c)[1:]).stdout for c in shown_commands]
    visits = re.search(r"^  done +([\d,]+) = ", out, re.M)
    assert visits and f"done {visits[1]}," in said[0]
    assert "robots.txt" in said[1] and "revisit" in said[2]


def test_a_slow_machine_makes_it_start_over_with_a_longer_interval(tmp_path: Path) -> None:
    """Revisits go ahead of pages not yet crawled, so with an interval shorter than a pass the
    pass would never end. One second is shorter than a pass over this site by design (at
    least 12 pages of one host, 0.02s apart, among the first 24): the demo sees it in its first
    crawl, starts over with a longer interval, and ends with its checks passed."""
    done = cli("demo", "--dir", tmp_path, "--pages", "60", "--hosts", "2", "--revisit", "1",
               check=0)  # fmt: skip
    out = done.stdout
    [longer] = re.findall(r"too long for revisits every 1s: starting over with revisits every "
                          r"(\d+)s", out)  # fmt: skip
    assert int(longer) > 1 and "10 of 10 checks passed" in out
    _added_up(out)


def test_a_crawl_that_never_drains_stops_after_one_revisit_round(tmp_path: Path) -> None:
    """Revisits every second keep the crawl from ever running out of work; the demo's crawl
    stops it with SIGTERM once every page was visited and visited again: one round."""
    with DemoSite(pages=12, hosts=1, slow=0.1) as site:
        pages = {url for url in site.expected() if re.search(r"/\d+$", url)}
        visits: Counter[str] = Counter()

        def step(page: Page) -> bool:
            if page.get("outcome") in COMMITTED:
                visits[page["url"]] += 1
            assert visits.total() < 50 * len(pages), "the crawl went on after the round"
            return all(visits[url] >= 2 for url in pages)

        args = command(site, tmp_path / "s.lmdb", 1.0, 40)
        done = run_crawl(args, tmp_path / "pages.jsonl", step, kill=False)
    assert done.summary is not None and done.summary["ended"] == "stopped"
    assert all(visits[url] >= 2 for url in pages)
    assert len((tmp_path / "pages.jsonl").read_text().splitlines()) == len(done.pages)


def test_a_crawl_that_fails_is_one_line_and_no_traceback(tmp_path: Path) -> None:
    failing = [sys.executable, "-c", "import sys; sys.exit('no such store')"]
    with pytest.raises(DemoError, match=r"^the crawl failed \(exit 1\): no such store$"):
        run_crawl(failing, tmp_path / "pages.jsonl", lambda page: False, kill=False)
    (tmp_path / "a-file").write_text("")
    done = cli("demo", "--dir", tmp_path / "a-file", check=3)  # a file: no directory there
    assert done.stderr.startswith("crawlstore demo: ") and len(done.stderr.splitlines()) == 1
    for bad in (["--pages", "5"], ["--revisit", "0"]):
        done = cli("demo", *bad, check=2)
        assert "Traceback" not in done.stderr and "crawlstore demo: error:" in done.stderr


def test_a_crawl_cut_short_fails_the_checks(tmp_path: Path) -> None:
    path = tmp_path / "s.lmdb"
    with DemoSite(pages=40, hosts=2, slow=0.1) as site:
        hosts = tuple(sorted({o.split("//")[1].split(":")[0] for o in site.origins}))
        options = CrawlOptions(seeds=(site.url(site.page_path(0)),), allow_hosts=hosts,
                               delay=0, max_pages=5, idle=0.5)  # fmt: skip
        with Store.open(path) as store:
            asyncio.run(crawl(store, options))
        checks = {c.what.split(" (")[0]: c for c in check_crawl(site, path, [], [], 15.0, 40)}
    assert not checks["every page of the site was crawled"].ok
    assert checks["robots.txt obeyed: nothing under /private/ was requested"].ok


def test_revisits_that_take_over_the_resumed_crawl_make_it_start_over(tmp_path: Path) -> None:
    """Should a pass turn out slower than the first crawl showed, revisits would crowd out the
    pages not yet crawled and the resumed crawl would never end: once it has done more
    revisits than the site has pages, the demo starts over with a longer interval."""
    again = ('import json, datetime\nwhile True:\n    at = datetime.datetime.now().isoformat()\n'
             '    print(json.dumps({"url": "http://x/1", "at": at, "outcome": "done"}), '
             'flush=True)\n')  # fmt: skip
    expected = {"http://x/1", "http://x/2", "http://x/3"}
    began = time.time()
    with pytest.raises(StartOver) as over:
        resume([sys.executable, "-c", again], tmp_path / "pages.jsonl", tmp_path / "s.lmdb",
                expected, ({"http://x/1"}, began), 1.0)  # fmt: skip
    assert over.value.interval > 1.0
    assert len((tmp_path / "pages.jsonl").read_text().splitlines()) == len(expected) + 1
