"""``crawlstore export`` and ``import`` run as users run them: strict JSON whatever the crawl
holds (a queue that never handed out a seed, floats that are not finite, bytes, keys that look
like the JSON form's own), read back exactly; gzip told by its first bytes; and an import that
is all or nothing, on a file and on Redis, naming the file and line of what is wrong."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from cli_helpers import COMMAND, cli, export
from helpers import DATA
from redis_servers import Node
from strict_json import strict_lines

from crawlstore import Failed, ManualClock, Seed, Store, Validator

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
    export(crawl, "-o", out)
    return out


def _meta(store: Store) -> dict[str, object]:
    (url,) = [u for u in store.frontier().urls() if u.url.endswith("/m")]
    return dict(url.meta)


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_an_export_is_strict_json_that_reads_back_exactly(
    crawl: Path, tmp_path: Path, suffix: str
) -> None:
    dump = tmp_path / f"dump{suffix}"
    export(crawl, "-o", dump)
    records = strict_lines(dump)
    lasts = {r["key"]: r["last"] for r in records if r["type"] == "queue"}
    assert lasts["h2.example"] == lasts["h3.example"] == {"$f": "-Infinity"}
    assert strict_lines(export(crawl)) == records  # stdout: the same
    copy = tmp_path / "copy.lmdb"
    cli("import", copy, dump)
    again = tmp_path / f"again{suffix}"
    export(copy, "-o", again)
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
    export(tmp_path / "a.lmdb", "-o", first)
    assert [json.loads(line) for line in old.read_text().splitlines()] == [
        json.loads(line) for line in first.read_text().replace('{"$f":"-Infinity"}', "-Infinity")
        .replace('{"$f":"Infinity"}', "Infinity").splitlines()]  # fmt: skip
    cli("import", tmp_path / "b.lmdb", first)
    export(tmp_path / "b.lmdb", "-o", tmp_path / "second.jsonl")
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
        export(tmp_path / f"{name}.lmdb", "-o", tmp_path / f"{name}.jsonl")
        assert strict_lines(tmp_path / f"{name}.jsonl") == strict_lines(dump)


Damage = Callable[[list[bytes]], tuple[bytes, int]]


def _joined(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _replace(kind: str, change: Callable[[dict[str, object]], object]) -> Damage:
    """The first record of ``kind`` changed."""

    def damage(lines: list[bytes]) -> tuple[bytes, int]:
        at = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == kind)
        record = json.loads(lines[at])
        change(record)
        lines[at] = json.dumps(record).encode()
        return _joined(lines), at + 1

    return damage


def _not_json(lines: list[bytes]) -> tuple[bytes, int]:
    lines[2] = b'{"type": "url"'
    return _joined(lines), 3


def _not_utf8(lines: list[bytes]) -> tuple[bytes, int]:
    lines[1] = lines[1].replace(b'"key":"', b'"key":"\xff')
    return _joined(lines), 2


def _too_deep(lines: list[bytes]) -> tuple[bytes, int]:
    lines[1] = lines[1][:-1] + b',"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return _joined(lines), 2


def _after_the_end(lines: list[bytes]) -> tuple[bytes, int]:
    return _joined([*lines, lines[1]]), len(lines) + 1


def _cut_gzip(lines: list[bytes]) -> tuple[bytes, int]:
    whole = gzip.compress(_joined(lines))
    return whole[: len(whole) // 2], 0  # the line: wherever the gzip data ends


def _bad_crc(lines: list[bytes]) -> tuple[bytes, int]:
    whole = bytearray(gzip.compress(_joined(lines)))
    whole[-8] ^= 0xFF  # the CRC of the trailer: every line reads, then the check fails
    return bytes(whole), len(lines) + 1


def _blank_lines_then(damage: Damage) -> Damage:
    """Blank lines (which an import skips) before the damage: the line named is the file's."""

    def blanks(lines: list[bytes]) -> tuple[bytes, int]:
        data, line = damage(lines)
        return b"\n\n" + data.replace(b"\n", b"\n\n", 1), line + 3

    return blanks


INF = {"$f": "Infinity"}
DAMAGES: dict[str, tuple[Damage, str]] = {
    "empty": (lambda lines: (b"", 1), "starts with its crawl record"),
    "not JSON": (_not_json, "not JSON"),
    "not UTF-8": (_not_utf8, "UTF-8"),
    "too deep": (_too_deep, "nested too deep"),
    "newer version": (_replace("crawl", lambda r: r.update(v=99)), "version 99"),
    "bad url": (_replace("url", lambda r: r.update(seed="garbage")), "malformed"),
    "bad fingerprint": (_replace("seen", lambda r: r.update(fps=[{"$b": "AAAA"}])), "16 bytes"),
    "bad validator": (_replace("validator", lambda r: r.pop("etag")), "malformed"),
    "short validator": (_replace("validator", lambda r: r.update(fp={"$b": "AAAA"})), "16 bytes"),
    "bad float": (_replace("queue", lambda r: r.update(last={"$f": "huge"})), "Infinity"),
    "NaN time": (_replace("queue", lambda r: r.update(blocked={"$f": "NaN"})), "NaN"),
    "endless count": (_replace("crawl", lambda r: r.update(totals={"admitted": INF})), "malformed"),
    "huge integer": (_replace("crawl", lambda r: r["policy"].update(delay=2**70)), "64-bit"),
    "cut short": (lambda lines: (_joined(lines[:-1]), len(lines)), "cut short"),
    "after the end": (_after_the_end, "after the end record"),
    "miscounted": (_replace("end", lambda r: r.update(counts={})), "counts"),
    "gzip cut short": (_cut_gzip, "cut short"),
    "gzip damaged": (_bad_crc, "gzip"),
    "blank lines": (_blank_lines_then(_replace("url", lambda r: r.pop("seed"))), "malformed"),
}


@pytest.mark.parametrize("damage", DAMAGES, ids=list(DAMAGES))
def test_a_bad_import_names_the_line_and_leaves_no_trace(
    crawl: Path, dump: Path, tmp_path: Path, damage: str
) -> None:
    make, says = DAMAGES[damage]
    data, line = make(dump.read_bytes().splitlines())
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    files, held = sorted(tmp_path.iterdir()), export(crawl)
    for target, args in ((tmp_path / "new.lmdb", ()), (crawl, ("--crawl", "copy"))):
        failed = cli("import", target, bad, *args, check=3)
        assert failed.stdout == "" and len(failed.stderr.splitlines()) == 1, failed.stderr
        where = f"crawlstore import: {bad}, line {line or ''}"
        assert failed.stderr.startswith(where) and says in failed.stderr, failed.stderr
        assert sorted(tmp_path.iterdir()) == files  # no file created
    assert export(crawl) == held  # the store's crawl as it was, and no other
    assert json.loads(cli("stats", crawl, "--json").stdout)["crawls"].keys() == {"default"}
    cli("verify", crawl)


def test_an_import_into_redis_is_all_or_nothing(
    dump: Path, tmp_path: Path, redis_node: Node, redis_url: str
) -> None:
    namespace = redis_url.rpartition("ns=")[2]
    server = redis.Redis(port=redis_node.port)

    def keys() -> set[bytes]:
        return {*server.scan_iter(f"{{{namespace}}}*"), *server.scan_iter(f"{{{namespace}:*")}

    clock = ManualClock(1_700_000_000)
    with Store.open(redis_url, clock=clock) as store:
        _fill(store, clock)
    before, held = export(redis_url), keys()
    for damage in ("gzip cut short", "bad validator", "cut short", "bad fingerprint"):
        data, line = DAMAGES[damage][0](dump.read_bytes().splitlines())
        bad = tmp_path / "bad.jsonl"
        bad.write_bytes(data)
        failed = cli("import", redis_url, bad, "--crawl", "copy", check=3)
        assert failed.stderr.startswith(f"crawlstore import: {bad}, line {line or ''}")
        assert export(redis_url) == before and keys() == held
    cli("import", redis_url, dump, "--crawl", "copy")
    assert strict_lines(export(redis_url, "--crawl", "copy"))[1:] == (
        strict_lines(dump)[1:])  # fmt: skip
