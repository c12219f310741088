"""``Snapshot``: every seed a frontier holds, with due times, as msgpack bytes and back."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgpack

from ..errors import CrawlstoreError, InvalidSnapshot
from ..seed import Seed

__all__ = ["ORDERS", "Snapshot"]

ORDERS = ("fifo", "lifo", "priority")
_VERSION = 1


@dataclass(frozen=True)
class Snapshot:
    """Queued seeds in pop order, seeds in flight, and scheduled seeds with their due times.

    Iterating yields every seed held. Restoring (``InMemFrontier.restore``) queues the seeds in
    flight first, then the queued ones in the same order, and keeps the schedule with its times.
    """

    order: str
    queued: tuple[Seed, ...] = ()
    in_flight: tuple[Seed, ...] = ()
    scheduled: tuple[tuple[float, Seed], ...] = ()
    revisits: tuple[tuple[float, Seed], ...] = ()

    def __iter__(self) -> Iterator[Seed]:
        yield from self.in_flight
        yield from self.queued
        for _, seed in (*self.scheduled, *self.revisits):
            yield seed

    def __len__(self) -> int:
        return len(self.queued) + len(self.in_flight) + len(self.scheduled) + len(self.revisits)

    def to_bytes(self) -> bytes:
        """Versioned msgpack bytes; ``Snapshot.from_bytes`` reads them back."""
        return msgpack.packb(  # type: ignore[no-any-return]
            {
                "v": _VERSION,
                "order": self.order,
                "queued": [s.to_record() for s in self.queued],
                "in_flight": [s.to_record() for s in self.in_flight],
                "scheduled": [[at, s.to_record()] for at, s in self.scheduled],
                "revisits": [[at, s.to_record()] for at, s in self.revisits],
            }
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> Snapshot:
        """Decode ``to_bytes`` output; anything else raises ``InvalidSnapshot``."""
        try:
            doc: Any = msgpack.unpackb(data)
            if not isinstance(doc, dict) or doc.get("v") != _VERSION:
                raise InvalidSnapshot(f"not a version {_VERSION} frontier snapshot")
            order = doc["order"]
            if order not in ORDERS:
                raise InvalidSnapshot(f"unknown order in snapshot: {order!r}")
            return cls(
                order,
                tuple(Seed.from_record(r) for r in doc["queued"]),
                tuple(Seed.from_record(r) for r in doc["in_flight"]),
                _timed(doc["scheduled"]),
                _timed(doc.get("revisits", [])),
            )
        except CrawlstoreError as exc:
            if isinstance(exc, InvalidSnapshot):
                raise
            raise InvalidSnapshot(f"snapshot holds an invalid seed: {exc}") from None
        except (ValueError, TypeError, KeyError, msgpack.ExtraData) as exc:
            raise InvalidSnapshot(f"snapshot bytes do not decode: {exc!r}") from None


def _timed(entries: Any) -> tuple[tuple[float, Seed], ...]:
    timed = []
    for at, record in entries:
        if not isinstance(at, (int, float)) or isinstance(at, bool):
            raise InvalidSnapshot(f"a due time must be a number: {at!r}")
        timed.append((float(at), Seed.from_record(record)))
    return tuple(timed)
