"""A store LMDB wrote and closed always opens again; a truncated copy never crashes the process.

LMDB may leave pages it allocated and freed within one transaction (loose pages) unwritten, so
a closed store can end before its last page number: the open check must tell that from a torn
copy by the free list, never by the file size alone.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import pop_seeds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstore import Backoff, Done, ManualClock, Retry, Seed, Store, Validator
from crawlstore.errors import CorruptStore, NotAStore
from crawlstore.frontier.traps import TrapPolicy
from crawlstore.revisit import RevisitTags, revisit
from crawlstore.store import verify


class Tag(RevisitTags):
    PAGE = revisit("1h")


def test_the_trap_store_of_the_report_opens_again(tmp_path: Path) -> None:
    for run in range(5):
        path = tmp_path / f"t{run}.db"
        with Store.open(path) as st_:
            f = st_.frontier().avoid_traps_with(TrapPolicy(max_urls=2))
            for u in ["https://h.com/x/1", "https://h.com/z/1", "https://h.com/x/2",
                      "https://h.com/x/3"]:  # fmt: skip
                f.push(Seed.get(u))
        with Store.open(path) as again:
            assert len(again.frontier()) == 3
        with Store.open(path, readonly=True) as inspect:
            assert len(inspect.frontier().snapshot().queued) == 3
        assert verify(path) == []


_OPS = ["push", "push_many", "crawl", "retry", "trap", "seen", "bloom", "validator", "backoff",
        "revisit", "queue", "reopen"]  # fmt: skip
#: One step of a user's session: (operation, a number that picks its arguments).
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(_OPS),
        st.integers(0, 400),
    ),
    min_size=1,
    max_size=40,
)


def _session(store: Store, clock: ManualClock, steps: list[tuple[str, int]]) -> None:
    frontier = (
        store.frontier(queues="host")
        .revisit(Tag)
        .dedup_with(store.seen())
        .avoid_traps_with(TrapPolicy(max_urls=3, max_fanout=4))
        .retry(2)
        .tag_backoff()
    )
    bloom = store.seen(crawl="bloom", bloom=(2000, 0.01))
    validators = store.validators()
    for op, n in steps:
        url = f"https://h{n % 7}.example/{n % 5}/{n}"
        if op == "push":
            frontier.push(Seed.get(url).with_tag(Tag.PAGE))
        elif op == "push_many":
            frontier.push_many(Seed.get(f"{url}/{i}").with_body(b"x" * n) for i in range(n % 30))
        elif op in ("crawl", "retry"):
            for seed in pop_seeds(frontier, 1 + n % 20):
                with store.transaction():
                    frontier.report(Retry(seed) if op == "retry" else Done(seed))
                    validators.put(seed.fingerprint, Validator(etag=f'"{n}"'))
        elif op == "trap":
            frontier.push_many(Seed.get(f"https://trap.example/c/{n}/{i}") for i in range(9))
        elif op == "seen":
            frontier.push(Seed.get(url))  # a duplicate of an earlier push, often
        elif op == "bloom":
            for i in range(n % 50):
                bloom.insert(Seed.get(f"{url}/{i}").fingerprint)
        elif op == "validator":
            validators.put(Seed.get(url).fingerprint, Validator(etag='"' + "x" * (n % 300) + '"'))
        elif op == "backoff":
            frontier.report(Backoff(Tag.PAGE, clock() + n))
        elif op == "revisit":
            clock.advance(3600 + n)
        elif op == "queue":
            store.frontier(queues="host").set_queue(f"h{n % 7}.example", delay=n % 3)


@pytest.mark.parametrize("durability", ["full", "safe", "nosync"])
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sessions=st.lists(_STEPS, min_size=1, max_size=4))
def test_a_closed_store_always_opens_again(
    tmp_path_factory: pytest.TempPathFactory, durability: str, sessions: list[list[tuple[str, int]]]
) -> None:
    path = tmp_path_factory.mktemp("reopen") / "s.lmdb"
    clock = ManualClock()
    for steps in sessions:
        parts = [[]]  # "reopen" splits a session: close the store and open it again
        for step in steps:
            if step[0] == "reopen":
                parts.append([])
            else:
                parts[-1].append(step)
        for part in parts:
            with Store.open(path, durability=durability, clock=clock) as store:
                _session(store, clock, part)
                stats = store.frontier().stats()
            with Store.open(path, readonly=True, clock=clock) as inspect:
                assert inspect.frontier().stats() == stats
                inspect.frontier().snapshot()
    assert verify(path, isolated=False) == []


# -- truncated copies ---------------------------------------------------------------------------

#: Opens each cut in turn and prints one JSON line per cut before the next one (a crash then
#: names the cut that caused it): the typed error, or a digest of everything in the file.
READ_CUTS = """
import hashlib, json, sys
from crawlstore import Store
from crawlstore.errors import CrawlstoreError
for path in sys.argv[1:]:
    try:
        with Store.open(path, readonly=True) as store:
            env, digest = store._storage.engine.env, hashlib.sha256()
            with env.begin() as txn:
                for name, db in sorted(store._storage.engine.dbs.items()):
                    for key, value in txn.cursor(db=db):
                        digest.update(name.encode() + key + value)
            for crawl in store.crawls():
                digest.update(repr(store.frontier(crawl=crawl).snapshot()).encode())
        outcome = digest.hexdigest()
    except CrawlstoreError as exc:
        outcome = type(exc).__name__
    print(json.dumps([path, outcome]), flush=True)
"""


def _read_cuts(paths: list[Path]) -> dict[str, str]:
    done = subprocess.run([sys.executable, "-c", READ_CUTS, *map(str, paths)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    outcomes = dict(json.loads(line) for line in done.stdout.splitlines())
    if done.returncode != 0:
        crashed = next((p for p in map(str, paths) if p not in outcomes), "?")
        pytest.fail(f"reading {crashed} killed the process ({done.returncode}): "
                    f"{done.stderr[-1500:]}")  # fmt: skip
    return outcomes


def test_truncated_copies_are_refused_or_read_whole(tmp_path: Path) -> None:
    originals = []
    for i, steps in enumerate([
        [("push_many", 29), ("trap", 3), ("crawl", 19), ("bloom", 49), ("retry", 5)] * 3,
        [("push", n) for n in range(60)] + [("crawl", 10), ("validator", 299)] * 4,
    ]):  # fmt: skip
        path = tmp_path / f"original{i}.lmdb"
        clock = ManualClock()
        with Store.open(path, clock=clock) as store:
            _session(store, clock, steps)
        originals.append(path)
    cuts: list[Path] = []
    for original in originals:
        data = original.read_bytes()
        page = 4096
        offsets = set(range(0, len(data), page))  # every page boundary
        offsets |= {o + d for o in range(0, len(data), 7 * page) for d in (1, 100, 2000, 4095)}
        offsets |= {len(data) - d for d in (1, 16, 152, 4096 - 1)}
        for offset in sorted(o for o in offsets if 0 <= o < len(data)):
            cut = tmp_path / f"{original.stem}-cut{offset}.lmdb"
            cut.write_bytes(data[:offset])
            cuts.append(cut)
    outcomes = _read_cuts(originals + cuts)
    whole = {str(o): outcomes[str(o)] for o in originals}
    assert all(len(v) == 64 for v in whole.values()), whole
    kinds = {"opened": 0, "CorruptStore": 0, "NotAStore": 0}
    for cut in cuts:
        outcome = outcomes[str(cut)]
        original = str(cut).split("-cut")[0] + ".lmdb"
        if len(outcome) == 64:  # opened: then it must hold exactly what the original holds
            assert outcome == whole[original], f"{cut} opened with other contents"
            kinds["opened"] += 1
        else:
            assert outcome in kinds, f"{cut}: {outcome}"
            kinds[outcome] += 1
    assert kinds["CorruptStore"] > 10 and kinds["NotAStore"] >= 2, kinds


def test_a_short_file_whose_missing_pages_hold_data_is_torn(tmp_path: Path) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path) as store:
        store.frontier().push_many(Seed.get(f"https://e.com/{i}") for i in range(500))
    data = path.read_bytes()
    (tmp_path / "cut.lmdb").write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptStore, match="is torn"):
        Store.open(tmp_path / "cut.lmdb", readonly=True)
    (tmp_path / "head.lmdb").write_bytes(data[:100])
    with pytest.raises(NotAStore):
        Store.open(tmp_path / "head.lmdb")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with Store.open(path, readonly=True) as store:  # the original is untouched
        assert len(store.frontier()) == 500
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


WRITER = """
import sys
from crawlstore import Done, Seed, Store
with Store.open(sys.argv[1], durability="nosync") as store:
    f = store.frontier()
    print("writing", flush=True)
    for i in range(800):
        f.push_many(Seed.get(f"https://e.com/{i}/{j}") for j in range(50))
        for seed in [r.seed for r in f.pop_many(40)]:
            f.report(Done(seed))
"""


def test_opening_while_another_process_writes_never_sees_a_torn_file(tmp_path: Path) -> None:
    # The file grows and its free pages are reused while the open checks its end: a check
    # that read the size before the meta page, or trusted a free list a commit rewrote, saw
    # a torn file about once in a thousand opens.
    path = tmp_path / "s.lmdb"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
    opens = 0
    while writer.poll() is None:
        with Store.open(path, readonly=opens % 2 == 0, durability="nosync") as store:
            len(store.frontier())
        opens += 1
    assert writer.returncode == 0 and opens > 100
