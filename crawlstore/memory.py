"""``InMemFrontier``: the frontier core over a memory storage of its own."""

from __future__ import annotations

from typing import Any

from .clock import Clock, system_clock
from .frontier.core import CoreFrontier
from .frontier.snapshot import Snapshot
from .storages import MemoryStorage

__all__ = ["InMemFrontier"]


class InMemFrontier(CoreFrontier):
    """The frontier core over a memory storage of its own: ``priority()`` (the default: highest
    priority first, ties in push order, so a crawl that sets no priorities is breadth first),
    ``fifo()``, ``lifo()`` (depth first). Queues, politeness, leases and their expiry work as
    on a store; nothing survives the process. Thread-safe."""

    def __init__(
        self,
        order: str = "priority",
        *,
        clock: Clock = system_clock,
        queues: str = "single",
        delay: float = 0.0,
        max_in_flight: Any = "auto",
        lease_time: float = 600.0,
        reap_interval: float = 10.0,
    ) -> None:
        super().__init__(
            MemoryStorage(),
            crawl="default",
            clock=clock,
            order=order,
            queues=queues,
            delay=delay,
            max_in_flight=max_in_flight,
            lease_time=lease_time,
            reap_interval=reap_interval,
        )

    @classmethod
    def fifo(cls, *, clock: Clock = system_clock) -> InMemFrontier:
        """Breadth first: seeds in push order."""
        return cls("fifo", clock=clock)

    @classmethod
    def lifo(cls, *, clock: Clock = system_clock) -> InMemFrontier:
        """Depth first: the last seed pushed pops first."""
        return cls("lifo", clock=clock)

    @classmethod
    def priority(cls, *, clock: Clock = system_clock) -> InMemFrontier:
        """Highest priority first, ties in push order (the default)."""
        return cls("priority", clock=clock)

    @classmethod
    def restore(cls, snapshot: Snapshot, *, clock: Clock = system_clock) -> InMemFrontier:
        """A frontier holding a snapshot's seeds as they are: no facade can refuse them."""
        frontier = cls(snapshot.order, clock=clock)
        entries = [*snapshot.in_flight, *snapshot.queued]
        if snapshot.order == "lifo":
            entries.reverse()
        frontier.push_many(entries)
        for at, seed in snapshot.scheduled:
            frontier.schedule(seed, at, kind="retry")
        for at, seed in snapshot.revisits:
            frontier.schedule(seed, at, kind="revisit")
        return frontier

    def __repr__(self) -> str:
        return f"InMemFrontier({self.order!r})"
