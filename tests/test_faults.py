"""Faults from outside: a full disk, a second writer thread."""

from __future__ import annotations

import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlstore import Done, Seed, Store
from crawlstore.errors import StoreFull


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of the test's own (needs the right to mount, as CI's root has)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_raises_store_full_and_loses_nothing(tiny_disk: Path) -> None:
    ballast = tiny_disk / "ballast"
    ballast.write_bytes(b"\0" * 2**20)
    path = tiny_disk / "s.lmdb"
    with Store.open(path) as store:
        f = store.frontier("fifo")
        pushed = 0
        with pytest.raises(StoreFull, match="disk is full"):
            while True:
                f.push(Seed.get(f"https://example.com/{pushed}").with_body(b"x" * 500))
                pushed += 1
        assert pushed > 100 and len(f) == pushed
        ballast.unlink()  # space comes back: the store works on
        f.push(Seed.get("https://example.com/after"))
        assert len(f) == pushed + 1
    with Store.open(path) as store:
        assert len(store.frontier()) == pushed + 1


def test_threads_share_a_store_and_pop_each_seed_once(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.lmdb", durability="group") as store:
        f = store.frontier("fifo").dedup_with(store.seen())
        f.push_many(Seed.get(f"https://example.com/{i}") for i in range(800))
        crawled: list[str] = []
        lock = threading.Lock()

        def work() -> None:
            view = store.frontier()  # each thread may take its own view, or share one
            while (seed := view.next_seed(poll=0.01)) is not None:
                view.report(Done(seed))
                with lock:
                    crawled.append(seed.url)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        counts = Counter(crawled)
        assert len(counts) == 800 and max(counts.values()) == 1
        assert f.stats().done == 800 and len(f) == 0
