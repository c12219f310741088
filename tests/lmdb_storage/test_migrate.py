"""Stores of the older format: a read-only open refuses them, a writable one migrates them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DATA, SHARED_DATA, digest

from crawlstore import Seed, Store
from crawlstore.errors import CorruptStore, OlderFormat, StoreError
from crawlstore.store import FORMAT_VERSION, verify

SHARED = SHARED_DATA / "damaged"


@pytest.fixture
def old(tmp_path: Path) -> Path:
    """A copy of a store written by format 1 (crawls with host queues, a queue override,
    retries, revisits, a tag pause, trap state, a Bloom seen set, a seed in flight)."""
    path = tmp_path / "old.lmdb"
    shutil.copy(DATA / "format1.lmdb", path)
    return path


def test_a_read_only_open_refuses_and_names_the_command(old: Path) -> None:
    before = digest(old)
    with pytest.raises(OlderFormat, match=r"crawlstore migrate "):
        Store.open(old, readonly=True)
    assert digest(old) == before and verify(old) == []  # unchanged, and sound


def test_a_writable_open_migrates_and_keeps_the_old_file(old: Path) -> None:
    before = digest(old)
    with Store.open(old) as store:
        assert store.meta["format"] == FORMAT_VERSION == 4
        assert sorted(store.crawls()) == ["default", "other"]
        main, other = store.frontier(), store.frontier(crawl="other")
        stats = main.stats()
        assert (stats.admitted, stats.popped, stats.done, stats.retried) == (60, 30, 20, 10)
        assert (stats.queued, stats.scheduled, stats.in_flight) == (40, 20, 0)
        assert main.core.policy.queues == "host" and main.order == "fifo"
        info = main.queue("h1.example")
        assert info is not None and info.delay == 5.0
        assert len(store.seen()) == 60 and len(store.validators()) == 20
        assert set(main.core.state("tag_backoff")) == {"PAGE"}
        assert len(other) == 20 and other.stats().in_flight == 0  # its seed in flight: queued
        assert len(store.seen(crawl="other", bloom=(1000, 0.01))) == 20
        revisits = [u for u in main.urls(state="scheduled", limit=100) if u.kind == "revisit"]
        assert len(revisits) == 20  # every page done (its retries were crawled again)
        assert main.pop().__class__.__name__ in ("Ready", "Wait")
        main.push(Seed.get("https://h0.example/new"))
    kept = old.with_name("old.lmdb.v1")
    assert digest(kept) == before  # the old file, kept beside the new one
    assert verify(old) == []
    with Store.open(old, readonly=True) as again:  # and now it reads
        assert again.frontier().stats().admitted == 61


def test_the_migrate_command(old: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "crawlstore", "migrate", str(old)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "migrated" in done.stdout and old.with_name("old.lmdb.v1").exists()
    files, before = sorted(old.parent.iterdir()), digest(old)
    again = subprocess.run([sys.executable, "-m", "crawlstore", "migrate", str(old)],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (again.returncode, again.stderr) == (0, "")  # nothing to do is not an error
    assert again.stdout == (f"{old}: in the current format already (format 4, fingerprint "
                            "version 2): nothing to migrate, nothing changed\n")  # fmt: skip
    assert digest(old) == before and sorted(old.parent.iterdir()) == files  # no copy kept


HOLD = """
import sys, lmdb
env = lmdb.open(sys.argv[1], subdir=False, readonly=True, max_dbs=32)
print("open", flush=True)
sys.stdin.read()
"""


def test_no_migration_while_another_process_has_the_file_open(old: Path) -> None:
    before = digest(old)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(old)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        with pytest.raises(StoreError, match=f"open in process {holder.pid}"):
            Store.open(old)
    finally:
        holder.communicate("", timeout=30)
    assert digest(old) == before and not old.with_name("old.lmdb.v1").exists()


def test_a_damaged_old_file_is_refused_never_aborts(tmp_path: Path) -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is not here")
    path = tmp_path / "damaged.lmdb"
    shutil.copy(SHARED / "aborts-lmdb-on-snapshot.lmdb", path)
    path.chmod(0o600)
    before = digest(path)
    with pytest.raises(CorruptStore, match="not migrated"):
        Store.open(path)
    assert digest(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.lmdb", "damaged.lmdb-lock"]
    intact = tmp_path / "intact.lmdb"
    shutil.copy(SHARED / "intact-original.lmdb", intact)
    intact.chmod(0o600)
    with Store.open(intact) as store:  # its intact original migrates
        assert store.frontier().stats().scheduled == 565 and len(store.seen()) == 565
