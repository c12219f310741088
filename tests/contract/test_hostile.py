"""Hostile input: arbitrary text and bytes at every entry point that takes outside data. Only
documented typed errors come out, and a refused operation leaves the store unchanged."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstore import BloomSeen, InMemSeen, Seed, Snapshot, Store, Validator
from crawlstore.errors import InvalidInterval, InvalidSeed, InvalidSnapshot, InvalidValidator
from crawlstore.frontier.traps import TrapPolicy
from crawlstore.revisit import parse_interval

text = st.text(max_size=60)
anything = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=5),
    max_leaves=30,
)  # fmt: skip


@given(text, text | st.binary(max_size=30), st.lists(st.tuples(text, text), max_size=3),
       text | st.binary(max_size=30), text | st.none(), st.integers() | st.floats(),
       st.integers())  # fmt: skip
def test_seed_takes_anything_or_raises_invalid_seed(
    method,
    url,
    headers,
    body,
    tag,
    priority,
    depth,  # type: ignore[no-untyped-def]
) -> None:
    try:
        s = Seed(method, url, headers=headers, body=body, tag=tag, priority=priority, depth=depth)
    except InvalidSeed:
        return
    assert Seed.from_record(s.to_record()) == s
    assert len(s.fingerprint) == 16


@given(anything)
def test_seed_records_from_anywhere(record: object) -> None:
    with contextlib.suppress(InvalidSeed):
        Seed.from_record(record)


@given(st.binary(max_size=200) | anything.map(lambda v: msgpack.packb(v, use_bin_type=True)))
def test_snapshots_and_seen_sets_from_any_bytes(data: bytes) -> None:
    for restore in (Snapshot.from_bytes, InMemSeen.restore, BloomSeen.restore):
        with contextlib.suppress(InvalidSnapshot):
            restore(data)


@given(st.text(max_size=20) | anything)
def test_intervals_from_anything(value: object) -> None:
    with contextlib.suppress(InvalidInterval):
        assert parse_interval(value) > 0  # type: ignore[arg-type]


BUDGETS = ["max_urls", "max_fanout", "max_random_urls", "max_path_depth", "max_repetitions"]


BUDGET = st.none() | st.integers(-5, 10**6) | st.floats(allow_nan=False)


@given(st.dictionaries(st.sampled_from(BUDGETS), BUDGET))
def test_trap_policies(budgets: dict[str, float | None]) -> None:
    with contextlib.suppress(ValueError):
        TrapPolicy(**budgets).limits()  # type: ignore[arg-type]


@given(st.none() | text | st.integers(), st.none() | text | st.integers())
def test_validators(etag: object, last_modified: object) -> None:
    with contextlib.suppress(TypeError, InvalidValidator):
        Validator(etag, last_modified)  # type: ignore[arg-type]
    kept, dropped = Validator.lenient(etag, last_modified)  # what a response's headers give
    assert len(dropped) == (kept.etag != etag) + (kept.last_modified != last_modified)


STORE_DIR = Path(tempfile.mkdtemp(prefix="crawlstore-hostile-"))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.tuples(text, text | st.binary(max_size=40), text | st.none()), max_size=6))
def test_a_refused_push_leaves_the_store_unchanged(offers: list[tuple[str, str, str]]) -> None:
    with Store.open(STORE_DIR / "hostile.lmdb", durability="nosync") as store:
        f = store.frontier("fifo").dedup_with(store.seen())
        for method, url, tag in offers:
            before = (f.stats(), len(store.seen()), f.snapshot())
            try:
                seed = Seed(method, url, tag=tag)  # type: ignore[arg-type]
            except InvalidSeed:
                assert (f.stats(), len(store.seen()), f.snapshot()) == before
                continue
            stats, seen, snapshot = before
            if f.push(seed):  # admitted: exactly this seed went in, and into the seen set
                assert f.stats().admitted == stats.admitted + 1
                assert len(store.seen()) == seen + 1 and seed.fingerprint in store.seen()
                assert f.snapshot().queued == (*snapshot.queued, seed)
            else:  # a duplicate: only the refusal is counted
                assert f.stats().refused == {
                    **stats.refused,
                    "duplicate": stats.refused.get("duplicate", 0) + 1,
                }
                assert (len(store.seen()), f.snapshot()) == (seen, snapshot)
