"""The ``crawlstore`` verbs over queues (``peek``, ``queues``, ``queue``, ``delete-queue``), the
live view (``stats --watch``) and ``canon``'s explanation, run as users run them: the command
in a subprocess, against real stores."""

from __future__ import annotations

import contextlib
import io
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import COMMAND, cli

from crawlstore import Done, Seed, Store
from crawlstore.cli import main


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    """Three host queues (a delay of 30 s, one seed in flight at most): h0 has a seed in
    flight, h2 is blocked for an hour."""
    file = tmp_path / "h.lmdb"
    with Store.open(file, durability="nosync") as store:
        f = store.frontier("fifo", queues="host", delay=30.0)
        f.push_many([Seed.get(f"https://h{i % 3}.example/{i}") for i in range(9)])
        f.pop_many(1, queue="h0.example")
        f.block_queue("h2.example", store.clock() + 3600)
    return file


def _lines(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


# -- peek -------------------------------------------------------------------------------------


def test_peek_text_and_json(hosts: Path) -> None:
    lines = _lines(cli("peek", hosts, "-n", "20").stdout)
    assert [(w[0], w[2], w[3]) for w in lines] == [
        ("ready", "https://h1.example/1", "(h1.example)"),
        ("delay", "https://h1.example/4", "(h1.example)"),  # the one before done at once
        ("delay", "https://h1.example/7", "(h1.example)"),
        ("blocked", "https://h2.example/2", "(h2.example)"),
        ("delay", "https://h2.example/5", "(h2.example)"),
        ("delay", "https://h2.example/8", "(h2.example)"),
        ("held", "https://h0.example/3", "(h0.example)"),  # behind the seed in flight
        ("held", "https://h0.example/6", "(h0.example)"),
    ]
    assert [w[1] for w in lines[:3]] == ["now", "+30s", "+60s"] and lines[-1][1] == "-"
    doc = json.loads(cli("peek", hosts, "-n", "2", "--json").stdout)
    assert set(doc) == {"crawl", "queue", "now", "seeds"} and doc["queue"] is None
    assert [s["url"] for s in doc["seeds"]] == ["https://h1.example/1", "https://h1.example/4"]
    one, two = doc["seeds"]
    assert set(one) == {"url", "method", "fingerprint", "tag", "priority", "depth", "queue",
                        "at", "why", "ready"}  # fmt: skip
    assert (one["queue"], one["why"], one["ready"]) == ("h1.example", "ready", True)
    assert (two["why"], two["ready"]) == ("delay", False)
    assert one["at"] == pytest.approx(doc["now"], abs=1)  # the time of the peek
    assert two["at"] == pytest.approx(one["at"] + 30)
    assert one["fingerprint"] == Seed.get(one["url"]).fingerprint.hex()


def test_peek_of_one_host(hosts: Path) -> None:
    doc = json.loads(cli("peek", hosts, "--host", "h2.example", "--json").stdout)
    assert doc["queue"] == "h2.example" and {s["queue"] for s in doc["seeds"]} == {"h2.example"}
    assert [s["why"] for s in doc["seeds"]] == ["blocked", "delay", "delay"]
    with Store.open(hosts, readonly=True) as store:
        info = store.frontier().queue("h2.example")
    assert info is not None and doc["now"] < info.blocked_until <= doc["now"] + 3600
    ends = [info.blocked_until + wait for wait in (0, 30, 60)]  # the block's end, then delays
    assert [s["at"] for s in doc["seeds"]] == pytest.approx(ends, abs=1e-3)
    assert [s["at"] for s in doc["seeds"]] == sorted(s["at"] for s in doc["seeds"])
    same = json.loads(cli("peek", hosts, "--queue", "h2.example", "--json").stdout)
    assert [s["url"] for s in same["seeds"]] == [s["url"] for s in doc["seeds"]]


def test_peek_changes_nothing_and_pop_agrees(hosts: Path) -> None:
    before = json.loads(cli("stats", hosts, "--json", "--queues").stdout)["crawls"]
    data = hosts.read_bytes()
    peeked = [s["url"] for s in json.loads(cli("peek", hosts, "--json").stdout)["seeds"]
              if s["ready"]]  # fmt: skip
    assert peeked == ["https://h1.example/1"]
    assert hosts.read_bytes() == data  # read-only: not a byte written
    assert json.loads(cli("stats", hosts, "--json", "--queues").stdout)["crawls"] == before
    with Store.open(hosts) as store:
        f = store.frontier()
        assert [f.pop().seed.url for _ in peeked] == peeked  # type: ignore[union-attr]


def test_peek_errors(hosts: Path, tmp_path: Path) -> None:
    unknown = cli("peek", hosts, "--host", "nowhere.example", check=3)
    assert unknown.stdout == "" and "'nowhere.example'" in unknown.stderr
    assert "has no crawl 'other'" in cli("peek", hosts, "--crawl", "other", check=3).stderr
    assert cli("peek", hosts, "--host", "a b", check=2).stderr.startswith("crawlstore peek:")
    assert "must be 0 or more" in cli("peek", hosts, "-n", "-1", check=2).stderr
    assert "not allowed with" in cli("peek", hosts, "--host", "a", "--queue", "b",
                                     check=2).stderr  # fmt: skip
    assert "does not exist" in cli("peek", tmp_path / "none.lmdb", check=3).stderr
    assert cli("peek", hosts, "-n", "0").stdout == ""


# -- queues, queue, delete-queue ----------------------------------------------------------------


def test_queues_pages(hosts: Path) -> None:
    text = cli("queues", hosts).stdout.splitlines()
    assert [line.split(":")[0] for line in text] == ["h0.example", "h1.example", "h2.example"]
    assert text[0].startswith("h0.example: queued 2, in flight 1, scheduled 0; done 0")
    assert "blocked until" in text[2] and "blocked" not in text[1]
    page = json.loads(cli("queues", hosts, "--limit", "2", "--json").stdout)
    assert set(page) == {"crawl", "queues", "next"} and page["next"] == "h1.example"
    assert [q["key"] for q in page["queues"]] == ["h0.example", "h1.example"]
    assert set(page["queues"][0]) == {"key", "queued", "in_flight", "scheduled", "last_pop",
                                      "blocked_until", "delay", "max_in_flight", "limit",
                                      "created", "counts"}  # fmt: skip
    rest = json.loads(cli("queues", hosts, "--after", page["next"], "--json").stdout)
    assert [q["key"] for q in rest["queues"]] == ["h2.example"] and rest["next"] is None
    cut = cli("queues", hosts, "--limit", "2").stdout.splitlines()
    assert cut[-1] == "(the first 2 queues; the next page: --after h1.example)"
    assert len(cli("queues", hosts, "--limit", "3").stdout.splitlines()) == 3  # not cut
    assert json.loads(cli("queues", hosts, "--limit", "3", "--json").stdout)["next"] is None
    # stats --queues shows the same lines and rows
    stats = cli("stats", hosts, "--queues").stdout.splitlines()

    def fixed(line: str) -> str:  # without how long a block has left
        return re.sub(r" \(in [^()]+\)$", "", line.strip())

    assert [fixed(line) for line in stats[2:]] == [fixed(line) for line in text]
    assert json.loads(cli("stats", hosts, "--queues", "--json").stdout)["crawls"]["default"][
        "queues"] == json.loads(cli("queues", hosts, "--json").stdout)["queues"]  # fmt: skip
    assert "has no crawl" in cli("queues", hosts, "--crawl", "x", check=3).stderr
    assert cli("queues", hosts, "--limit", "0", check=2).stderr


def test_queue_shows_and_sets(hosts: Path) -> None:
    shown = cli("queue", hosts, "h1.example").stdout
    assert shown.startswith("h1.example: queued 3") and "delay the crawl's" in shown
    settings = ["--delay", "5", "--limit", "7", "--max-in-flight", "2", "--block-until", "+60"]
    before = time.time()
    row = json.loads(cli("queue", hosts, "h1.example", *settings, "--json").stdout)
    assert (row["delay"], row["limit"], row["max_in_flight"]) == (5.0, 7, 2)
    assert before + 60 <= row["blocked_until"] <= time.time() + 60
    text = cli("queue", hosts, "h1.example", "--delay", "crawl", "--limit", "none",
               "--max-in-flight", "crawl", "--unblock").stdout  # fmt: skip
    assert "delay the crawl's, max in flight the crawl's, limit none" in text
    assert "blocked" not in text
    for when, expected in (("2030-01-01T00:00:00Z", 1893456000.0),
                           ("2030-01-01T02:00:00+02:00", 1893456000.0),
                           ("2030-01-01T00:00:00", 1893456000.0), ("1893456000", 1893456000.0),
                           ("+1h", None)):  # fmt: skip
        before = time.time()
        got = json.loads(cli("queue", hosts, "h1.example", "--block-until", when,
                             "--json").stdout)["blocked_until"]  # fmt: skip
        if expected is not None:
            assert got == expected, when
        else:
            assert before + 3600 <= got <= time.time() + 3600
    with Store.open(hosts) as store:
        info = store.frontier().queue("h1.example")
        assert info is not None and info.blocked_until == got


def test_queue_errors(hosts: Path) -> None:
    unknown = cli("queue", hosts, "nowhere.example", "--delay", "1", check=3)
    assert "'nowhere.example'" in unknown.stderr and "--create" in unknown.stderr
    assert "'nowhere.example'" in cli("queue", hosts, "nowhere.example", check=3).stderr
    created = json.loads(cli("queue", hosts, "new.example", "--create", "--delay", "9",
                             "--json").stdout)  # fmt: skip
    assert (created["key"], created["delay"], created["queued"]) == ("new.example", 9.0, 0)
    for bad in (["--delay", "-1"], ["--delay", "soon"], ["--limit", "x"], ["--limit", "-2"],
                ["--max-in-flight", "0"], ["--block-until", "60"],
                ["--block-until", "tomorrow"], ["--block-until", "+1", "--unblock"]):  # fmt: skip
        done = cli("queue", hosts, "h1.example", *bad, check=2)
        assert done.stdout == "" and "crawlstore queue" in done.stderr, bad
    assert "write +60" in cli("queue", hosts, "h1.example", "--block-until", "60",
                              check=2).stderr  # fmt: skip
    assert "has no crawl" in cli("queue", hosts, "h1.example", "--crawl", "x", check=3).stderr


def test_delete_queue(hosts: Path) -> None:
    assert cli("delete-queue", hosts, "h0.example").stdout.strip() == (
        "queue h0.example removed: 3 seeds (2 queued, 1 in flight, 0 scheduled), 3 URLs"
    )
    doc = json.loads(cli("delete-queue", hosts, "h1.example", "--json").stdout)
    assert doc == {"queue": "h1.example", "seeds": 3, "queued": 3, "in_flight": 0,
                   "scheduled": 0, "urls": 3}  # fmt: skip
    gone = cli("delete-queue", hosts, "h0.example", check=3)
    assert gone.stdout == "" and "no queue 'h0.example'" in gone.stderr
    assert [q["key"] for q in json.loads(cli("queues", hosts, "--json").stdout)["queues"]] == [
        "h2.example"]  # fmt: skip
    assert "has no crawl" in cli("delete-queue", hosts, "h2.example", "--crawl", "x",
                                 check=3).stderr  # fmt: skip


# -- stats --watch --------------------------------------------------------------------------

_WRITER = """
import sys, time
from crawlstore import Done, Seed, Store
with Store.open(sys.argv[1]) as s:
    f = s.frontier()
    print("writing", flush=True)
    for i in range(10**6):
        f.push(Seed.get(f"https://w.example/{i}"))
        f.report(Done(f.pop().seed))
        time.sleep(0.001)
"""


@pytest.fixture
def running(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A store another process crawls: a page pushed, popped and done every millisecond."""
    file = tmp_path / "w.lmdb"
    with Store.open(file) as store:
        f = store.frontier()
        f.push(Seed.get("https://w.example/start"))
        f.report(Done(f.pop().seed))  # type: ignore[union-attr]
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(file)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    yield file
    writer.kill()
    writer.wait()


_LINE = re.compile(
    r"\d\d:\d\d:\d\d crawl default: ([\d,.]+) pages/s, done ([\d,]+), queued ([\d,]+), "
    r"in flight ([\d,]+), scheduled ([\d,]+), errors ([\d,]+)"
)


def test_watch_lines_follow_a_running_crawl(running: Path) -> None:
    done = cli("stats", running, "--watch", "--interval", "0.3", "--count", "4", "--crawl",
               "default")  # fmt: skip
    lines = done.stdout.splitlines()
    assert len(lines) == 4, done.stdout
    matches = [_LINE.fullmatch(line) for line in lines]
    assert all(matches), lines
    counts = [int(m.group(2).replace(",", "")) for m in matches if m]
    assert counts == sorted(counts) and counts[-1] > counts[0], counts
    assert float(matches[-1].group(1).replace(",", "")) > 0  # type: ignore[union-attr]
    rows = [json.loads(x) for x in cli("stats", running, "--watch", "--interval", "0.2",
                                       "--count", "2", "--json").stdout.splitlines()]  # fmt: skip
    assert [set(r) for r in rows] == [{"time", "crawl", "rate", "done", "queued", "in_flight",
                                       "scheduled", "errors"}] * 2  # fmt: skip
    assert rows[1]["done"] >= rows[0]["done"] > counts[-1] and rows[0]["rate"] > 0


@contextlib.contextmanager
def _sigint(handler: Any) -> Iterator[None]:
    """SIGINT handled by ``handler`` in this process for the moment."""
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def _start_interruptible(*args: str) -> subprocess.Popen[str]:
    """The command started with SIGINT at its default, as a shell starts a foreground command,
    whatever this process inherited. A process started with SIGINT ignored (a background job
    of a non-interactive shell: ``pytest &``) keeps it ignored: Python installs its
    KeyboardInterrupt handler only over the default, and a Ctrl-C does not end the command.
    Exec resets a handled signal to its default and leaves an ignored one ignored."""
    with _sigint(signal.default_int_handler):
        return subprocess.Popen([*COMMAND, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize("inherited", [signal.default_int_handler, signal.SIG_IGN],
                         ids=["sigint-default", "sigint-ignored"])  # fmt: skip
def test_watch_ends_on_ctrl_c_with_0(running: Path, inherited: Any) -> None:
    with _sigint(inherited):  # "ignored": as when pytest runs as a background job
        watch = _start_interruptible("stats", str(running), "--watch", "--interval", "0.1")
    assert watch.stdout is not None and _LINE.fullmatch(watch.stdout.readline().strip())
    watch.send_signal(signal.SIGINT)
    assert watch.wait(timeout=30) == 0
    assert watch.stderr is not None and watch.stderr.read() == ""


def test_watch_errors(running: Path, tmp_path: Path) -> None:
    assert "more than 0" in cli("stats", running, "--watch", "--interval", "0", check=2).stderr
    assert "1 or more" in cli("stats", running, "--watch", "--count", "0", check=2).stderr
    assert "--count goes with --watch" in cli("stats", running, "--count", "2", check=2).stderr
    assert "has no crawl" in cli("stats", running, "--watch", "--crawl", "x", check=3).stderr
    assert "does not exist" in cli("stats", tmp_path / "no.lmdb", "--watch", check=3).stderr


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_watch_on_a_terminal_is_a_rich_table(
    running: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("rich")
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    code = main(["stats", str(running), "--watch", "--interval", "0.05", "--count", "2"])
    assert code == 0
    shown = terminal.getvalue()
    for column in ("crawl", "pages/s", "done", "queued", "in flight", "scheduled", "errors"):
        assert column in shown
    assert "default" in shown and "\x1b[" in shown  # drawn for a terminal, with escapes


def test_watch_without_rich_prints_lines(running: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setitem(sys.modules, "rich.live", None)  # as if rich were not installed
    assert main(["stats", str(running), "--watch", "--interval", "0.05", "--count", "2"]) == 0
    assert [bool(_LINE.fullmatch(x)) for x in terminal.getvalue().splitlines()] == [True] * 2


# -- canon's explanation ----------------------------------------------------------------------


def test_canon_explains_each_rule() -> None:
    url = "HTTPS://Example.com:443/a/../b?utm_source=x&b=2&a=1#f"
    lines = cli("canon", url).stdout.splitlines()
    fp = Seed.get(url).fingerprint.hex()
    assert lines[0] == f"{fp}  https://example.com/b?a=1&b=2"
    assert lines[1:] == [
        "  scheme lower-cased: scheme 'HTTPS' -> 'https'",
        "  host lower-cased: host 'Example.com' -> 'example.com'",
        "  default port removed: port '443' -> (none)",
        "  dot segments resolved: path '/a/../b' -> '/b'",
        "  tracking parameter utm_source removed: query 'utm_source=x&b=2&a=1' -> 'b=2&a=1'",
        "  query parameters sorted: query 'b=2&a=1' -> 'a=1&b=2'",
        "  fragment dropped: fragment 'f' -> (none)",
    ]
    assert cli("canon", "https://example.com/b?a=1&b=2").stdout.splitlines()[1:] == []
    assert cli("canon", "-q", url, "https://a.example/").stdout.split() == [
        fp, "https://example.com/b?a=1&b=2", Seed.get("https://a.example/").fingerprint.hex(),
        "https://a.example/"]  # fmt: skip
    rows = json.loads(cli("canon", url, "https://a.example/", "--json").stdout)
    assert [set(r) for r in rows] == [{"url", "canonical", "fingerprint", "steps"}] * 2
    assert rows[1]["steps"] == []
    assert rows[0]["steps"][2] == {
        "rule": "default port removed",
        "part": "port",
        "before": "443",
        "after": None,
        "url": "https://example.com/a/../b?utm_source=x&b=2&a=1#f",
    }
    assert rows[0]["steps"][-1]["url"] == rows[0]["canonical"]
