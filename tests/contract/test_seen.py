"""Seen sets: exact and Bloom, their guarantees and snapshots."""

from __future__ import annotations

import logging
import os

import pytest

from crawlstore import BloomSeen, Fingerprint, InMemSeen, Store
from crawlstore.errors import InvalidSnapshot
from crawlstore.seen import SeenSet, bloom_size


def fps(n: int, salt: bytes = b"") -> list[Fingerprint]:
    import mmh3

    return [Fingerprint(mmh3.mmh3_x64_128_digest(salt + i.to_bytes(8, "big"))) for i in range(n)]


def test_in_mem_seen_insert_contains_len() -> None:
    seen = InMemSeen()
    a, b = fps(2)
    assert seen.insert(a) is True
    assert seen.insert(a) is False
    assert a in seen and b not in seen and len(seen) == 1
    assert isinstance(seen, SeenSet)


def test_in_mem_seen_snapshot_round_trip() -> None:
    seen = InMemSeen(fps(100))
    restored = InMemSeen.restore(seen.snapshot())
    assert len(restored) == 100 and all(fp in restored for fp in fps(100))


@pytest.mark.parametrize("data", [b"", b"\xc1", b"\x80", InMemSeen().snapshot()[:-1] + b"x"])
def test_in_mem_seen_restore_rejects_garbage(data: bytes) -> None:
    with pytest.raises(InvalidSnapshot):
        InMemSeen.restore(data)


def test_bloom_sizes_are_optimal() -> None:
    assert bloom_size(1_000_000, 0.01) == (9_585_059, 7)
    assert bloom_size(1_000_000, 0.001)[1] == 10
    bloom = BloomSeen(1_000_000, 0.01)
    assert 1.19 <= bloom.nbytes / 1_000_000 <= 1.21  # about 1.2 bytes a URL at 1%
    for bad in [(0, 0.01), (10, 0.0), (10, 1.0)]:
        with pytest.raises(ValueError):
            BloomSeen(*bad)


def test_bloom_has_no_false_negatives_and_meets_its_rate() -> None:
    n, rate = 20_000, 0.01
    bloom = BloomSeen(n, rate)
    inserted = fps(n)
    for fp in inserted:
        bloom.insert(fp)
    assert all(fp in bloom for fp in inserted)
    fresh = fps(100_000, salt=b"fresh")
    measured = sum(fp in bloom for fp in fresh) / len(fresh)
    assert measured <= rate * 1.5, measured


def test_bloom_warns_once_past_capacity(caplog: pytest.LogCaptureFixture) -> None:
    bloom = BloomSeen(1000, 0.01)
    with caplog.at_level(logging.WARNING, logger="crawlstore.seen"):
        for i, fp in enumerate(fps(1100)):
            bloom.insert(fp)
            if i == 999:
                assert not caplog.records
    warnings = [r for r in caplog.records if "past its expected" in r.getMessage()]
    assert len(warnings) == 1


def test_bloom_insert_reports_new() -> None:
    bloom = BloomSeen(100, 0.01)
    a = fps(1)[0]
    assert bloom.insert(a) is True and bloom.insert(a) is False and len(bloom) == 1
    assert b"short" not in bloom


def test_bloom_snapshot_round_trip() -> None:
    bloom = BloomSeen(5000, 0.01)
    for fp in fps(3000):
        bloom.insert(fp)
    restored = BloomSeen.restore(bloom.snapshot())
    assert len(restored) == 3000 and restored.bits == bloom.bits
    assert all(fp in restored for fp in fps(3000))
    probe = fps(2000, salt=b"probe")
    assert [fp in restored for fp in probe] == [fp in bloom for fp in probe]


@pytest.mark.parametrize(
    "data", [b"", os.urandom(64), InMemSeen().snapshot(), BloomSeen(10).snapshot()[:-3]]
)
def test_bloom_restore_rejects_garbage(data: bytes) -> None:
    with pytest.raises(InvalidSnapshot):
        BloomSeen.restore(data)


@pytest.mark.parametrize("bloom", [None, (100_000, 0.01)], ids=["exact", "bloom"])
def test_a_store_s_seen_set_takes_a_large_batch_in_one_write(
    store: Store, bloom: tuple[int, float] | None
) -> None:
    fps = [os.urandom(16) for _ in range(5000)]
    seen = store.seen(bloom=bloom) if bloom else store.seen()
    assert seen.insert_many(fps) >= 4990  # a Bloom filter may take a few for seen
    assert seen.contains_many(fps) == [True] * len(fps)
    assert seen.insert_many(fps[:10]) == 0
    assert len(seen) == seen.insert_many([]) + len(seen) >= 4990
