"""``crawlstore import --from-jobdir``: a JOBDIR that Scrapy itself wrote (a real crawl of a
site on 127.0.0.1, stopped cleanly with requests still queued) goes into a crawl that holds
exactly what Scrapy's own scheduler resumes from it, and a seen set of every fingerprint its
dupefilter saw; a damaged JOBDIR is refused and leaves the store as it was."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("scrapy")

from cli_helpers import cli
from scrapy import Request
from scrapy.core.scheduler import Scheduler
from scrapy.utils.request import RequestFingerprinter, request_from_dict
from scrapy.utils.test import get_crawler
from website import serve

from crawlstore import Ready, Seed, Store
from crawlstore.cli import main
from crawlstore.scrapy.requests import seed_to_dict

SPIDER = """
import datetime, sys
import scrapy
from scrapy.crawler import CrawlerProcess


class Site(scrapy.Spider):
    name = "site"

    def __init__(self, base="", **kwargs):
        super().__init__(**kwargs)
        self.base = base

    async def start(self):
        for i in range(6):  # two fetched first, four left in a start queue, behind the links
            yield scrapy.Request(f"{self.base}/s{i}", priority=100 if i < 2 else -5)

    def parse(self, response):
        yield {"url": response.url}
        port = self.base.rsplit(":", 1)[1]
        for n in range(12):
            host = "localhost" if n % 2 else "127.0.0.1"  # two download slots, never fetched
            url = f"http://{host}:{port}{response.url[len(self.base):]}/p{n}"
            if n % 4 == 0:
                yield scrapy.FormRequest(url, formdata={"n": str(n)}, priority=n % 3,
                                         callback=self.parse_form, cb_kwargs={"n": n},
                                         meta={"tag": "form"}, errback=self.failed)
            elif n == 7:  # pickles, but msgpack cannot keep a date: skipped with a warning
                yield response.follow(url, meta={"when": datetime.date(2020, 1, 1)})
            elif n == 5:  # Scrapy keeps the dot segments, a seed's URL does not
                yield response.follow(url.replace("/p5", "/x/../p5"))
            elif n == 3:
                yield response.follow(url, dont_filter=True)
            else:
                yield response.follow(url, priority=n % 3 - 1, headers={"X-N": str(n)},
                                      flags=["followed"], cookies={"c": str(n)})

    def parse_form(self, response, n):
        yield {"n": n}

    def failed(self, failure):
        pass


if __name__ == "__main__":
    base, jobdir, settings = sys.argv[1], sys.argv[2], dict(arg.split("=") for arg in sys.argv[3:])
    process = CrawlerProcess({"JOBDIR": jobdir, "CLOSESPIDER_PAGECOUNT": 2,
                              "CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "ERROR",
                              "TELNETCONSOLE_ENABLED": False, **settings})
    process.crawl(Site, base=base)
    process.start()
"""


def _read_fingerprints(data: bytes) -> list[bytes]:
    """The fingerprints of a ``requests.seen``, read as the installed Scrapy reads them (2.19
    writes a length and the bytes; earlier versions a hex line each)."""
    from scrapy import dupefilters

    read = getattr(dupefilters, "_read_fingerprints", None)
    if read is not None:
        return list(read(data))
    return [bytes.fromhex(line) for line in data.decode().split()]


KINDS = {
    "lifo-per-slot": {},  # Scrapy's defaults: LIFO disk queues, one priority queue a slot
    "fifo-one-queue": {"SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
                       "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.ScrapyPriorityQueue"},
}  # fmt: skip


@pytest.fixture(scope="module")
def spider(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    path = tmp_path_factory.mktemp("spider") / "jobspider.py"
    path.write_text(SPIDER)
    spec = importlib.util.spec_from_file_location("jobspider", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def jobdirs(spider: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A JOBDIR of each kind, written by a Scrapy crawl stopped after two pages."""
    root = tmp_path_factory.mktemp("jobdirs")
    out = {}
    with serve({f"/s{i}": ("a start page", 1) for i in range(6)}) as site:
        for kind, settings in KINDS.items():
            out[kind] = root / kind
            args = [f"{k}={v}" for k, v in settings.items()]
            subprocess.run([sys.executable, spider.__file__, site.base, str(out[kind]), *args],
                           check=True, timeout=60, capture_output=True)  # fmt: skip
            assert (out[kind] / "requests.queue" / "active.json").exists()
    return out


def resumed(spider: ModuleType, jobdir: Path, copy: Path, settings: dict[str, str]) -> list[Any]:
    """The requests Scrapy's own scheduler hands out from (a copy of) the JOBDIR."""
    shutil.copytree(jobdir, copy)
    crawler = get_crawler(spider.Site, {"JOBDIR": str(copy), **settings})
    crawler.spider = spider.Site.from_crawler(crawler, base="")
    crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots={}))  # nothing downloads
    scheduler = Scheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    out = []
    while (request := scheduler.next_request()) is not None:
        out.append(request)
    return out


def digest(root: Path) -> str:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return hashlib.sha1(b"".join(p.read_bytes() for p in files)).hexdigest()


@pytest.mark.parametrize("kind", KINDS)
def test_the_crawl_holds_what_scrapy_resumes(
    kind: str, jobdirs: dict[str, Path], spider: ModuleType, tmp_path: Path
) -> None:
    jobdir = jobdirs[kind]
    before = digest(jobdir)
    scrapy_order = resumed(spider, jobdir, tmp_path / "resume", KINDS[kind])
    spider_ = spider.Site(base="")
    expected = [r for r in scrapy_order if "when" not in r.meta]
    assert len(expected) >= 20 and len({r.priority for r in expected}) >= 4
    assert sum(1 for r in expected if r.meta.get("is_start_request")) == 4  # a start queue
    store = tmp_path / "s.lmdb"
    done = cli("import", store, "--from-jobdir", jobdir, "--crawl", "scrapy", "--json")
    report = json.loads(done.stdout)
    assert report | {"crawl": "scrapy", "requests": len(scrapy_order), "queued": len(expected),
                     "skipped": 2, "duplicates": 0} == report  # fmt: skip
    skipped = [r.url for r in scrapy_order if "when" in r.meta]
    assert all(f"skipped {url}: meta['when'] (date)" in done.stderr for url in skipped)
    assert digest(jobdir) == before  # the JOBDIR is only read
    with Store.open(store) as s:
        frontier = s.frontier(crawl="scrapy")
        popped = []
        while isinstance(ready := frontier.pop(), Ready):
            popped.append(ready.seed)
        rebuilt = [request_from_dict(seed_to_dict(seed), spider=spider_) for seed in popped]
        # highest priority first; within one, each slot in the order Scrapy hands it out
        assert [r.priority for r in rebuilt] == sorted((r.priority for r in rebuilt), reverse=True)
        if kind == "fifo-one-queue":  # one priority queue: the same order, all through
            assert [r.to_dict(spider=spider_) for r in rebuilt] == [
                r.to_dict(spider=spider_) for r in expected]  # fmt: skip
        for host in ("127.0.0.1", "localhost"):
            mine = [r.to_dict(spider=spider_) for r in rebuilt if f"//{host}:" in r.url]
            theirs = [r.to_dict(spider=spider_) for r in expected if f"//{host}:" in r.url]
            assert mine == theirs and mine
        assert [seed.depth for seed in popped] == [r.meta.get("depth", 0) for r in rebuilt]
        fingerprints = _read_fingerprints((jobdir / "requests.seen").read_bytes())
        seen = {fp[:16] for fp in fingerprints}
        assert set(s.seen(crawl="scrapy")) == seen and len(s.seen(crawl="scrapy")) == len(seen)
        fingerprinter = RequestFingerprinter()  # a Scrapy dupefilter over the crawl: all seen
        assert all(fingerprinter.fingerprint(r)[:16] in seen for r in rebuilt if not r.dont_filter)
        assert any(r.dont_filter for r in rebuilt) and any("/x/../" in r.url for r in rebuilt)
        assert frontier.core.state("seen")["fingerprints"] == "scrapy"


def _lifo(jobdir: Path) -> Path:
    return next(p for p in sorted((jobdir / "requests.queue").rglob("*"))
                if p.is_file() and p.parent.name.startswith("127.0.0.1-"))  # fmt: skip


def _stale_header(jobdir: Path) -> None:
    lifo = _lifo(jobdir)
    lifo.write_bytes(struct.pack(">L", 1) + lifo.read_bytes()[4:])  # pushed after a close


def _stale_info(jobdir: Path) -> None:
    info = next((jobdir / "requests.queue").glob("*/info.json"))
    info.write_text(json.dumps({**json.loads(info.read_text()), "size": 0, "head": [0, 0]}))


def _unnamed(jobdir: Path) -> None:
    active = jobdir / "requests.queue" / "active.json"
    active.write_text(json.dumps(json.loads(active.read_text())[:-1]))


def test_a_damaged_jobdir_is_refused_and_the_store_is_unchanged(
    jobdirs: dict[str, Path], tmp_path: Path
) -> None:
    jobdir = tmp_path / "damaged"
    shutil.copytree(jobdirs["lifo-per-slot"], jobdir)
    lifo = _lifo(jobdir)
    lifo.write_bytes(lifo.read_bytes()[:-3])  # an unclean stop cut it short
    store = tmp_path / "s.lmdb"
    with Store.open(store) as s:
        s.frontier(crawl="other").push(Seed.get("https://a.example/"))
        before = list(s.export(crawl="other"))
    done = cli("import", store, "--from-jobdir", jobdir, "--crawl", "scrapy", check=3)
    assert f"{lifo}: damaged" in done.stderr and "nothing was imported" in done.stderr
    assert "Traceback" not in done.stderr and not done.stdout
    with Store.open(store) as s:
        assert s.crawls() == ["other"] and list(s.export(crawl="other")) == before
        assert len(s.seen(crawl="scrapy")) == 0
    files = sorted(tmp_path.iterdir())
    cli("import", tmp_path / "new.lmdb", "--from-jobdir", jobdir, check=3)
    assert sorted(tmp_path.iterdir()) == files  # no file created where there was none
    (jobdir / "requests.queue" / "active.json").unlink()  # a stop that never wrote it
    done = cli("import", store, "--from-jobdir", jobdir, check=3)
    assert "active.json is missing" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        ("lifo-per-slot", _stale_header, "holds more requests than that"),
        ("fifo-one-queue", _stale_info, r"holds more .* its info.json counts 0"),
        ("fifo-one-queue", _unnamed, "a queue active.json does not name"),
    ],
)
def test_what_an_unclean_stop_leaves_is_refused(
    kind: str, damage: Any, message: str, jobdirs: dict[str, Path], tmp_path: Path
) -> None:
    from crawlstore.errors import JobdirError
    from crawlstore.scrapy.jobdir import import_jobdir

    jobdir = tmp_path / "jobdir"
    shutil.copytree(jobdirs[kind], jobdir)
    damage(jobdir)
    with Store.open(tmp_path / "s.lmdb") as store:
        with pytest.raises(JobdirError, match=message):
            import_jobdir(store, jobdir)
        assert store.crawls() == []


def test_the_fingerprints_of_earlier_scrapy_and_a_cut_one(
    jobdirs: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from crawlstore.scrapy.jobdir import import_jobdir

    jobdir = tmp_path / "jobdir"
    shutil.copytree(jobdirs["lifo-per-slot"], jobdir)
    seen = jobdir / "requests.seen"
    fingerprints = list(_read_fingerprints(seen.read_bytes()))
    with Store.open(tmp_path / "s.lmdb") as store:
        seen.write_bytes(seen.read_bytes()[:-5])  # an unclean stop cut the last one
        assert import_jobdir(store, jobdir, crawl="cut").fingerprints == len(fingerprints) - 1
        assert "cut short" in caplog.text
        seen.write_text("".join(fp.hex() + "\n" for fp in fingerprints))  # Scrapy before 2.19
        assert import_jobdir(store, jobdir, crawl="hex").fingerprints == len(fingerprints)
        assert set(store.seen(crawl="hex")) == {fp[:16] for fp in fingerprints}


def test_without_scrapy_the_extra_is_named(jobdirs: dict[str, Path], tmp_path: Path) -> None:
    blocked = "import sys; sys.modules['scrapy'] = None; from crawlstore.cli import main; "
    done = subprocess.run(
        [sys.executable, "-c", blocked + "sys.exit(main(sys.argv[1:]))", "import",
         str(tmp_path / "s.lmdb"), "--from-jobdir", str(jobdirs["lifo-per-slot"])],
        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "pip install -e '.[scrapy]'" in done.stderr


def test_an_export_or_a_jobdir_not_both(jobdirs: dict[str, Path], tmp_path: Path) -> None:
    store, jobdir = str(tmp_path / "s.lmdb"), str(jobdirs["lifo-per-slot"])
    assert main(["import", store, "dump.jsonl", "--from-jobdir", jobdir]) == 2
    assert main(["import", store]) == 2
    assert main(["import", store, "dump.jsonl", "--json"]) == 2
    assert main(["import", store, "--from-jobdir", str(tmp_path)]) == 3  # not a JOBDIR


def test_a_request_a_seed_cannot_hold_is_named() -> None:
    from crawlstore.errors import InvalidSeed
    from crawlstore.scrapy.requests import seed_from_dict

    request = Request("https://a.example/", meta={"k": (1, 2)}).to_dict()
    with pytest.raises(InvalidSeed, match=r"meta\['k'\] \(tuple\)"):
        seed_from_dict(request)
    with pytest.raises(InvalidSeed, match="a key of cb_kwargs"):
        seed_from_dict({**request, "meta": {}, "cb_kwargs": {1: "x"}})
    with pytest.raises(InvalidSeed):
        seed_from_dict(Request("ftp://a.example/f").to_dict())
    seed = seed_from_dict(Request("https://a.example/", priority=-5, meta={"depth": 3}).to_dict())
    assert (seed.priority, seed.depth, seed.meta["scrapy"]["meta"]) == (-5, 3, {"depth": 3})
