"""``crawlstore dashboard`` over HTTP (the page in a real browser: ``test_dashboard_browser``):
its JSON panels and ``/metrics`` say what the store holds, it never writes, and bad input gets
a one-line error (exit 3) with nothing created."""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import subprocess
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import COMMAND, cli

from crawlstore import Done, Failed, ManualClock, Seed, Store
from crawlstore.cli.dashboard import _loopback
from crawlstore.dashboard import Dashboard
from crawlstore.frontier.traps import TrapPolicy

T0 = 1_800_000_000.0


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A store with a crawl ``web``: 50 URLs over 5 hosts (cap 2), 6 in flight, one done,
    one failed, one queue blocked; and an empty crawl ``other``."""
    path = tmp_path / "crawl.lmdb"
    clock = ManualClock(T0)
    with Store.open(path, clock=clock) as store:
        f = store.frontier(crawl="web", queues="host", delay=0, max_in_flight=2)
        f.push_many([Seed.get(f"https://h{i % 5}.test/{i}") for i in range(50)])
        held = f.pop_many(6)
        f.report(Done(held[0].seed, status=200))
        f.report(Failed(held[1].seed, reason="timeout"))
        f.block_queue("h4.test", T0 + 600)
        store.frontier(crawl="other").push(Seed.get("https://o.test/"))
    return path


def get(board: Dashboard, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(board.url + path.lstrip("/"), timeout=30) as reply:
            body = reply.read()
            kind = reply.headers["Content-Type"]
            status = reply.status
    except urllib.error.HTTPError as exc:
        body, kind, status = exc.read(), exc.headers["Content-Type"], exc.code
    return status, json.loads(body) if kind == "application/json" else body.decode()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_panels_say_what_the_store_holds(path: Path) -> None:
    stats = json.loads(cli("stats", path, "--json").stdout)["crawls"]["web"]["stats"]
    with Dashboard(str(path), crawl="web").start() as board:
        assert get(board, "/api/crawls")[1] == {"crawls": ["other", "web"], "shown": "web"}
        status, summary = get(board, "/api/summary")
        assert status == 200 and summary["stats"] == stats
        assert summary["store"]["format"] == 4 and summary["store"]["file_bytes"] > 0
        queues = get(board, "/api/queues")[1]
        assert queues["scanned"] == 5 and queues["complete"]
        assert [q["key"] for q in queues["blocked"]] == ["h4.test"]
        assert queues["blocked"][0]["blocked_until"] == T0 + 600
        assert {q["key"] for q in queues["at_cap"]} == {
            q["key"] for q in queues["busiest"] if q["in_flight"] == 2
        }
        assert queues["busiest"][0]["queued"] + queues["busiest"][0]["in_flight"] == 10
        done = get(board, "/api/url?url=https://h0.test/0")[1]
        assert done["state"] == "done" and done["queue"] == "h0.test"
        assert done["outcome"]["status"] == 200
        assert get(board, "/api/url?url=https://h0.test/5")[1]["outcome"]["reason"] == "timeout"
        assert get(board, "/api/url?url=https://nowhere.test/")[1]["state"] == "unknown"
        assert get(board, "/api/url?url=not%20a%20url")[1]["state"] == "invalid"
        other = get(board, "/api/summary?crawl=other")[1]
        assert other["stats"]["queued"] == 1
        page = get(board, "/")[1]
        assert '<option value="web" selected>web</option>' in page
        assert "/static/dashboard.js" in page and "http" not in page.split("<body")[0][50:]
        assert "refresh" in get(board, "/static/dashboard.js")[1]


def test_recent_failures_reasons_traps_and_revisits(tmp_path: Path) -> None:
    """The panels read from the crawl's indexes: the newest failures, the commonest reasons by
    host among them, the prefixes at a trap budget, the revisits due within the hour."""
    path = tmp_path / "recent.lmdb"
    clock = ManualClock(T0)
    with Store.open(path, clock=clock) as store:
        f = store.frontier(crawl="web", queues="host", delay=0, max_in_flight=None)
        f.push_many([Seed.get(f"https://h{i % 2}.test/{i}") for i in range(8)])
        for i, held in enumerate(f.pop_many(8)):
            clock.advance(1)
            if i < 6:
                reason = ("timeout", None) if i % 3 else (None, 503)
                f.report(Failed(held.seed, reason=reason[0], status=reason[1]))
            else:
                f.report(Done(held.seed, status=200))
                f.core.schedule(held.seed, T0 + 1200 * (i - 5), kind="revisit")
        traps = f.avoid_traps_with(TrapPolicy(max_urls=1))
        traps.push_many([Seed.get(f"https://h0.test/cal/{i}") for i in range(4)])
        clock.advance(1)
        failed = [(u.url, u.outcome) for u in f.urls(state="failed", limit=10)]
    with Dashboard(str(path), crawl="web").start() as board:
        board.store.clock = clock  # (the revisits are counted from the store's clock)
        recent = get(board, "/api/recent")[1]
        metrics = get(board, "/metrics")[1]
    assert 'crawlstore_revisits_due{crawl="web"} 2.0' in metrics
    assert 'crawlstore_trap_prefixes_blocked{crawl="web"} 1.0' in metrics
    assert recent["window"] == 6 and len(recent["failures"]) == 6
    assert [x["at"] for x in recent["failures"]] == [T0 + 6 - i for i in range(6)]
    assert {(x["url"], x["status"], x["reason"]) for x in recent["failures"]} == {
        (url, o.status, o.reason) for url, o in failed if o is not None}  # fmt: skip
    labels = Counter((url.split("/")[2], str(o.status or o.reason)) for url, o in failed if o)
    assert [(r["host"], r["reason"], r["count"]) for r in recent["reasons"]] == sorted(
        ((host, label, n) for (host, label), n in labels.items()), key=lambda r: (-r[2], r)
    )
    assert sum(labels.values()) == 6 and len(labels) > 1
    assert recent["traps_blocked"] == 1
    assert [(t["prefix"], t["refused"]) for t in recent["traps"]] == [("https://h0.test/cal/", 3)]
    assert recent["revisits"] == {"overdue": 0, "until": T0 + 9 + 3600, "due": 2}


def test_the_pages_a_second_grow_from_successive_reads(path: Path) -> None:
    with Dashboard(str(path), crawl="web").start() as board:
        first = board.panels.summary("web")
        assert first["rates"] == []
        board.panels._history["web"][0] = (first["at"] - 10, 0)  # ten seconds ago: none done
        second = board.panels.summary("web")
        (rate,) = second["rates"]
        assert rate["rate"] == pytest.approx(2 / (second["at"] - first["at"] + 10), rel=0.01)


def test_metrics_in_the_prometheus_text_format(path: Path) -> None:
    with Dashboard(str(path)).start() as board:
        text = get(board, "/metrics")[1]
    assert 'crawlstore_urls{crawl="web",state="in_flight"} 4.0' in text
    assert 'crawlstore_done_total{crawl="web"} 1.0' in text
    assert 'crawlstore_failed_total{crawl="web"} 1.0' in text
    assert 'crawlstore_urls{crawl="other",state="queued"} 1.0' in text
    assert "crawlstore_file_bytes" in text


def test_what_the_page_shows_is_escaped(path: Path) -> None:
    with Dashboard(str(path)).start() as board:
        page = get(board, "/?crawl=%40OPTIONS%40%20onload%3Dalert(1)%20")[1]
    body = page[page.index("<body") : page.index(">", page.index("<body")) + 1]
    assert body == '<body data-crawl="@OPTIONS@ onload=alert(1) ">'


def test_a_dashboard_never_writes_the_store(path: Path) -> None:
    before = digest(path)
    with Dashboard(str(path)).start() as board:
        for page in ("/", "/api/summary", "/api/queues", "/api/url?url=https://h0.test/0",
                     "/metrics", "/api/summary?crawl=other",
                     "/api/summary?crawl=nope"):  # fmt: skip
            get(board, page)
    assert digest(path) == before


def test_an_unknown_crawl_is_named_and_nothing_is_created(path: Path) -> None:
    before = digest(path)
    with Dashboard(str(path)).start() as board:
        status, body = get(board, "/api/summary?crawl=nope")
        assert status == 404 and body == {"error": f"{path} holds no crawl 'nope'"}
    done = cli("dashboard", path, "--crawl", "nope", "--port", "0", check=3)
    assert (
        done.stderr == f"crawlstore dashboard: {path} holds no crawl 'nope' (nothing was created)\n"
    )
    assert digest(path) == before
    with Store.open(path, readonly=True) as store:
        assert store.crawls() == ["other", "web"]


def test_bad_input_is_one_line_and_exit_3(tmp_path: Path) -> None:
    missing = tmp_path / "missing.lmdb"
    done = cli("dashboard", missing, "--port", "0", check=3)
    assert "does not exist" in done.stderr and done.stderr.count("\n") == 1
    assert not missing.exists()
    done = cli("dashboard", tmp_path, "--port", "0", check=3)
    assert "is a directory" in done.stderr
    damaged = tmp_path / "damaged.lmdb"
    damaged.write_bytes(b"not a store" * 1000)
    done = cli("dashboard", damaged, "--port", "0", check=3)
    assert f"crawlstore verify {damaged}" in done.stderr and done.stderr.count("\n") == 1


def test_a_port_in_use_is_one_line_and_exit_3(path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("dashboard", path, "--port", str(port), check=3)
    assert done.stderr == (f"crawlstore dashboard: port {port} on 127.0.0.1 is in use: choose "
                           "another with --port (0: any free one)\n")  # fmt: skip


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_command_prints_its_address_first_and_stops_on_a_signal(path: Path, stop: int
                                                                    ) -> None:  # fmt: skip
    child = subprocess.Popen([*COMMAND, "dashboard", str(path), "--port", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        with urllib.request.urlopen(url + "api/summary", timeout=30) as reply:
            assert json.loads(reply.read())["crawl"] == "other"  # the store's first crawl
        child.send_signal(stop)
        assert child.wait(60) == 0
    finally:
        child.kill()


def test_only_loopback_addresses_go_without_a_warning() -> None:
    assert _loopback("127.0.0.1") and _loopback("::1") and _loopback("localhost")
    assert not _loopback("0.0.0.0") and not _loopback("192.168.1.5")
    assert not _loopback("example.com")


def test_a_store_on_redis_has_the_same_panels_without_a_file(redis_url: str) -> None:
    with Store.open(redis_url) as store:
        f = store.frontier(crawl="web")
        f.push_many([Seed.get(f"https://h{i % 3}.test/{i}") for i in range(9)])
        f.report(Done(f.pop_many(1)[0].seed, status=200))
        stats = asdict(f.stats())
    with Dashboard(redis_url).start() as board:
        summary = get(board, "/api/summary")[1]
        assert summary["stats"] == {**stats, "refused": {}}
        assert summary["store"]["file_bytes"] is None and summary["store"]["format"] == "3"
        assert get(board, "/api/queues")[1]["scanned"] == 3
        assert "crawlstore_file_bytes" not in get(board, "/metrics")[1]
