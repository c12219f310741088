"""The Scrapy scheduler, dupefilter and revalidation, in real Scrapy crawls run as their own
processes against a generated site on loopback addresses: a whole crawl, crawls killed with
SIGKILL and resumed, revisits answered with 304, Scrapy's scheduler with the dupefilter."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("scrapy")

from helpers import TESTS

from crawlstore import Store
from crawlstore.demo.site import DemoSite

SPIDER = TESTS / "scrapy_spider.py"


@pytest.fixture
def site() -> Any:
    with DemoSite(pages=60, hosts=2, seed=5, slow=0.1) as demo:
        yield demo


def crawl(site: DemoSite, store: Path, items: Path, **settings: Any) -> subprocess.Popen[str]:
    """The spider over ``site``, its hosts allowed (the offsite middleware drops ``/away``'s
    target), in a process of its own."""
    hosts = sorted({o.split("//")[1].split(":")[0] for o in site.origins})
    settings = {"TEST_ALLOWED": hosts, **settings}
    argv = [sys.executable, str(SPIDER), str(store), str(items), site.url(site.page_path(0)),
            json.dumps(settings)]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finished(child: subprocess.Popen[str]) -> dict[str, Any]:
    """The stats Scrapy dumped at the end of a run that ended by itself."""
    _, err = child.communicate(timeout=120)
    assert child.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    dumped = err[err.index("Dumping Scrapy stats:") :]
    stats = {}
    for line in dumped.splitlines()[1:]:
        key, sep, value = line.strip(" {},").partition("': ")
        if sep:
            stats[key.strip("'")] = value
    return stats


def states(store: Path) -> dict[str, str]:
    with Store.open(store, readonly=True) as opened:
        frontier = opened.frontier(crawl="site")
        found, after = {}, None
        while page := frontier.urls(after=after, limit=1000):
            found |= {u.url: u.state for u in page}
            after = page[-1].fingerprint
    return found


def pages_fetched(site: DemoSite) -> Counter[str]:
    """How often each page was answered in full or with a 304."""
    return Counter(p for _, _, p, s in site.log if p in site.pages and s in (200, 304))


def test_a_whole_crawl_matches_the_site(site: DemoSite, tmp_path: Path) -> None:
    store = tmp_path / "crawl.lmdb"
    stats = finished(crawl(site, store, tmp_path / "items.jsonl"))
    fetched = pages_fetched(site)
    assert set(fetched) == set(site.pages) and max(fetched.values()) == 1  # each page once
    done = states(store)
    assert all(done[url] == "done" for url in site.expected())
    assert stats["finish_reason"] == "'finished'"
    assert int(stats["scheduler/enqueued/disk"]) == int(stats["scheduler/dequeued/disk"])
    assert int(stats["crawlstore/acked"]) == int(stats["scheduler/dequeued"])  # leases ended
    flaky = [s for _, _, p, s in site.log if p == "/flaky"]
    assert flaky == [503, 200]  # Scrapy's RetryMiddleware, through the store
    redirects = [p for _, _, p, s in site.log if s in (301, 302)]
    assert redirects and all(done[site.url(p)] == "done" for p in redirects)
    assert "/away" in redirects  # its target is off the site: done all the same
    items = [json.loads(line) for line in (tmp_path / "items.jsonl").read_text().splitlines()]
    assert len(items) == len(fetched)
    again = finished(crawl(site, store, tmp_path / "again.jsonl"))  # nothing left to do
    assert pages_fetched(site) == fetched and "scheduler/dequeued" not in again
    assert int(again["crawlstore/start_known"]) == 1  # the start request was not fetched again


def test_killed_at_random_points_and_resumed_fetches_every_page_once_but_in_flight(
    site: DemoSite, tmp_path: Path
) -> None:
    store = tmp_path / "crawl.lmdb"
    rng = random.Random(11)
    committed: dict[str, int] = {}  # done in the store at a kill: its fetches by then
    in_flight_at_kills = 0
    for run in range(4):
        before = len(site.log)
        child = crawl(site, store, tmp_path / f"items-{run}.jsonl", CONCURRENT_REQUESTS=4)
        at = before + rng.randrange(3, 12)
        deadline = time.monotonic() + 60
        while child.poll() is None and len(site.log) < at and time.monotonic() < deadline:
            time.sleep(0.001)
        assert child.poll() is None, "the crawl ended before its kill"
        child.send_signal(signal.SIGKILL)
        child.wait()
        now, fetched = states(store), pages_fetched(site)
        for path in site.pages:
            if now.get(site.url(path)) == "done":
                committed.setdefault(path, fetched[path])
        in_flight_at_kills += sum(1 for state in now.values() if state == "in_flight")
    fetched_before = pages_fetched(site)
    finished(crawl(site, store, tmp_path / "items-last.jsonl"))
    fetched = pages_fetched(site)
    done = states(store)
    assert all(done[url] == "done" for url in site.expected())  # none lost
    assert set(fetched) == set(site.pages)  # every page fetched
    again = [p for p, count in committed.items() if fetched[p] != count]
    assert committed and not again  # a page committed before a kill is never fetched again
    refetched = sum(fetched.values()) - len(fetched)
    assert refetched <= in_flight_at_kills  # only what was in flight at a kill
    assert sum(fetched_before.values()) < sum(fetched.values())


def test_revisits_come_back_and_are_answered_304(site: DemoSite, tmp_path: Path) -> None:
    store = tmp_path / "crawl.lmdb"
    child = crawl(site, store, tmp_path / "items.jsonl", CRAWLSTORE_REVISIT={"page": 2})
    tagged = [p for p, page in site.pages.items() if page.validators and p != site.page_path(0)]
    without = [p for p, page in site.pages.items() if not page.validators]

    def revisited() -> bool:  # each tagged page with validators answered 304, the rest twice
        fetched, not_modified = pages_fetched(site), {p for _, _, p, s in site.log if s == 304}
        return not_modified >= set(tagged) and all(fetched[p] >= 2 for p in without)

    came_back = site.wait_for(revisited, timeout=120)
    child.send_signal(signal.SIGINT)  # a revisiting spider runs on until it is stopped
    stats = finished(child)
    assert came_back, "a page was not revisited in 120 s"
    assert stats["finish_reason"] == "'shutdown'"
    not_modified = Counter(p for _, _, p, s in site.log if s == 304)
    assert int(stats["crawlstore/unchanged"]) == sum(not_modified.values())
    start, kept = site.url(site.page_path(0)), states(store)
    assert kept.pop(start) == "done" and set(kept) == site.expected() - {start}
    # each comes back: its revisit scheduled, or queued (due, or leased ahead at the stop)
    assert set(kept.values()) <= {"scheduled", "queued"}
    with Store.open(store, readonly=True) as opened:
        left = opened.frontier(crawl="site").stats()
    assert int(stats["crawlstore/scheduled"]) == left.scheduled and left.in_flight == 0
    assert left.unchanged == sum(not_modified.values())


def test_scrapy_s_own_scheduler_with_the_dupefilter_on_disk(site: DemoSite, tmp_path: Path) -> None:
    store = tmp_path / "seen.lmdb"
    settings = {"SCHEDULER": "scrapy.core.scheduler.Scheduler", "DOWNLOADER_MIDDLEWARES": {},
                "DUPEFILTER_CLASS": "crawlstore.scrapy.DupeFilter"}  # fmt: skip
    first = finished(crawl(site, store, tmp_path / "a.jsonl", **settings))
    assert set(pages_fetched(site)) == set(site.pages) and int(first["dupefilter/filtered"]) > 0
    with Store.open(store, readonly=True) as opened:
        seen = len(opened.seen(crawl="site"))
    assert seen == len(site.expected())  # every request, once
    before = pages_fetched(site)
    second = finished(crawl(site, store, tmp_path / "b.jsonl", **settings))
    assert pages_fetched(site) - before == Counter({site.page_path(0): 1})  # the start URL
    assert int(second["dupefilter/filtered"]) > 0  # its links: seen in the first run


def test_a_request_no_seed_can_hold_waits_in_memory_and_is_counted(
    site: DemoSite, tmp_path: Path
) -> None:
    store = tmp_path / "crawl.lmdb"
    stats = finished(crawl(site, store, tmp_path / "items.jsonl", TEST_UNSERIALIZABLE=True))
    assert int(stats["scheduler/unserializable"]) == 1
    assert int(stats["scheduler/enqueued/memory"]) == 1 == int(stats["scheduler/dequeued/memory"])
    assert [s for _, _, p, s in site.log if p == "/docs/1?kept=memory"] == [404]  # crawled
    assert set(pages_fetched(site)) == set(site.pages)  # and the rest as ever


def test_settings_are_checked(tmp_path: Path) -> None:
    from scrapy.exceptions import NotConfigured
    from scrapy.settings import Settings

    from crawlstore.scrapy import CrawlstoreSettings

    with pytest.raises(NotConfigured, match="CRAWLSTORE_PATH"):
        CrawlstoreSettings.read(Settings())
    jobdir = CrawlstoreSettings.read(Settings({"JOBDIR": str(tmp_path / "job")}))
    assert jobdir.path == tmp_path / "job" / "crawlstore.lmdb" and jobdir.durability == "safe"
    read = CrawlstoreSettings.read(Settings({"CRAWLSTORE_PATH": "x.lmdb",
                                              "CRAWLSTORE_REVISIT": {"a": "1h", "b": 90},
                                              "CONCURRENT_REQUESTS_PER_DOMAIN": 3}))  # fmt: skip
    assert read.revisit == (("a", 3600.0), ("b", 90.0)) and read.max_per_host == 3
    with pytest.raises(ValueError, match="interval"):
        CrawlstoreSettings.read(
            Settings({"CRAWLSTORE_PATH": "x", "CRAWLSTORE_REVISIT": {"a": "soon"}})
        )
    with pytest.raises(ValueError, match="positive"):
        CrawlstoreSettings.read(Settings({"CRAWLSTORE_PATH": "x", "CRAWLSTORE_REVISIT": {"a": 0}}))
