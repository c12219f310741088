"""``crawlstore demo``, the README's first command: it runs, its checks pass, and a check that
fails makes it fail."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_cli import cli

from crawlstore import Store
from crawlstore.crawler import CrawlOptions, crawl
from crawlstore.demo.checks import check_crawl
from crawlstore.demo.site import DemoSite


def test_the_demo_kills_resumes_revisits_and_checks(tmp_path: Path) -> None:
    done = cli("demo", "--dir", tmp_path, check=0, timeout=600)  # 20 s idle, 110 s beside hogs
    out = done.stdout
    assert "1. crawl: killed with SIGKILL after" in out
    assert "2. the same command again: it resumed" in out
    assert "unchanged (304)" in out and "FAIL" not in out
    checks = [line for line in out.splitlines() if line.startswith("  ok ")]
    assert len(checks) == 10 and "10 of 10 checks passed" in out
    assert (tmp_path / "crawl.lmdb").exists()  # --dir keeps the store
    cli("verify", tmp_path / "crawl.lmdb", check=0)


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
