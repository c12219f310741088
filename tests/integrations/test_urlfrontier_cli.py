"""``crawlstore frontier CALL`` run as users run it, in a subprocess, against ``crawlstore serve``
running in another: every call, the dump and its re-import, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("grpc")

from strict_json import strict_lines

from crawlstore.cli import main

_SCRIPT = shutil.which("crawlstore", path=os.path.dirname(sys.executable))
COMMAND = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "crawlstore"]
CALLS = ["put-urls", "get-urls", "list-queues", "list-crawls", "list-urls", "stats",
         "delete-queue", "delete-crawl", "block-queue", "set-delay", "set-limit", "url-status",
         "count-urls", "purge-urls", "set-active", "get-active", "set-log-level", "list-nodes",
         "dump"]  # fmt: skip


@pytest.fixture
def address(tmp_path: Path) -> Iterator[str]:
    serve = [*COMMAND, "serve", "--store", tmp_path / "s.db", "--port", "0",
             "--default-delay", "0", "--durability", "nosync"]  # fmt: skip
    server = subprocess.Popen(serve, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line.startswith("serving the URL Frontier API on port "), line
    yield f"127.0.0.1:{int(line.split()[-1])}"
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0


def run(address: str, *args: str | Path, check: int | None = 0,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    done = subprocess.run([*COMMAND, "frontier", "--address", address, *map(str, args)],
                          input=stdin, capture_output=True, text=True, timeout=60)  # fmt: skip
    if check is not None:
        assert done.returncode == check, (done.returncode, done.stdout, done.stderr)
    return done


def data(address: str, *args: str | Path) -> object:
    return json.loads(run(address, *args, "--json").stdout)


def test_every_call_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for call in CALLS:
        assert main(["frontier", call, "--help"]) == 0
    capsys.readouterr()
    assert main(["frontier", "--help"]) == 0
    listed = capsys.readouterr().out
    assert [call for call in CALLS if call not in listed] == []
    assert main(["frontier", "get-urls", "--max-urls", "many"]) == 2


def test_dump_and_reimport(address: str, tmp_path: Path) -> None:
    later = int(time.time()) + 3600
    items = [
        {"discovered": {"info": {"url": "https://a.example/discovered",
                                 "metadata": {"depth": {"values": ["2"]}}}}},
        {"known": {"info": {"url": "https://a.example/completed"}, "refetchableFromDate": 0}},
        {"known": {"info": {"url": "https://a.example/scheduled"}, "refetchableFromDate": later}},
        {"discovered": {"info": {"url": "https://b.example/", "crawlID": "BESPOKE"}}},
    ]  # fmt: skip
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("".join(json.dumps(item) + "\n" for item in items))
    assert run(address, "put-urls", "-f", seeds).stdout.strip() == "4 ok, 0 skipped, 0 failed"
    dump = tmp_path / "dump.jsonl.gz"
    assert "4 URLs written" in run(address, "dump", "-o", dump).stdout
    lines = strict_lines(dump)
    assert len(lines) == 4 and all("known" in line for line in lines)
    assert {line["known"]["info"]["crawlID"] for line in lines} == {"DEFAULT", "BESPOKE"}
    for crawl in data(address, "list-crawls"):  # type: ignore[attr-defined]
        run(address, "delete-crawl", "-c", crawl)
    assert data(address, "list-crawls") == []
    assert data(address, "put-urls", "-f", dump) == {"ok": 4, "skipped": 0, "failed": 0}

    def status(url: str) -> dict[str, object]:
        found = data(address, "url-status", "-u", url)
        assert isinstance(found, dict)
        return found

    assert status("https://a.example/completed")["refetchable_from"] == 0
    assert status("https://a.example/scheduled")["refetchable_from"] == later
    assert status("https://a.example/discovered")["metadata"] == {"depth": ["2"]}
    assert run(address, "count-urls", "-c", "BESPOKE").stdout.strip() == "1"


def test_put_get_and_the_queue_calls(address: str) -> None:
    urls = "".join(f"https://h{i % 3}.example/Page{i}\n" for i in range(9))
    run(address, "put-urls", "-f", "-", "-c", "C", stdin=urls)
    again = run(address, "put-urls", "-f", "-", "-c", "C", "-b", "2", "--json",
                stdin=urls + "https://new.example/\n")  # fmt: skip
    assert json.loads(again.stdout) == {"ok": 1, "skipped": 9, "failed": 0}
    assert data(address, "list-crawls") == ["C"]
    queues = data(address, "list-queues", "-c", "C", "-n", "2")
    assert isinstance(queues, dict) and len(queues["keys"]) == 2 and queues["crawl"] == "C"
    assert len(run(address, "list-queues", "-c", "C").stdout.split()) == 4
    assert run(address, "count-urls", "-c", "C", "-f", "page", "-i").stdout.strip() == "9"
    assert len(run(address, "list-urls", "-c", "C", "-k", "h0.example").stdout.splitlines()) == 3
    assert len(run(address, "list-urls", "-c", "C", "-s", "8", "-n", "5").stdout.split("\n")) == 3

    run(address, "block-queue", "-c", "C", "-k", "h0.example", "-s", "3600")
    run(address, "set-delay", "-c", "C", "-k", "h1.example", "-d", "3600")
    run(address, "set-limit", "-c", "C", "-k", "new.example", "-l", "1")
    run(address, "put-urls", "-f", "-", "-c", "C", stdin=json.dumps(
        {"known": {"info": {"url": "https://new.example/", "crawlID": "C"}}}))  # fmt: skip
    got = run(address, "get-urls", "-c", "C", "-m", "5", "-q", "5", "-d", "60", "--json")
    rows = [json.loads(line) for line in got.stdout.splitlines()]
    assert sorted(r["key"] for r in rows) == ["h1.example"] * 3 + ["h2.example"] * 3
    assert run(address, "get-urls").stdout == ""  # any crawl: nothing more now
    stats = data(address, "stats", "-c", "C")
    assert isinstance(stats, dict)
    assert (stats["size"], stats["in_process"], stats["queues"]) == (9, 6, 4)
    assert stats["counts"] == {"completed": 1, "active_queues": 3}
    run(address, "block-queue", "-c", "C", "-k", "h0.example", "-u", "0")
    run(address, "set-active", "false")
    assert run(address, "get-active").stdout.strip() == "false"
    assert run(address, "get-urls", "-c", "C", "-m", "5").stdout == ""
    run(address, "set-active", "true")
    assert data(address, "get-active") is True
    assert len(run(address, "get-urls", "-c", "C", "-m", "5").stdout.splitlines()) == 3

    assert data(address, "list-nodes") == [address]
    run(address, "set-log-level", "-p", "crawlstore.urlfrontier", "-l", "DEBUG")
    assert data(address, "delete-queue", "-c", "C", "-k", "h2.example") == {"removed": 3}
    assert data(address, "purge-urls", "-c", "C", "-k", "h1.example", "-d", "1") == {"removed": 0}
    assert run(address, "purge-urls", "-c", "C").stdout.strip() == "7 URLs removed"
    assert data(address, "count-urls", "-c", "C") == {"count": 0}


def test_what_goes_wrong_exits_with_its_code(address: str, tmp_path: Path) -> None:
    missing = run(address, "url-status", "-u", "https://nowhere.example/", check=1)
    assert "no https://nowhere.example/" in missing.stderr
    bad = run(address, "set-limit", "-k", "", "-l", "1", check=2)
    assert "INVALID_ARGUMENT" in bad.stderr
    lines = tmp_path / "bad.jsonl"
    lines.write_text('https://a.example/\n{"known": [1]}\n')
    assert "line 2" in run(address, "put-urls", "-f", lines, check=2).stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    for call in (["list-crawls"], ["put-urls", "-f", "-"], ["dump", "-o", tmp_path / "d"]):
        done = run(closed, *call, check=3, stdin="https://a.example/\n")
        assert f"service at {closed} is unavailable" in done.stderr and done.stdout == ""


def test_without_grpc_it_names_the_extra() -> None:
    code = ("import sys; sys.modules['grpc'] = None; from crawlstore.cli import main; "
            "sys.exit(main(['frontier', 'list-crawls']))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "pip install -e '.[urlfrontier]'" in done.stderr
