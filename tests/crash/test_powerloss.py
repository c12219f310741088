"""Power loss, replayed: the crawl loop is recorded in each durability mode, every crash image
its record allows is built (``crawlstore.powerloss.images``) and checked in a child
(``crawlstore.powerloss.check``). "full" keeps every acknowledged unit; "safe" may lose its last
commit and no more; both always open and verify. "nosync" is measured, not held to anything."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crawlstore.powerloss.check import KINDS, allowed, run
from crawlstore.powerloss.images import images
from crawlstore.powerloss.record import LINK, OPEN, SYNC, WRITE, Op

needs_compiler = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("cc", "gcc", "clang")),
    reason="the recorder is compiled at test time: install a C compiler (apt-get install gcc)",
)


@needs_compiler
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["full", "safe"])
def test_no_image_loses_more_than_the_mode_allows(tmp_path: Path, mode: str, kind: str) -> None:
    most = allowed(mode, kind)
    summary = run(mode, 8, tmp_path, kind=kind, seed=1)
    assert summary.images > 50 and summary.creating > 0
    assert summary.creating_unopened == 0  # a store's file appears whole, or not at all
    assert summary.opened == summary.verified == summary.images, summary.examples
    assert most is not None and summary.most_lost <= most, summary.examples
    assert summary.broken == 0, summary.examples


@needs_compiler
def test_nosync_is_measured(tmp_path: Path) -> None:
    summary = run("nosync", 8, tmp_path, seed=1)
    assert summary.images > 5 and summary.opened <= summary.images


def _op(op: int, offset: int = 0, data: bytes = b"", *, file: int = 0, dsync: bool = False) -> Op:
    return Op(op, file, dsync, offset, data)


def test_the_model_keeps_what_a_barrier_made_durable() -> None:
    page = lambda c: bytes([c]) * 4096  # noqa: E731
    ops = [_op(OPEN, data=b"/s"), _op(WRITE, 0, page(1)), _op(SYNC),
           _op(WRITE, 4096, page(2)), _op(WRITE, 0, page(3))]  # fmt: skip
    found = {(i.ops, i.label): i.data for i in images(ops, "/s", subsets=0, torn=0)}
    assert found[(2, "all")] == page(1)  # just before the barrier: the write pending
    assert found[(2, "none")] == b""
    assert found[(5, "all")] == page(3) + page(2)
    assert found[(5, "none")] == page(1)  # the synced page, without what came after
    assert found[(5, "prefix 1/2")] == page(1) + page(2)


def test_an_o_dsync_write_is_durable_with_its_page() -> None:
    ops = [_op(OPEN, data=b"/s"), _op(OPEN, data=b"/s", file=1),
           _op(WRITE, 0, b"a" * 4096), _op(WRITE, 8, b"meta", file=1, dsync=True),
           _op(WRITE, 4096, b"b" * 4096)]  # fmt: skip
    found = [i for i in images(ops, "/s", subsets=0, torn=0) if i.label == "none"]
    assert found[-1].data == b"a" * 8 + b"meta" + b"a" * 4084  # the page went with the meta


def test_a_torn_page_keeps_some_sectors_only() -> None:
    ops = [_op(OPEN, data=b"/s"), _op(WRITE, 0, b"\0" * 4096), _op(SYNC),
           _op(WRITE, 0, b"x" * 4096)]  # fmt: skip
    made = images(ops, "/s", subsets=0, torn=8, seed=3)
    torn = [i.data for i in made if i.label == "torn" and i.ops == len(ops)]
    assert torn and all(len(t) == 4096 for t in torn)
    assert any(0 < t.count(b"x" * 512) < 8 for t in torn)
    assert all(t.count(b"x") % 512 == 0 for t in torn)


def test_a_linked_name_needs_its_directory_synced() -> None:
    ops = [_op(OPEN, data=b"/d/.s.new"), _op(WRITE, 0, b"a" * 4096), _op(SYNC),
           _op(LINK, data=b"/d/.s.new\0/d/s"), _op(OPEN, data=b"/d", file=1),
           _op(SYNC, file=1), _op(OPEN, data=b"/d/s", file=2),
           _op(WRITE, 4096, b"b" * 4096, file=2), _op(SYNC, file=2)]  # fmt: skip
    found = [(i.ops, i.label, i.data) for i in images(ops, "/d/s", subsets=0, torn=0)]
    assert (5, "no file", None) in found and (5, "all", b"a" * 4096) in found  # linked, unsynced
    assert (8, "none", b"a" * 4096) in found  # the name durable: the file as it was made
    assert all(label != "no file" for at, label, _ in found if at > 5)


@needs_compiler
def test_the_command_prints_the_figures() -> None:
    from cli_helpers import cli

    done = cli("torture", "--power-loss", "--minutes", "0", "--pages", "2")
    rows = {line.split(" | ")[0].strip("| "): line for line in done.stdout.splitlines()}
    assert {f"{mode}, {kind}" for mode in ("full", "safe", "nosync") for kind in KINDS} <= set(rows)
    assert done.stdout.startswith("rounds 1, 2 pages a round")
