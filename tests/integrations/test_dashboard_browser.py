"""The dashboard's page in a real browser (Debian's Chromium through its ChromeDriver, driven by
selenium), beside a running crawl of the demo site: it loads without console errors, its
chart grows, its lookup finds a done URL and says an unknown one is unknown; once the crawl is
stopped, its totals equal ``crawlstore stats --json``. A failing test keeps a screenshot in
``$CRAWLSTORE_ARTEFACTS`` (else the test's directory)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from cli_helpers import COMMAND, cli

from crawlstore import Failed, Seed, Store
from crawlstore.dashboard import Dashboard
from crawlstore.demo.site import DemoSite

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:  # pragma: no cover - the test extra brings it
    webdriver = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    webdriver is None or CHROMIUM is None or DRIVER is None,
    reason="the browser tests need selenium (pip install -e '.[test]') and Chromium with its "
    "ChromeDriver (Debian: apt-get install chromium chromium-driver)",
)
#: What a cell of the page shows before its first refresh (an en dash).
EMPTY = "\u2013"
#: Seconds a wait for the page may take on a busy machine (each wait ends at its event).
PATIENCE = 60


@pytest.fixture
def browser(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    try:
        yield driver
        report = getattr(request.node, "call_report", None)
        if report is not None and report.failed:
            keep = Path(os.environ.get("CRAWLSTORE_ARTEFACTS", tmp_path))
            keep.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(keep / f"{request.node.name}.png"))
    finally:
        driver.quit()


@pytest.fixture
def crawling(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A store being written by ``crawlstore crawl`` of the demo site (slow pages: it runs
    for the whole test)."""
    store = tmp_path / "crawl.lmdb"
    with DemoSite(pages=400, hosts=2, seed=3, slow=0.3) as site:
        hosts = sorted({urlsplit(o).hostname or "" for o in site.origins})
        argv = [*COMMAND, "crawl", site.url(site.page_path(0)), "--store", str(store),
                *(a for h in hosts for a in ("--allow-host", h)), "--delay", "0",
                "--concurrency", "2", "--quiet"]  # fmt: skip
        child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)  # fmt: skip
        try:
            wait_until(lambda: _done(store) >= 2, "the crawl's first pages")
            yield store, child
        finally:
            child.kill()
            child.wait()


def _done(store: Path) -> int:
    if not store.exists():
        return 0
    with Store.open(store, readonly=True) as s:
        return sum(s.frontier(crawl=c).stats().done for c in s.crawls())


def wait_until(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + PATIENCE
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"no {what} within {PATIENCE} s"
        time.sleep(0.1)


def cell(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def test_the_page_beside_a_running_crawl(browser: Any, crawling: tuple[Path, Any]) -> None:
    store, _ = crawling
    with Dashboard(str(store)).start() as board:
        browser.get(board.url)
        wait = WebDriverWait(browser, PATIENCE)
        wait.until(lambda d: cell(d, "[data-stat=done]") not in ("", EMPTY))
        chart = browser.find_element(By.CSS_SELECTOR, "#chart polyline")
        first = len(chart.get_attribute("points").split())
        wait.until(lambda d: len(chart.get_attribute("points").split()) > max(first, 1))
        assert browser.find_element(By.ID, "error").get_attribute("hidden") is not None

        with Store.open(store, readonly=True) as s:
            (done,) = s.frontier(crawl=s.crawls()[0]).urls(state="done", limit=1)
        lookup(browser, done.url)
        wait.until(lambda d: d.find_element(By.ID, "lookup-result").get_attribute("data-state")
                   == "done")  # fmt: skip
        assert "last outcome done 200" in cell(browser, "#lookup-result")
        lookup(browser, "https://unknown.example/never")
        wait.until(lambda d: "unknown to this crawl" in cell(d, "#lookup-result"))

        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []


def test_a_stopped_crawl_shows_the_totals_of_stats(
    browser: Any, crawling: tuple[Path, subprocess.Popen[str]]
) -> None:
    store, child = crawling
    child.kill()
    child.wait()
    stats = json.loads(cli("stats", store, "--json").stdout)["crawls"]
    ((name, crawl),) = stats.items()
    with Dashboard(str(store)).start() as board:
        browser.get(board.url)
        WebDriverWait(browser, PATIENCE).until(
            lambda d: cell(d, "[data-stat=done]") not in ("", EMPTY)
        )
        shown = {c.get_attribute("data-stat"): c.text
                 for c in browser.find_elements(By.CSS_SELECTOR, "[data-stat]")}  # fmt: skip
    assert shown == {k: f"{crawl['stats'][k]:,}" for k in shown}
    assert name in cell(browser, "#crawl")


def test_the_recent_failures_and_revisits(browser: Any, tmp_path: Path) -> None:
    store = tmp_path / "failing.lmdb"
    with Store.open(store) as s:
        f = s.frontier(crawl="failing", delay=0)
        f.push_many([Seed.get(f"https://a.test/{i}") for i in range(3)])
        for i, held in enumerate(f.pop_many(3)):
            f.report(Failed(held.seed, status=404 + i, reason="not found"))
        f.core.schedule(Seed.get("https://a.test/0"), time.time() + 600, kind="revisit")
    with Dashboard(str(store)).start() as board:
        browser.get(board.url)
        WebDriverWait(browser, PATIENCE).until(lambda d: cell(d, "#revisits-due") != EMPTY)
        recent = board.panels.recent("failing")
        rows = browser.find_elements(By.CSS_SELECTOR, "#failures tbody tr")
        shown = [[td.text for td in row.find_elements(By.TAG_NAME, "td")][1:] for row in rows]
        assert shown == [[x["url"], f"{x['status']} not found"] for x in recent["failures"]]
        assert len(shown) == 3 and cell(browser, "#revisits-due") == "1"
        reasons = browser.find_elements(By.CSS_SELECTOR, "#reasons tbody tr")
        assert [r.text for r in reasons] == ["a.test 404 not found 1", "a.test 405 not found 1",
                                             "a.test 406 not found 1"]  # fmt: skip
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []


def lookup(browser: Any, url: str) -> None:
    box = browser.find_element(By.ID, "lookup-url")
    box.clear()
    box.send_keys(url)
    browser.find_element(By.CSS_SELECTOR, "#lookup button").click()
