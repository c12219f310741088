"""Stores of format 3, written by crawlstore before the dashboard's indexes: a read-only open
refuses them, a writable one (or ``crawlstore migrate``) writes each crawl's indexes from its
records (recent failures, revisits by the minute, blocked trap prefixes apart), and the crawl
goes on where it was."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DATA, digest

from crawlstore import Seed, Store
from crawlstore.errors import OlderFormat
from crawlstore.frontier.traps import TrapPolicy
from crawlstore.store import FORMAT_VERSION, verify


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of tests/data/format3.lmdb (tests/data/README.md says what it holds)."""
    path = tmp_path / "old.lmdb"
    shutil.copy(DATA / "format3.lmdb", path)
    return path


def test_a_read_only_open_refuses_it(old: Path) -> None:
    before = digest(old)
    with pytest.raises(OlderFormat, match=r"format version 3.*crawlstore migrate "):
        Store.open(old, readonly=True)
    assert digest(old) == before


def test_a_writable_open_writes_the_indexes_from_the_records(old: Path) -> None:
    before = digest(old)
    with Store.open(old) as store:
        assert store.meta["format"] == FORMAT_VERSION == 4
    assert digest(old.with_name("old.lmdb.v3")) == before  # the old file, kept beside it
    assert verify(old) == []
    with Store.open(old, readonly=True) as store:
        core = store.frontier().core
        failed = {u.url: u.outcome for u in core.urls(state="failed", limit=100)}
        recent = core.recent_failures(limit=100)
        assert {f.url for f in recent} == set(failed) and len(recent) == 4
        for f in recent:
            outcome = failed[f.url]
            assert outcome is not None
            assert (f.at, f.status, f.reason) == (outcome.at, outcome.status, outcome.reason)
            assert f.queue == f.url.split("/")[2]
        ms = [math.ceil(f.at * 1000) for f in recent]  # newest first (to the millisecond)
        assert ms == sorted(ms, reverse=True)
        revisits = sorted(u.at for u in core.urls(state="scheduled", limit=100))
        assert len(revisits) == 6
        assert core.revisits_due(revisits[3]) == 4  # the news pages (30 min)...
        assert core.revisits_due(revisits[-1]) == 6  # ...and the feeds (3 h)
        assert core.revisits_due(revisits[0] - 120) == 0
        traps = store.frontier(crawl="traps").avoid_traps_with(TrapPolicy(max_urls=3))
        assert [(b.prefix, b.reason, b.urls, b.refused) for b in traps.blocked()] == [
            ("https://c.example/cal/", "more than 3 URLs", 4, 3)]  # fmt: skip
        assert "https://c.example/cal/\x00b" not in traps.core.state("traps")


def test_a_blocked_prefix_stays_blocked(old: Path) -> None:
    with Store.open(old) as store:
        traps = store.frontier(crawl="traps").avoid_traps_with(TrapPolicy(max_urls=3))
        answer = traps.push(Seed.get("https://c.example/cal/99"))
        assert not answer and answer.reason is not None and answer.reason.value == "trap"
        assert traps.blocked()[0].refused == 4


def test_the_migrate_command(old: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "crawlstore", "migrate", str(old)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{old}: migrated; the old file is kept as {old}.v3\n"
    with Store.open(old, readonly=True) as store:
        assert len(store.frontier().core.recent_failures()) == 4
