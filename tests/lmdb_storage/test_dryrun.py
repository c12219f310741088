"""The dry run's ``Overlay`` over an LMDB read transaction reads as a write transaction with the
same writes would: checked against a dict, and the base is never written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawlstore.storages._lmdb.dryrun import Overlay

KEYS = st.binary(min_size=1, max_size=2).map(lambda b: b"k" + b)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[lmdb.Environment]:
    environment = lmdb.open(str(tmp_path / "db"), max_dbs=2, map_size=2**24)
    yield environment
    environment.close()


def _items(cursor: object, start: bytes) -> list[tuple[bytes, bytes]]:
    if not cursor.set_range(start):  # type: ignore[attr-defined]
        return []
    return [(bytes(k), bytes(v)) for k, v in cursor]  # type: ignore[attr-defined]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    base=st.dictionaries(KEYS, st.binary(max_size=3), max_size=20),
    ops=st.lists(
        st.tuples(st.sampled_from(["put", "delete", "take"]), KEYS, st.binary(max_size=3)),
        max_size=40,
    ),
)
def test_overlay_reads_as_the_writes_would(
    env: lmdb.Environment, base: dict[bytes, bytes], ops: list[tuple[str, bytes, bytes]]
) -> None:
    db = env.open_db(b"t")
    with env.begin(write=True) as txn:
        txn.drop(db, delete=False)
        for k, v in base.items():
            txn.put(k, v, db=db)
    model = dict(base)
    with env.begin() as read:
        overlay = Overlay(read)
        for op, key, value in ops:
            if op == "put":
                assert overlay.put(key, value, db=db)
                model[key] = value
            elif op == "delete":
                assert overlay.delete(key, db=db) == (key in model)
                model.pop(key, None)
            else:  # take from the head at ``key``, as a queue's dequeue does
                cursor = overlay.cursor(db=db)
                if cursor.set_range(key):
                    head = cursor.key()
                    assert cursor.delete()
                    del model[head]
                    after = min((k for k in model if k > head), default=None)
                    assert (cursor.key() or None) == after
            for k in {key, *base}:
                assert overlay.get(k, db=db) == model.get(k)
            expected = sorted((k, v) for k, v in model.items() if k >= key)
            assert _items(overlay.cursor(db=db), key) == expected
        assert [k for k in overlay.cursor(db=db).iternext(values=False)] == sorted(model)
        assert _items(read.cursor(db=db), b"") == sorted(base.items())  # the base: untouched


def test_overlay_offers_only_what_it_can(env: lmdb.Environment) -> None:
    db = env.open_db(b"t")
    with env.begin() as read:
        overlay = Overlay(read)
        with pytest.raises(NotImplementedError):
            overlay.put(b"a", b"b", db=db, dupdata=False)
        with pytest.raises(NotImplementedError):
            overlay.delete(b"a", b"one duplicate", db=db)
        assert overlay.cursor(db=db).key() == b"" and not overlay.cursor(db=db).delete()
