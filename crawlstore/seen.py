"""Seen sets: which fingerprints a crawl has admitted. Exact (``InMemSeen``) or Bloom."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import msgpack
from bitarray import bitarray

from . import journal
from .errors import InvalidSnapshot
from .url import Fingerprint

__all__ = ["BloomSeen", "InMemSeen", "SeenSet"]

log = logging.getLogger("crawlstore.seen")

_FP = 16


@runtime_checkable
class SeenSet(Protocol):
    """What ``dedup_with`` needs: membership and insertion of fingerprints."""

    def insert(self, fp: Fingerprint) -> bool:
        """Record ``fp``; True when it was not seen before."""
        ...

    def __contains__(self, fp: object) -> bool: ...

    def __len__(self) -> int: ...


def contains_many(seen: SeenSet, fps: Sequence[bytes]) -> list[bool]:
    """Whether each fingerprint is in ``seen``: in one read when the set can (the store's do,
    with ``contains_many``), else one by one."""
    many = getattr(seen, "contains_many", None)
    return list(many(fps)) if many is not None else [fp in seen for fp in fps]


def insert_many(seen: SeenSet, fps: Sequence[bytes]) -> int:
    """Insert each fingerprint into ``seen`` (in one write when the set can); how many were
    new."""
    many = getattr(seen, "insert_many", None)
    return int(many(fps)) if many is not None else sum(seen.insert(Fingerprint(fp)) for fp in fps)


def _pack_fingerprints(kind: str, fps: Iterable[bytes]) -> bytes:
    return msgpack.packb({"kind": kind, "v": 1, "fps": b"".join(fps)})  # type: ignore[no-any-return]


def _unpack(kind: str, data: bytes) -> dict[str, object]:
    try:
        doc = msgpack.unpackb(data)
    except (ValueError, TypeError, msgpack.ExtraData) as exc:
        raise InvalidSnapshot(f"{kind} snapshot does not decode: {exc!r}") from None
    if not isinstance(doc, dict) or doc.get("kind") != kind or doc.get("v") != 1:
        raise InvalidSnapshot(f"not a version 1 {kind} snapshot")
    return doc


class InMemSeen:
    """An exact seen set in memory (about 80 bytes a fingerprint in CPython). Inserts inside a
    transaction are kept aside until it commits (other threads may share the set: they never
    see them before), and dropped when it rolls back."""

    def __init__(self, fingerprints: Iterable[bytes] = ()) -> None:
        self._set = {Fingerprint(fp) for fp in fingerprints}
        self._lock = threading.Lock()
        self._aside: journal.Aside[set[Fingerprint]] = journal.Aside(set, self._commit)

    def _commit(self, fps: set[Fingerprint]) -> None:
        with self._lock:
            self._set |= fps

    def insert(self, fp: Fingerprint) -> bool:
        """Record ``fp``; True when it was not seen before."""
        txn = journal.current()
        with self._lock:
            if fp in self._set:
                return False
            if txn is None:
                self._set.add(fp)
                return True
            pending = self._aside.for_write(txn)
            if fp in pending:
                return False
            pending.add(fp)
            return True

    def __contains__(self, fp: object) -> bool:
        if fp in self._set:
            return True
        pending = self._aside.of(journal.current())
        return pending is not None and fp in pending

    def __len__(self) -> int:
        pending = self._aside.of(journal.current())
        return len(self._set) + (len(pending) if pending is not None else 0)

    def snapshot(self) -> bytes:
        """msgpack bytes; ``InMemSeen.restore`` reads them back."""
        with self._lock:
            return _pack_fingerprints("InMemSeen", sorted(self._set))

    @classmethod
    def restore(cls, data: bytes) -> InMemSeen:
        """The set ``snapshot()`` wrote; other bytes raise ``InvalidSnapshot``."""
        raw = _unpack("InMemSeen", data)["fps"]
        if not isinstance(raw, bytes) or len(raw) % _FP:
            raise InvalidSnapshot("InMemSeen snapshot: fingerprints are not 16-byte records")
        return cls(raw[i : i + _FP] for i in range(0, len(raw), _FP))


def bloom_size(expected: int, fp_rate: float) -> tuple[int, int]:
    """Optimal (bits, hashes) for ``expected`` items at false-positive rate ``fp_rate``."""
    if expected < 1:
        raise ValueError(f"expected must be >= 1: {expected}")
    if not 0.0 < fp_rate < 1.0:
        raise ValueError(f"fp_rate must be between 0 and 1: {fp_rate}")
    bits = max(8, math.ceil(-expected * math.log(fp_rate) / math.log(2) ** 2))
    hashes = max(1, round(bits / expected * math.log(2)))
    return bits, hashes


def bloom_positions(fp: bytes, bits: int, hashes: int) -> list[int]:
    """Kirsch-Mitzenmacher double hashing over the fingerprint's two 64-bit halves."""
    h1 = int.from_bytes(fp[:8], "big")
    h2 = int.from_bytes(fp[8:16], "big") | 1
    return [(h1 + i * h2) % bits for i in range(hashes)]


class BloomSeen:
    """A Bloom filter of fingerprints: about 1.2 bytes a URL at 1%, never a false negative.

    Past ``expected`` insertions the false-positive rate climbs; it logs a warning once. Inserts
    inside a transaction are kept aside until it commits, and dropped when it rolls back.
    """

    def __init__(self, expected: int, fp_rate: float = 0.01) -> None:
        self.expected = expected
        self.fp_rate = fp_rate
        self.bits, self.hashes = bloom_size(expected, fp_rate)
        self._array = bitarray(self.bits, endian="big")
        self._array.setall(0)
        self._inserted = 0
        self._warned = False
        self._lock = threading.Lock()
        #: a transaction's inserts: [how many, the bit positions they set]
        self._aside: journal.Aside[list[Any]] = journal.Aside(lambda: [0, set()], self._commit)

    def insert(self, fp: Fingerprint) -> bool:
        """Record ``fp``; True when it was not seen before (a false positive says False)."""
        positions = bloom_positions(fp, self.bits, self.hashes)
        txn = journal.current()
        with self._lock:
            array = self._array
            if txn is None:
                new = False
                for p in positions:
                    if not array[p]:
                        array[p] = 1
                        new = True
                if new:
                    self._count(1)
                return new
            pending = self._aside.for_write(txn)
            bits = pending[1]
            if all(array[p] or p in bits for p in positions):
                return False
            bits.update(positions)
            pending[0] += 1
            return True

    def _commit(self, pending: list[Any]) -> None:
        with self._lock:
            for p in pending[1]:
                self._array[p] = 1
            self._count(pending[0])

    def _count(self, inserted: int) -> None:
        self._inserted += inserted
        if self._inserted > self.expected and not self._warned:
            self._warned = True
            log.warning(
                "BloomSeen holds %d fingerprints, past its expected %d: "
                "false positives will exceed %.3g",
                self._inserted,
                self.expected,
                self.fp_rate,
            )

    def __contains__(self, fp: object) -> bool:
        if not isinstance(fp, bytes) or len(fp) != _FP:
            return False
        array = self._array
        positions = bloom_positions(fp, self.bits, self.hashes)
        pending = self._aside.of(journal.current())
        if pending is None:
            return all(array[p] for p in positions)
        return all(array[p] or p in pending[1] for p in positions)

    def __len__(self) -> int:
        """Fingerprints inserted (as the filter could tell them apart)."""
        pending = self._aside.of(journal.current())
        return self._inserted + (pending[0] if pending is not None else 0)

    @property
    def nbytes(self) -> int:
        return (len(self._array) + 7) // 8

    def snapshot(self) -> bytes:
        """msgpack bytes; ``BloomSeen.restore`` reads them back."""
        with self._lock:
            return msgpack.packb(  # type: ignore[no-any-return]
                {
                    "kind": "BloomSeen",
                    "v": 1,
                    "expected": self.expected,
                    "fp_rate": self.fp_rate,
                    "inserted": self._inserted,
                    "bits": self._array.tobytes(),
                }
            )

    @classmethod
    def restore(cls, data: bytes) -> BloomSeen:
        """The filter ``snapshot()`` wrote; other bytes raise ``InvalidSnapshot``."""
        doc = _unpack("BloomSeen", data)
        expected, fp_rate, inserted, raw = (doc.get(k) for k in ("expected", "fp_rate",
                                                                 "inserted", "bits"))  # fmt: skip
        if not isinstance(expected, int) or not isinstance(fp_rate, float):
            raise InvalidSnapshot("BloomSeen snapshot: expected and fp_rate must be numbers")
        if not isinstance(inserted, int) or inserted < 0 or not isinstance(raw, bytes):
            raise InvalidSnapshot("BloomSeen snapshot: bad count or bit array")
        try:
            bits, _ = bloom_size(expected, fp_rate)
        except (ValueError, OverflowError) as exc:
            raise InvalidSnapshot(f"BloomSeen snapshot has bad parameters: {exc}") from None
        if len(raw) != (bits + 7) // 8:  # checked before anything is allocated
            raise InvalidSnapshot("BloomSeen snapshot: bit array does not match its size")
        bloom = cls(expected, fp_rate)
        array = bitarray(endian="big")
        array.frombytes(raw)
        bloom._array = array[: bloom.bits]
        bloom._inserted = inserted
        bloom._warned = inserted > expected
        return bloom
