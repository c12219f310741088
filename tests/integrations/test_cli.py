"""The ``crawlstore`` command, run as users run it: the installed console script (or
``python -m crawlstore``) in a subprocess, against real stores."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import COMMAND, cli, export
from strict_json import strict_lines

from crawlstore import Seed, Store
from crawlstore.cli import main, run


@pytest.fixture
def path(tmp_path: Path) -> Path:
    file = tmp_path / "s.lmdb"
    with Store.open(file, durability="nosync") as store:
        frontier = store.frontier("fifo", queues="host").dedup_with(store.seen())
        frontier.push_many([Seed.get(f"https://h{i % 3}.example/{i}") for i in range(9)])
        frontier.push(Seed.get("https://h0.example/0"))  # a duplicate
        frontier.pop()
    return file


def test_stats_text_json_and_queues(path: Path) -> None:
    text = cli("stats", path).stdout
    assert "format 4" in text and "queued 8, in flight 1" in text and "duplicate 1" in text
    doc = json.loads(cli("stats", path, "--json", "--queues").stdout)
    stats = doc["crawls"]["default"]["stats"]
    assert (stats["queued"], stats["in_flight"], stats["admitted"]) == (8, 1, 9)
    assert stats["refused"] == {"duplicate": 1}
    assert sorted(q["key"] for q in doc["crawls"]["default"]["queues"]) == [
        "h0.example", "h1.example", "h2.example"]  # fmt: skip
    assert doc["format"] == 4 and doc["file_bytes"] >= doc["used_bytes"] > 0
    paged = json.loads(cli("stats", path, "--json", "--queues", "--limit", "1",
                           "--after", "h0.example").stdout)  # fmt: skip
    assert [q["key"] for q in paged["crawls"]["default"]["queues"]] == ["h1.example"]


def test_stats_reads_while_another_process_writes(path: Path) -> None:
    writer = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from crawlstore import Seed, Store\n"
        "with Store.open(sys.argv[1]) as s:\n"
        "    f = s.frontier()\n"
        "    for i in range(100000):\n"
        "        f.push(Seed.get(f'https://w.example/{i}'))\n"
        "        if i == 10: print('writing', flush=True)\n"
    ), str(path)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        seen = [json.loads(cli("stats", path, "--json").stdout)["crawls"]["default"]["stats"]
                ["admitted"] for _ in range(3)]  # fmt: skip
        assert seen == sorted(seen) and seen[0] > 9  # a consistent, growing count
    finally:
        writer.kill()
        writer.wait()


def test_verify_ok_and_damaged(path: Path, tmp_path: Path) -> None:
    assert cli("verify", path).stdout.strip().endswith(": ok")
    assert json.loads(cli("verify", path, "--json").stdout) == {
        "path": str(path), "ok": True, "problems": []}  # fmt: skip
    damaged = tmp_path / "damaged.lmdb"
    data = bytearray(path.read_bytes())
    data[4096 * 2 :] = b"\xff" * (len(data) - 4096 * 2)  # every page past the meta pages
    damaged.write_bytes(bytes(data))
    done = cli("verify", damaged, check=1)
    assert "problem" in done.stdout.splitlines()[-1]
    assert cli("verify", tmp_path / "missing.lmdb", check=3).stderr.startswith(
        "crawlstore verify:")  # fmt: skip


def test_canon(tmp_path: Path) -> None:
    out = cli("canon", "https://Example.com:443/a/../b?utm_source=x&b=2&a=1#f").stdout
    fp = Seed.get("https://example.com/b?a=1&b=2").fingerprint.hex()
    assert out.splitlines()[0].split() == [fp, "https://example.com/b?a=1&b=2"]
    rows = json.loads(cli("canon", "https://a.example/", "nope", "--json", check=2).stdout)
    assert rows[0]["canonical"] == "https://a.example/" and "error" in rows[1]
    assert "cannot be parsed" in cli("canon", "nope", check=2).stderr


def test_reclaim_leaves_a_live_holder_s_lease(path: Path) -> None:
    out = json.loads(cli("reclaim", path, "--json").stdout)
    assert out == {"default": 0}  # the fixture's pop was by this process, which lives
    with Store.open(path) as store:
        assert store.frontier().stats().in_flight == 1


def test_reclaim_after_a_kill(tmp_path: Path) -> None:
    file = tmp_path / "k.lmdb"
    with Store.open(file) as store:
        store.frontier().push(Seed.get("https://a.example/"))
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from crawlstore import Store\n"
        "s = Store.open(sys.argv[1]); s.frontier(lease_time=3600).pop()\n"
        "print('held', flush=True); time.sleep(600)\n"
    ), str(file)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert "crawl default: 1 seed queued again" in cli("reclaim", file).stdout


def test_backup_is_a_store(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.lmdb"
    cli("backup", path, copy)
    assert cli("verify", copy).returncode == 0
    assert json.loads(cli("stats", copy, "--json").stdout)["crawls"]["default"]["stats"][
        "admitted"] == 9  # fmt: skip
    assert "exists" in cli("backup", path, copy, check=3).stderr  # never overwrites
    cli("backup", path, tmp_path / "raw.lmdb", "--no-compact")


def test_errors_and_usage(path: Path, tmp_path: Path) -> None:
    missing = cli("stats", tmp_path / "nope.lmdb", check=3)
    assert missing.stdout == "" and "does not exist" in missing.stderr
    assert "has no crawl" in cli("stats", path, "--crawl", "other", check=3).stderr
    assert "required" in cli(check=2).stderr
    assert "invalid choice" in cli("frobnicate", check=2).stderr
    not_a_store = tmp_path / "text.lmdb"
    not_a_store.write_text("hello")
    assert cli("stats", not_a_store, check=3).stderr.startswith("crawlstore stats:")


def test_python_dash_m_is_the_same_command(path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "crawlstore", "stats", str(path), "--json"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and json.loads(done.stdout)["crawls"]


def test_bench_outside_a_checkout_says_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(run, "_CHECKOUT", tmp_path)
    assert main(["bench", "--quick"]) == 2
    assert "source checkout" in capsys.readouterr().err


def test_bench_runs_the_suite_of_the_checkout(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--help"])  # the suite's own help: it was found and started
    assert exit_.value.code == 0
    assert "--quick" in capsys.readouterr().out


def test_torture_runs_through_the_command(tmp_path: Path) -> None:
    """The verb runs the torture and reports as it does (``tests/crash/test_torture.py`` checks
    the torture)."""
    done = cli("torture", "--minutes", "0.05", "--workers", "2", check=None)
    summary = re.search(r"rounds (\d+), kills (\d+), operations verified \d+, violations (\d+)",
                        done.stdout)  # fmt: skip
    assert summary, (done.returncode, done.stdout, done.stderr)
    assert int(summary.group(1)) > 0 and int(summary.group(2)) > 0
    assert done.returncode == (1 if int(summary.group(3)) else 0), done.stdout


def test_seed_from_a_file_and_stdin(tmp_path: Path) -> None:
    file = tmp_path / "new.lmdb"
    urls = tmp_path / "urls.txt"
    urls.write_text("# seeds\nhttps://a.example/1\n\nhttps://a.example/1\nhttps://b.example/2\n")
    out = json.loads(cli("seed", file, urls, "--tag", "page", "--priority", "3", "--json").stdout)
    assert out == {"admitted": 2, "refused": 1, "invalid": 0}
    piped = subprocess.run([*COMMAND, "seed", str(file), "-"], input="https://c.example/\nnope\n",
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert piped.returncode == 2 and "line 2" in piped.stderr  # not a URL: named, others in
    assert "admitted 1" in piped.stdout
    zipped = subprocess.run([*COMMAND, "seed", str(file), "-"], capture_output=True, timeout=60,
                            input=gzip.compress(b"https://d.example/\n"))  # fmt: skip
    assert zipped.returncode == 0 and b"admitted 1," in zipped.stdout  # gzip by its first bytes
    with Store.open(file) as store:
        seeds = store.frontier().snapshot().queued
        tagged = {s.url[8:]: (s.tag, s.priority) for s in seeds}
        assert tagged == {"a.example/1": ("page", 3), "b.example/2": ("page", 3),
                          "c.example/": (None, 0), "d.example/": (None, 0)}  # fmt: skip


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_export_import_round_trips(path: Path, tmp_path: Path, suffix: str) -> None:
    with Store.open(path) as store:
        from crawlstore import Validator

        first = Seed.get("https://h0.example/0").fingerprint
        store.validators().put(first, Validator('"e"'))
        assert store.frontier().stats().in_flight == 1  # the fixture's seed in flight
    dump = tmp_path / f"dump{suffix}"
    export(path, "-o", dump)
    target = tmp_path / "copy.lmdb"
    assert "crawl moved loaded" in cli("import", target, dump, "--crawl", "moved").stdout
    with Store.open(path) as a, Store.open(target) as b:
        original = [r for r in a.export() if r["type"] != "crawl"]
        copied = [r for r in b.export(crawl="moved") if r["type"] != "crawl"]
        assert copied == original  # every record, bytes included
    # export, import, export: the same file (the seed in flight is queued in both)
    cli("import", tmp_path / "same.lmdb", dump)
    export(tmp_path / "same.lmdb", "-o", tmp_path / f"again{suffix}")
    assert _lines(tmp_path / f"again{suffix}") == _lines(dump)
    assert strict_lines(tmp_path / f"again{suffix}") == strict_lines(dump)
    again = cli("import", target, dump, "--crawl", "moved", check=3)
    assert again.stderr.startswith("crawlstore import:")  # a crawl that holds something
    text = strict_lines(export(path))
    assert text[0]["type"] == "crawl" and text[-1]["type"] == "end"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "crawl"\n')
    assert "line 1" in cli("import", tmp_path / "x.lmdb", bad, check=3).stderr


def _lines(file: Path) -> list[str]:
    opener = gzip.open if file.suffix == ".gz" else open
    with opener(file, "rt") as f:
        return f.read().splitlines()


def test_urls_url_and_delete_crawl(path: Path) -> None:
    from crawlstore import Failed

    with Store.open(path) as store:
        frontier = store.frontier()
        ready = frontier.pop()
        frontier.report(Failed(ready.seed, status=404))  # type: ignore[union-attr]
        failed_url = ready.seed.url  # type: ignore[union-attr]
    rows = [json.loads(line) for line in cli("urls", path, "--json").stdout.splitlines()]
    assert len(rows) == 9 and {r["state"] for r in rows} == {"queued", "in_flight", "failed"}
    failed = cli("urls", path, "--status", "failed").stdout.splitlines()
    assert failed == [f"failed     {failed_url}  404"]
    page = [json.loads(x) for x in cli("urls", path, "--json", "--limit", "3").stdout.split("\n")
            if x]  # fmt: skip
    rest = cli("urls", path, "--json", "--after", page[-1]["fingerprint"]).stdout.splitlines()
    assert len(page) + len(rest) == 9
    one = json.loads(cli("url", path, failed_url, "--json").stdout)
    assert one["state"] == "failed" and one["outcome"]["status"] == 404
    assert json.loads(cli("url", path, one["fingerprint"], "--json").stdout)["url"] == failed_url
    assert json.loads(cli("url", path, "https://elsewhere.example/", "--json").stdout)[
        "state"] == "unknown"  # fmt: skip
    assert cli("url", path, "zz", check=2).stderr.startswith("crawlstore url:")
    assert "has no crawl" in cli("delete-crawl", path, "other", check=3).stderr
    assert "9 URLs" in cli("delete-crawl", path, "default").stdout
    assert json.loads(cli("stats", path, "--json").stdout)["crawls"] == {}


def test_export_draws_a_progress_bar_on_a_terminal_only(path: Path, tmp_path: Path) -> None:
    import pty

    leader, follower = pty.openpty()
    out = tmp_path / "x.jsonl"
    done = subprocess.run([*COMMAND, "export", str(path), "-o", str(out)], stderr=follower,
                          timeout=60)  # fmt: skip
    os.close(follower)
    drawn = os.read(leader, 65536).decode(errors="replace")
    os.close(leader)
    assert done.returncode == 0 and "export default" in drawn
    plain = cli("export", path, "-o", tmp_path / "y.jsonl")
    assert plain.stderr == ""  # no terminal: no bar (and the lines: checked just below)
    assert strict_lines(out) == strict_lines(tmp_path / "y.jsonl")
    assert out.read_text() == (tmp_path / "y.jsonl").read_text()
