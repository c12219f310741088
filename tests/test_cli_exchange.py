"""``crawlstore export`` and ``import`` run as users run them: strict JSON whatever the crawl
holds (a queue that never handed out a seed, floats that are not finite, bytes, keys that look
like the JSON form's own), read back exactly; gzip told by its first bytes."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
from pathlib import Path

import pytest
from strict_json import strict_lines
from test_cli import COMMAND, cli

from crawlstore import Failed, ManualClock, Seed, Store, Validator

DATA = Path(__file__).resolve().parent / "data"
META = {"inf": math.inf, "low": -math.inf, "nan": math.nan, "tagged": {"$b": "abcd"},
        "float": {"$f": "NaN"}, "escaped": {"$": {"x": 1}}, "bytes": b"\x00\xff",
        "keys": {b"raw": 1}}  # fmt: skip


def _fill(store: Store, clock: ManualClock) -> None:
    """Host queues (two never handed out a seed), a seed whose meta holds what JSON has no
    form for, a failed URL, a seed in flight, the seen set and a validator."""
    frontier = store.frontier("fifo", queues="host").dedup_with(store.seen())
    frontier.push_many([Seed.get(f"https://h{i % 3}.example/{i}") for i in range(6)])
    frontier.push(Seed.get("https://h3.example/m").with_meta(META))
    clock.advance(5)
    ready = frontier.pop()
    frontier.report(Failed(ready.seed, status=404))  # type: ignore[union-attr]
    frontier.pop()
    store.validators().put(Seed.get("https://h0.example/0").fingerprint, Validator('"e"'))


@pytest.fixture
def crawl(tmp_path: Path) -> Path:
    file = tmp_path / "crawl.lmdb"
    clock = ManualClock(1_700_000_000)
    with Store.open(file, clock=clock, durability="nosync") as store:
        _fill(store, clock)
    return file


@pytest.fixture
def dump(crawl: Path, tmp_path: Path) -> Path:
    out = tmp_path / "dump.jsonl"
    cli("export", crawl, "-o", out)
    return out


def _meta(store: Store) -> dict[str, object]:
    (url,) = [u for u in store.frontier().urls() if u.url.endswith("/m")]
    return dict(url.meta)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_an_export_is_strict_json_that_reads_back_exactly(
    crawl: Path, tmp_path: Path, suffix: str
) -> None:
    dump = tmp_path / f"dump{suffix}"
    cli("export", crawl, "-o", dump)
    records = strict_lines(dump)
    lasts = {r["key"]: r["last"] for r in records if r["type"] == "queue"}
    assert lasts["h2.example"] == lasts["h3.example"] == {"$f": "-Infinity"}
    assert strict_lines(cli("export", crawl).stdout) == records  # stdout: the same
    copy = tmp_path / "copy.lmdb"
    cli("import", copy, dump)
    again = tmp_path / f"again{suffix}"
    cli("export", copy, "-o", again)
    assert strict_lines(again) == records  # export, import, export: a fixed point
    with Store.open(copy) as store:
        meta = _meta(store)
        assert store.frontier().queue("h3.example").last_pop == -math.inf  # type: ignore[union-attr]
    assert math.isnan(meta.pop("nan"))  # type: ignore[arg-type]
    assert meta == {k: v for k, v in META.items() if k != "nan"}


def test_an_export_made_before_the_json_form_reads_back(tmp_path: Path) -> None:
    """``tests/data/export-infinity.jsonl``: written with bare ``-Infinity`` and ``Infinity``."""
    old = DATA / "export-infinity.jsonl"
    cli("import", tmp_path / "a.lmdb", old)
    with Store.open(tmp_path / "a.lmdb") as store:
        assert store.frontier().queue("h2.example").last_pop == -math.inf  # type: ignore[union-attr]
        assert _meta(store) == {"weight": math.inf, "low": -math.inf}
    first = tmp_path / "first.jsonl"
    cli("export", tmp_path / "a.lmdb", "-o", first)
    assert [json.loads(line) for line in old.read_text().splitlines()] == [
        json.loads(line) for line in first.read_text().replace('{"$f":"-Infinity"}', "-Infinity")
        .replace('{"$f":"Infinity"}', "Infinity").splitlines()]  # fmt: skip
    cli("import", tmp_path / "b.lmdb", first)
    cli("export", tmp_path / "b.lmdb", "-o", tmp_path / "second.jsonl")
    assert strict_lines(tmp_path / "second.jsonl") == strict_lines(first)


def test_gzip_is_told_by_its_first_bytes_on_files_and_stdin(dump: Path, tmp_path: Path) -> None:
    zipped = gzip.compress(dump.read_bytes())
    piped = subprocess.run([*COMMAND, "import", str(tmp_path / "a.lmdb"), "-"], input=zipped,
                           capture_output=True, timeout=120)  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    plain = subprocess.run([*COMMAND, "import", str(tmp_path / "b.lmdb"), "-"],
                           input=dump.read_bytes(), capture_output=True, timeout=120)  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    misnamed = tmp_path / "zipped.jsonl"
    misnamed.write_bytes(zipped)
    cli("import", tmp_path / "c.lmdb", misnamed)
    unzipped = tmp_path / "plain.jsonl.gz"
    unzipped.write_bytes(dump.read_bytes())
    cli("import", tmp_path / "d.lmdb", unzipped)
    for name in "abcd":
        cli("export", tmp_path / f"{name}.lmdb", "-o", tmp_path / f"{name}.jsonl")
        assert strict_lines(tmp_path / f"{name}.jsonl") == strict_lines(dump)
