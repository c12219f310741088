"""A full disk or an I/O error at any write or sync of a crawl (injected by the recorder): the
crawl stops with a typed error, and the file it leaves opens, verifies and holds every unit
acknowledged before it. After an I/O error nothing more is written in that process."""

from __future__ import annotations

import errno
import shutil
import sys
from pathlib import Path

import pytest

from crawlstore.powerloss.faults import calls, inject
from crawlstore.powerloss.record import record

pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("cc", "gcc", "clang")),
    reason="the recorder is compiled at test time: install a C compiler (apt-get install gcc)",
)
TYPED = ("crawlstore.errors.StoreFull:", "crawlstore.errors.StoreError:")


@pytest.mark.parametrize("mode", ["full", "safe"])
def test_a_fault_anywhere_keeps_what_was_acknowledged(tmp_path: Path, mode: str) -> None:
    writes, syncs = calls(mode, 5, tmp_path)
    faults = [f"write:{n}:{e}" for n in range(1, writes + 1, max(1, writes // 8))
              for e in (errno.ENOSPC, errno.EIO)]  # fmt: skip
    faults += [f"sync:{n}:{errno.EIO}" for n in range(1, syncs + 1)]
    for fault in faults:
        run = inject(mode, 5, fault, tmp_path)
        assert run.error.startswith(TYPED), (fault, run.error)
        outcome = run.outcome
        assert outcome.opened and not outcome.problems, (fault, outcome)
        assert outcome.lost == 0 and not outcome.broken, (fault, outcome)


SCRIPT = """
import sys
from crawlstore import Seed, Store
from crawlstore.errors import StoreError
with Store.open(sys.argv[1] + "/s.lmdb") as store:
    frontier, failed, after = store.frontier("fifo"), None, 0
    for i in range(12):
        try:
            frontier.push(Seed.get(f"https://a.example/{i}"))
            after += failed is not None
        except StoreError as exc:
            failed = failed or str(exc)
    print(after, failed)
"""


def test_after_a_failed_sync_the_process_writes_nothing_more(tmp_path: Path) -> None:
    store = tmp_path / "d"
    store.mkdir()
    script = tmp_path / "s.py"
    script.write_text(SCRIPT)
    done = record([sys.executable, str(script), str(store)], store, tmp_path / "log",
                  fault=f"sync:6:{errno.EIO}")  # fmt: skip
    after, _, message = done.stdout.strip().partition(" ")
    assert after == "0" and "open it again in a new process" in message, done.stdout
    again = record([sys.executable, str(script), str(store)], store, tmp_path / "log2")
    assert again.stdout.startswith("0 None"), again.stdout  # a new process writes again


FLUSHED = """
import sys, time
from crawlstore import Seed, Store
from crawlstore.errors import StoreError
with Store.open(sys.argv[1] + "/s.lmdb", durability="nosync", flush_interval=0.02) as store:
    frontier, deadline, i = store.frontier("fifo"), time.monotonic() + 60, 0
    while time.monotonic() < deadline:  # until the failed flush refuses a write
        try:
            frontier.push(Seed.get(f"https://a.example/{i}"))
        except StoreError as exc:
            print("refused:", exc)
            break
        i += 1
        time.sleep(0.005)
"""


def test_a_periodic_flush_that_failed_stops_the_writes(tmp_path: Path) -> None:
    store = tmp_path / "d"
    store.mkdir()
    script = tmp_path / "s.py"
    script.write_text(FLUSHED)
    # the file's two syncs as it is made, then the flushes: the first of them fails
    done = record([sys.executable, str(script), str(store)], store, tmp_path / "log",
                  fault=f"sync:3:{errno.EIO}")  # fmt: skip
    assert done.stdout.startswith("refused:") and "a periodic flush" in done.stdout, done
