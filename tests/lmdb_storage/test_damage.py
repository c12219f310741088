"""Damaged files: hundreds of copies of real stores with bytes overwritten, each read in a child.

``verify`` is declared safe: it never takes its caller down, and it reports every file that a
crawl could not read. Opening a damaged file for a crawl raises typed errors only; LMDB has no
page checksums, so it may still abort the process: those outcomes are counted, not forbidden.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from helpers import SHARED_DATA, pop_seeds

from crawlstore import Done, ManualClock, Seed, Store, Validator
from crawlstore.errors import OlderFormat
from crawlstore.store import verify

FIXTURES = SHARED_DATA / "damaged"

#: Each path in turn: verify it, then read all of it as a crawl would, one JSON line each,
#: printed before the next path (a crash then names the path and the step).
READ = """
import json, sys
from crawlstore import Done, Store
from crawlstore.errors import CrawlstoreError
from crawlstore.errors import OlderFormat
from crawlstore.store import verify
step = sys.argv[1]
for path in sys.argv[2:]:
    print(json.dumps([path, "started"]), flush=True)
    if step == "verify":
        problems = verify(path)
        outcome = "problems" if problems else "clean"
        if any("LMDB aborted" in p for p in problems):
            outcome = "problems: LMDB aborted in the child"
    else:
        try:
            with Store.open(path) as store:
                for crawl in store.crawls():
                    f = store.frontier(crawl=crawl)
                    f.stats(), f.snapshot(), len(f), list(store.seen(crawl=crawl))
                    for seed in [r.seed for r in f.pop_many(5)]:
                        with store.transaction():
                            f.report(Done(seed))
                            store.validators(crawl=crawl).get(seed.fingerprint)
            outcome = "read"
        except CrawlstoreError as exc:
            outcome = "typed " + type(exc).__name__ + ": " + str(exc)[-150:]
        except Exception as exc:
            outcome = "untyped " + type(exc).__name__ + ": " + str(exc)[:200]
    print(json.dumps([path, outcome]), flush=True)
"""


def _outcomes(step: str, paths: list[Path]) -> dict[str, str]:
    """Each path's outcome; a child that dies is replaced, its path recorded as 'crashed'."""
    outcomes: dict[str, str] = {}
    left = [str(p) for p in paths]
    while left:
        done = subprocess.run([sys.executable, "-c", READ, step, *left], capture_output=True,
                              text=True, timeout=900)  # fmt: skip
        started = None
        for line in done.stdout.splitlines():
            path, outcome = json.loads(line)
            if outcome == "started":
                started = path
            else:
                outcomes[path], started = outcome, None
        if started is not None:
            outcomes[started] = f"crashed ({done.returncode}): {done.stderr.strip()[-200:]}"
        elif done.returncode != 0:
            pytest.fail(f"the reading child failed: {done.stderr[-2000:]}")
        left = [p for p in left if p not in outcomes]
    return outcomes


def _originals(tmp_path: Path) -> list[Path]:
    """Stores of every kind of state the current code writes."""
    made = []
    for n, size in enumerate((300, 1500)):
        path = tmp_path / f"original{n}.lmdb"
        clock = ManualClock()
        with Store.open(path, clock=clock) as store:
            f = store.frontier(queues="host").dedup_with(store.seen()).retry(2).tag_backoff()
            f.push_many(Seed.get(f"https://h{i % 9}.e/{i}").with_tag("t") for i in range(size))
            bloom = store.seen(crawl="b", bloom=(size, 0.01))
            for i in range(size):
                bloom.insert(Seed.get(f"https://b.e/{i}").fingerprint)
            for _ in range(3):
                clock.advance(1)
                for seed in pop_seeds(f, size // 10):
                    with store.transaction():
                        f.report(Done(seed))
                        store.validators().put(seed.fingerprint, Validator(etag=f'"{seed.url}"'))
        made.append(path)
    return made


def _damaged(originals: list[Path], tmp_path: Path, copies: int) -> list[Path]:
    out = []
    for i in range(copies):
        rng = random.Random(i)
        original = originals[i % len(originals)]
        data = bytearray(original.read_bytes())
        kind = ("bytes", "bytes", "bytes", "block", "page", "bit", "meta")[i % 7]
        if kind == "bytes":  # a few random bytes here and there
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(8192, len(data))] = rng.randrange(256)
        elif kind == "block":  # 30 KB in the middle
            at = rng.randrange(8192, len(data) - 30_000)
            data[at : at + 30_000] = rng.randbytes(30_000)
        elif kind == "page":  # one page zeroed
            page = rng.randrange(2, len(data) // 4096)
            data[page * 4096 : (page + 1) * 4096] = bytes(4096)
        elif kind == "bit":
            at = rng.randrange(8192, len(data))
            data[at] ^= 1 << rng.randrange(8)
        else:  # the meta pages
            data[rng.randrange(0, 8192)] = rng.randrange(256)
        path = tmp_path / f"damaged{i}-{kind}.lmdb"
        path.write_bytes(bytes(data))
        out.append(path)
    return out


def test_hundreds_of_damaged_copies(tmp_path: Path) -> None:
    originals = _originals(tmp_path)
    damaged = _damaged(originals, tmp_path, 280)
    crawl = _outcomes("crawl", damaged)
    checked = _outcomes("verify", originals + damaged)
    summary = Counter(o.split(":")[0] for o in crawl.values())
    print("reading for a crawl:", dict(summary), "verify:", dict(Counter(checked.values())))
    assert not [o for o in checked.values() if o.startswith("crashed")], "verify crashed"
    assert all(checked[str(o)] == "clean" for o in originals)
    untyped = {p: o for p, o in crawl.items() if o.startswith("untyped")}
    assert not untyped, untyped
    for path in map(str, damaged):
        if crawl[path] != "read":  # what a crawl cannot read, verify reports
            assert checked[path].startswith("problems"), (path, crawl[path], checked[path])
    assert summary["typed CorruptStore"] + summary["typed CorruptRecord"] > 50, summary
    assert "typed StoreError" not in summary, summary  # damage is never a bare StoreError


def test_the_fixture_that_aborted_lmdb(tmp_path: Path) -> None:
    if not FIXTURES.is_dir():
        pytest.skip(f"{FIXTURES} is not here")
    for name in ("aborts-lmdb-on-snapshot.lmdb", "intact-original.lmdb"):
        shutil.copy(FIXTURES / name, tmp_path / name)
        (tmp_path / name).chmod(0o600)
    damaged, intact = tmp_path / "aborts-lmdb-on-snapshot.lmdb", tmp_path / "intact-original.lmdb"
    assert verify(damaged) and verify(intact) == []
    checked = _outcomes("verify", [damaged])
    assert checked[str(damaged)] == "problems"
    crawl = _outcomes("crawl", [intact, damaged])
    assert crawl[str(intact)] == "read"
    assert crawl[str(damaged)].startswith(("crashed (-6)", "typed CorruptStore")), crawl
    with pytest.raises(OlderFormat):  # the format before the frontier core: never read as is
        Store.open(damaged, readonly=True)


def test_verify_reports_an_abort_of_lmdb_in_its_child(tmp_path: Path) -> None:
    from crawlstore.storages._lmdb.verify import _check_in_child

    # Zero each page of a real store in a copy, and take one that makes LMDB abort reading it
    # (a few in a hundred: which ones depends on the file's layout).
    (original,) = _originals(tmp_path)[:1]
    data = original.read_bytes()
    copies = []
    for page in range(2, len(data) // 4096):
        copies.append(tmp_path / f"zeroed{page}.lmdb")
        copies[-1].write_bytes(data[: page * 4096] + bytes(4096) + data[(page + 1) * 4096 :])
    outcomes = _outcomes("crawl", copies)
    aborted = [p for p in copies if outcomes[str(p)].startswith("crashed (-6)")]
    # The page check finds this damage first; read the records anyway, as for damage it missed
    # (the records are read in another order than a crawl's: LMDB may find the page wrong
    # before it aborts on it, which is a typed problem, not this test's)
    for damaged in aborted:
        problems = _check_in_child(damaged)
        if any("aborted" in p for p in problems):
            break
    else:
        pytest.fail(f"no zeroed page made LMDB abort in verify's child ({len(aborted)} did in "
                    "a crawl)")  # fmt: skip
    assert len(problems) == 1 and problems[0].startswith("damaged: LMDB aborted reading table ")
    assert "SIGABRT" in problems[0] and "Assertion" in problems[0], problems


def test_verify_checks_the_bounded_indexes(tmp_path: Path) -> None:
    """The revisits the index counts are those scheduled, and the recent failures are as many
    as their count says: verify names a drift of either."""
    import lmdb

    from crawlstore import Failed
    from crawlstore.revisit import TagIntervals

    path = tmp_path / "s.lmdb"
    with Store.open(path) as store:
        f = store.frontier(delay=0).revisit(TagIntervals({"n": "10m"}))
        f.push_many([Seed.get(f"https://a.test/{i}").with_tag("n") for i in range(6)])
        for i, ready in enumerate(f.pop_many(6)):
            f.report(Failed(ready.seed, reason="x") if i % 2 else Done(ready.seed))
    assert verify(path) == []
    env = lmdb.open(str(path), subdir=False, max_dbs=32)
    try:
        with env.begin(write=True) as txn:
            revisits = env.open_db(b"revisits", txn=txn)
            key, value = next(iter(txn.cursor(db=revisits)))
            txn.put(key, (int.from_bytes(value, "big") + 1).to_bytes(8, "big"), db=revisits)
            failures = env.open_db(b"failures", txn=txn)
            first = next(k for k, _ in txn.cursor(db=failures) if len(k) > 4)
            txn.delete(first, db=failures)
    finally:
        env.close()
    assert verify(path) == [
        "crawl 'default': the revisits index counts 7, the schedule holds 6",
        "crawl 'default': the recent failures count 3, 2 are kept",
    ]
