"""The inspection verbs as a new user meets them, run as users run them (the command in a
subprocess): what ``stats`` says of the file's size, ``urls``'s pages and filters on the last
outcome, ``url``'s times, ``peek``'s filters, ``migrate`` of a current file, one spelling of
the state in flight, and every verb's ``--help``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cli_helpers import cli
from helpers import ROOT

from crawlstore import Done, Failed, Seed, Store
from crawlstore.cli import parser
from crawlstore.frontier.protocol import STATES
from crawlstore.revisit import RevisitTags, revisit


class Tag(RevisitTags):
    PAGE = revisit("1h")


@pytest.fixture
def revisits(tmp_path: Path) -> Path:
    """One queue, nine pages that revisit: ``/0`` failed (404), ``/1`` failed (``dns``), ``/2``
    done (200), all three scheduled again; ``/3`` in flight; the others queued."""
    file = tmp_path / "r.lmdb"
    with Store.open(file, durability="nosync") as store:
        f = store.frontier("fifo", queues="single").revisit(Tag)
        f.push_many([Seed.get(f"https://a.example/{i}").with_tag(Tag.PAGE) for i in range(9)])
        ends = [(Failed, {"status": 404}), (Failed, {"reason": "dns"}), (Done, {"status": 200})]
        for n, (report, how) in enumerate(ends):
            ready = f.pop()
            assert ready.seed.url.endswith(f"/{n}")  # type: ignore[union-attr]
            f.report(report(ready.seed, **how))  # type: ignore[union-attr,arg-type]
        f.pop()
    return file


def _paths(text: str) -> list[str]:
    return sorted(line.split()[1].rsplit("/", 1)[1] for line in text.splitlines())


# -- stats: what is used of what --------------------------------------------------------------

_SIZE = r"([\d,.]+) (B|KiB|MiB|GiB)"
_FILE = re.compile(rf".*: format 4, {_SIZE} file: {_SIZE} of records, {_SIZE} of free pages "
                   r"\(reused before the file grows; a backup leaves them out\)")  # fmt: skip


def test_stats_says_what_of_the_file_holds_records(tmp_path: Path) -> None:
    file = tmp_path / "new.lmdb"
    with Store.open(file) as store:
        store.frontier().push(Seed.get("https://a.example/"))
    line = cli("stats", file).stdout.splitlines()[0]
    assert _FILE.fullmatch(line) and "%" not in line, line
    doc = json.loads(cli("stats", file, "--json").stdout)
    assert doc["file_bytes"] == doc["used_bytes"] + doc["free_bytes"] == file.stat().st_size
    assert 0 < doc["used_bytes"] < doc["file_bytes"]
    with Store.open(file) as store:  # a crawl of many URLs, removed: the file stays, free
        store.frontier(crawl="big").push_many(
            [Seed.get(f"https://b.example/{i}") for i in range(5000)])  # fmt: skip
        store.delete_crawl("big")
    big = json.loads(cli("stats", file, "--json").stdout)
    assert big["free_bytes"] > 10 * big["used_bytes"] and big["file_bytes"] > doc["file_bytes"]
    cli("backup", file, tmp_path / "copy.lmdb")
    copy = json.loads(cli("stats", tmp_path / "copy.lmdb", "--json").stdout)
    assert copy["file_bytes"] < big["file_bytes"] // 4  # the backup leaves the free pages out


def test_stats_of_a_store_on_redis_has_no_file_sizes(redis_url: str) -> None:
    with Store.open(redis_url) as store:
        store.frontier().push(Seed.get("https://a.example/"))
    line = cli("stats", redis_url).stdout.splitlines()[0]
    assert re.fullmatch(r".*: format \d+", line) and "file" not in line
    doc = json.loads(cli("stats", redis_url, "--json").stdout)
    assert (doc["file_bytes"], doc["used_bytes"], doc["free_bytes"]) == (None, None, None)


# -- urls: pages that say they were cut, filters on the last outcome ---------------------------


def test_a_page_cut_by_limit_says_how_to_see_the_rest(revisits: Path) -> None:
    seen: list[str] = []
    after: list[str] = []
    while True:
        lines = cli("urls", revisits, "--limit", "4", *after).stdout.splitlines()
        note = re.fullmatch(r"\(the first 4 URLs; the next page: --after ([0-9a-f]{32})\)",
                            lines[-1])  # fmt: skip
        seen += [line.split()[1] for line in (lines[:-1] if note else lines)]
        if not note:
            break
        after = ["--after", note.group(1)]
    assert len(seen) == len(set(seen)) == 9
    assert len(cli("urls", revisits, "--limit", "9").stdout.splitlines()) == 9  # not cut
    rows = cli("urls", revisits, "--limit", "4", "--json")  # JSON lines on stdout, the note not
    assert len(rows.stdout.splitlines()) == 4 and "--after" in rows.stderr
    for limit in ("0", "-1", "x"):
        refused = cli("urls", revisits, "--limit", limit, check=2)
        assert refused.stdout == "" and "--limit" in refused.stderr, limit


def test_urls_filter_on_the_last_outcome(revisits: Path) -> None:
    assert cli("urls", revisits, "--status", "failed").stdout == ""  # failed, then scheduled
    failed = cli("urls", revisits, "--outcome", "failed").stdout
    assert sorted(failed.splitlines()) == [
        "scheduled  https://a.example/0  failed 404",
        "scheduled  https://a.example/1  failed dns",
    ]
    assert _paths(cli("urls", revisits, "--outcome", "done").stdout) == ["2"]
    assert _paths(cli("urls", revisits, "--http-status", "404").stdout) == ["0"]
    assert _paths(cli("urls", revisits, "--reason", "dns").stdout) == ["1"]
    assert cli("urls", revisits, "--outcome", "done", "--http-status", "404").stdout == ""
    rows = [
        json.loads(line)
        for line in cli(
            "urls", revisits, "--status", "scheduled", "--outcome", "failed", "--json"
        ).stdout.splitlines()
    ]
    assert sorted((r["url"], r["outcome"]["state"]) for r in rows) == [
        ("https://a.example/0", "failed"), ("https://a.example/1", "failed")]  # fmt: skip
    for bad in (["--outcome", "failure"], ["--http-status", "99"], ["--http-status", "x"],
                ["--status", "in-flight"]):  # fmt: skip
        done = cli("urls", revisits, *bad, check=2)
        assert done.stdout == "" and repr(bad[1]) in done.stderr, bad


# -- one spelling of the state in flight --------------------------------------------------------


def test_the_state_in_flight_is_spelt_in_flight_everywhere(revisits: Path) -> None:
    assert cli("urls", revisits, "--status", "in_flight").stdout.split() == [
        "in_flight", "https://a.example/3"]  # fmt: skip
    assert "state: in_flight" in cli("url", revisits, "https://a.example/3").stdout
    assert "{queued,in_flight,scheduled,done,failed,skipped}" in cli("urls", "--help").stdout
    assert set(STATES) >= {"in_flight"} and "in-flight" not in STATES
    # as a name (quoted, a choice, a code span), never with a hyphen; --max-in-flight is a flag
    token = re.compile(r"[`'\"|{,]in-flight[`'\"|},\\]")
    files = [*(ROOT / "crawlstore").rglob("*.py"), *(ROOT / "docs").rglob("*.md"),
             ROOT / "README.md"]  # fmt: skip
    named = [f"{f.relative_to(ROOT)}" for f in files if token.search(f.read_text())]
    assert named == []
    cli_text = [*(ROOT / "crawlstore" / "cli").glob("*.py"), ROOT / "docs" / "cli.md"]
    prose = [f.name for f in cli_text
             if "in-flight" in f.read_text().replace("max-in-flight", "")]  # fmt: skip
    assert prose == []  # the command line's text says "in flight"


# -- url: times people read ---------------------------------------------------------------------


def _time(line: str) -> tuple[float, str]:
    """The epoch seconds and the hint of ``key: ISO-8601 (hint)``."""
    found = re.fullmatch(r"[\w ]+: (\S+) \(([^()]+)\)", line)
    assert found, line
    moment = dt.datetime.fromisoformat(found.group(1))
    assert moment.tzinfo is not None  # local time, with its offset
    return moment.timestamp(), found.group(2)


def test_url_shows_times_in_local_time_and_names_the_one_queue(revisits: Path) -> None:
    text = cli("url", revisits, "https://a.example/0").stdout
    raw = json.loads(cli("url", revisits, "https://a.example/0", "--json").stdout)
    lines = dict(line.split(": ", 1) for line in text.splitlines())
    assert lines["state"] == "scheduled" and lines["queue"] == "(the one queue)"
    assert lines["scheduled for"] == "revisit"
    due, hint = _time(f"due: {lines['due']}")
    assert due == pytest.approx(raw["at"], abs=1) and re.fullmatch(r"in [\d.]+[smh]", hint)
    created, hint = _time(f"created: {lines['created']}")
    assert created == pytest.approx(raw["created"], abs=1)
    assert hint == "now" or hint.endswith(" ago"), hint
    assert re.fullmatch(r"failed, \S+ \((now|[^()]+ ago)\), status 404", lines["last outcome"])
    assert "None" not in text and not re.search(r"\d{10}\.\d", text)  # no raw epoch floats
    assert raw["queue"] == "" and isinstance(raw["created"], float)  # --json keeps raw values
    flying = cli("url", revisits, "https://a.example/3").stdout
    assert "lease ends: " in flying and "last outcome: none (not visited yet)" in flying
    unknown = cli("url", revisits, "https://z.example/").stdout
    assert "state: unknown (the crawl holds no such URL)" in unknown and "queue" not in unknown


# -- peek: filters that cannot apply, or match nothing ----------------------------------------


def test_peek_host_on_a_crawl_of_one_queue_says_it_cannot_apply(revisits: Path) -> None:
    done = cli("peek", revisits, "--host", "b.example", check=2)
    assert done.stdout == "" and "one queue, not a queue per host" in done.stderr
    assert "--host cannot apply" in done.stderr


def test_peek_host_finds_the_default_port_and_says_when_nothing_matches(tmp_path: Path) -> None:
    file = tmp_path / "h.lmdb"
    with Store.open(file) as store:
        f = store.frontier("fifo", queues="host")
        f.push_many([Seed.get("http://example.com/a"), Seed.get("https://b.example/1"),
                     Seed.get("http://c.example:8080/")])  # fmt: skip
        f.report(Done(f.pop_many(1, queue="b.example")[0].seed))
    for host in ("example.com", "example.com:80", "EXAMPLE.com"):
        lines = cli("peek", file, "--host", host).stdout.splitlines()
        assert [line.split()[2:] for line in lines] == [
            ["http://example.com/a", "(example.com)"]
        ], host
    assert "http://c.example:8080/" in cli("peek", file, "--host", "c.example:8080").stdout
    none = cli("peek", file, "--host", "nowhere.example", check=3)
    assert "no queue for host 'nowhere.example'" in none.stderr
    empty = cli("peek", file, "--host", "b.example").stdout  # its one seed is done
    assert empty == ("(nothing to hand out: queue b.example holds no seed queued or scheduled, "
                     "nor one whose lease can be reclaimed)\n")  # fmt: skip


# -- migrate: a file in the current format ------------------------------------------------------


def test_migrate_of_a_current_file_changes_nothing(revisits: Path) -> None:
    data, files = revisits.read_bytes(), sorted(revisits.parent.iterdir())
    done = cli("migrate", revisits)
    assert "in the current format already" in done.stdout and "nothing changed" in done.stdout
    assert revisits.read_bytes() == data and sorted(revisits.parent.iterdir()) == files


# -- every verb's --help ------------------------------------------------------------------------


def _verbs() -> list[list[str]]:
    """Every verb, and every call of ``frontier``, as the words before ``--help``."""

    def choices(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return action.choices  # type: ignore[no-any-return]

    verbs = choices(parser())
    return [[verb] for verb in verbs] + [["frontier", c] for c in choices(verbs["frontier"])]


def _description(text: str) -> str:
    """The paragraphs of a help between its usage and its first list of arguments."""
    paragraphs = text.split("\n\n")
    return " ".join(p for p in paragraphs[1:] if not p.startswith(("options:", "positional")))


def test_every_verb_s_help_names_it_and_reads_whole() -> None:
    words = _verbs()
    assert len(words) > 40
    with ThreadPoolExecutor(8) as pool:
        helps = list(pool.map(lambda w: cli(*w, "--help"), words))
    for verb, done in zip(words, helps, strict=True):
        name = " ".join(verb)
        assert done.stdout.startswith(f"usage: crawlstore {name} "), (name, done.stdout[:80])
        description = _description(done.stdout.split("\noptions:")[0])
        assert description.rstrip().endswith((".", ".``")), (name, description[-80:])
        options = done.stdout.split("\noptions:\n")[1].splitlines()
        for at, line in enumerate(options):  # each option says what it is
            if re.match(r"  -", line) and not re.search(r"\S {2,}\S", line.strip()):
                following = options[at + 1] if at + 1 < len(options) else ""
                assert re.match(r" {6,}\S", following), (name, line)
