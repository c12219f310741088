"""Stores of format 2 (URL records keyed by fingerprint, each queue's list of URLs beside them),
written by crawlstore before format 3: a read-only open refuses them, a writable one (or
``crawlstore migrate``) moves every URL record to its queue's key range, and the crawl goes on
where it was."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest
from helpers import DATA, digest

from crawlstore import Done, Ready, Seed, Store
from crawlstore.errors import OlderFormat
from crawlstore.store import FORMAT_VERSION, verify


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of tests/data/format2.lmdb (tests/data/README.md says what it holds)."""
    path = tmp_path / "old.lmdb"
    shutil.copy(DATA / "format2.lmdb", path)
    return path


def _export(path: Path, crawl: str) -> list[dict[str, object]]:
    command = [sys.executable, "-m", "crawlstore", "export", str(path), "--crawl", crawl, "-o", "-"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _recorded(crawl: str) -> list[dict[str, object]]:
    """What ``crawlstore export`` wrote of the fixture's crawl before format 3."""
    lines = (DATA / f"format2-{crawl}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_a_read_only_open_refuses_it(old: Path) -> None:
    before = digest(old)
    with pytest.raises(OlderFormat, match=r"format version 2.*crawlstore migrate "):
        Store.open(old, readonly=True)
    assert digest(old) == before


def test_a_writable_open_migrates_it_losing_nothing(old: Path) -> None:
    before = digest(old)
    with Store.open(old) as store:
        assert store.meta["format"] == FORMAT_VERSION == 4
    assert digest(old.with_name("old.lmdb.v2")) == before  # the old file, kept beside it
    assert verify(old) == []
    with Store.open(old, readonly=True) as store:
        leased = {u.url for u in store.frontier().urls(state="in_flight", limit=10)}
    assert len(leased) == 3
    for crawl in ("default", "other"):  # every record as before, to its last field...
        assert _without_order(_export(old, crawl), leased) == _without_order(
            _recorded(crawl), leased
        )


def _without_order(lines: list[dict[str, object]], leased: set[str]) -> list[dict[str, object]]:
    """...but the place an export gives a URL in flight (behind the crawl's last sequence, which
    the migration moved on)."""
    return [{k: v for k, v in line.items() if k != "order"}
            if line["type"] == "url" and line["seed"][1] in leased else line  # type: ignore[index]
            for line in lines]  # fmt: skip


def test_the_crawl_goes_on_where_it_was(old: Path) -> None:
    with Store.open(old) as store:
        f = store.frontier()
        stats = f.stats()
        assert (stats.queued, stats.in_flight, stats.scheduled) == (10, 3, 1)
        assert (stats.done, stats.failed, stats.skipped) == (2, 2, 1)
        states = {u.url: u.state for u in f.urls(limit=100)}
        assert len(states) == 19 and states["https://h9.test/later"] == "scheduled"
        by_queue = f.urls(queue="h1.test", limit=100)
        assert [u.fingerprint for u in by_queue] == sorted(u.fingerprint for u in by_queue)
        assert {u.url for u in by_queue} == {f"https://h1.test/p{i}" for i in range(6)}
        known = f.dedup_with(store.seen())
        assert not known.push(Seed.get("https://h0.test/p0"))  # seen before the migration
        assert known.push(Seed.get("https://h0.test/new"))
        popped = [r for r in f.pop_many(10) if isinstance(r, Ready)]
        assert popped and all(r.seed.url.startswith("https://h") for r in popped)
        f.report_many([Done(r.seed) for r in popped])
        assert f.url("https://h0.test/new") is not None
        other = store.frontier(crawl="other")
        assert len(other) == 5 and len(store.seen(crawl="other", bloom=(1000, 0.01))) == 5
    assert verify(old) == []


def test_the_migrate_command_and_the_new_layout(old: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "crawlstore", "migrate", str(old)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{old}: migrated; the old file is kept as {old}.v2\n"
    env = lmdb.open(str(old), subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        with env.begin() as txn:
            assert txn.get(b"queue_urls") is None  # the table is gone
            urls = env.open_db(b"urls", txn=txn, create=False)
            index = env.open_db(b"fingerprints", txn=txn, create=False)
            records = [(bytes(k), bytes(v)) for k, v in txn.cursor(db=urls)]
            assert len(records) == 18 + 1 + 5 == txn.stat(index)["entries"]
            for key, raw in records:  # found by fingerprint, at crawl, queue, sequence
                assert len(key) == 16 and txn.get(key[:4] + raw[:16], db=index) == key[4:]
    finally:
        env.close()


def test_a_migration_in_small_transactions_places_the_same(
    old: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlstore.storages._lmdb import upgrade

    whole = tmp_path / "whole.lmdb"
    upgrade.upgrade_format_2(str(old), str(whole))
    monkeypatch.setattr(upgrade, "_CHUNK", 3)  # records of a crawl across many transactions
    chunked = tmp_path / "chunked.lmdb"
    upgrade.upgrade_format_2(str(old), str(chunked))
    env = lmdb.open(str(chunked), subdir=False, readonly=True, lock=False, max_dbs=32)
    try:
        with env.begin() as txn:
            assert txn.get(b"upgrading") is None  # the scratch table is gone
    finally:
        env.close()
    for path in (whole, chunked):  # format 3, then on to this crawlstore's
        Store.open(path).close()
    assert verify(chunked) == [] and verify(whole) == []
    for crawl in ("default", "other"):
        assert _export(chunked, crawl) == _export(whole, crawl)
