"""The write recorder of the power-loss tests sees what LMDB writes: per commit in "full" the
data pages, an fdatasync, then the meta page through an O_DSYNC descriptor; in "safe" the meta
page without one; in "nosync" no sync until the store is closed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from crawlstore.powerloss.record import OPEN, SYNC, WRITE, Op, read_log, record

pytestmark = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("cc", "gcc", "clang")),
    reason="the recorder is compiled at test time: install a C compiler (apt-get install gcc)",
)

WORKLOAD = """
import sys
from crawlstore import Seed, Store
with Store.open(sys.argv[1] + "/s.lmdb", durability=sys.argv[2]) as store:
    frontier = store.frontier("fifo")
    for i in range(3):
        frontier.push(Seed.get(f"https://a.example/{i}"))
"""


def _recorded(tmp_path: Path, mode: str) -> tuple[list[Op], dict[int, str]]:
    store = tmp_path / mode
    store.mkdir()
    script = tmp_path / "work.py"
    script.write_text(WORKLOAD)
    log = tmp_path / f"{mode}.log"
    done = record([sys.executable, str(script), str(store), mode], store, log)
    assert done.returncode == 0, done.stderr
    ops = list(read_log(log))
    paths = {op.file: op.data.decode() for op in ops if op.op == OPEN}
    return ops, paths


def _data(ops: list[Op], paths: dict[int, str]) -> list[Op]:
    """The calls on the store file itself (not its lock file)."""
    return [op for op in ops
            if paths.get(op.file, "").endswith("/s.lmdb") and op.op in (WRITE, SYNC)]  # fmt: skip


def _meta(op: Op) -> bool:
    return op.op == WRITE and op.offset % 4096 == 32 and len(op.data) < 4096


@pytest.mark.parametrize("mode", ["full", "safe", "nosync"])
def test_each_commit_is_seen_as_the_disk_sees_it(tmp_path: Path, mode: str) -> None:
    ops, paths = _recorded(tmp_path, mode)
    data = _data(ops, paths)
    metas = [op for op in data if _meta(op)]
    syncs = [i for i, op in enumerate(data) if op.op == SYNC]
    assert len(metas) >= 3  # a commit a push at least
    if mode == "full":
        assert all(op.dsync for op in metas) and not any(op.dsync for op in data if not _meta(op))
        for op in metas:  # each meta page right after the sync of its data pages
            assert data[data.index(op) - 1].op == SYNC
    elif mode == "safe":
        assert not any(op.dsync for op in data) and len(syncs) >= len(metas)
    else:
        assert syncs == [len(data) - 1]  # only closing syncs the file
    assert all(len(op.data) % 4096 == 0 for op in data if op.op == WRITE and not _meta(op))
