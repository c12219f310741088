"""``Frontier``: the protocol every storage and facade implements, and the facade chain."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any

from ..clock import Clock
from ..seed import Seed
from .protocol import (
    Admission,
    Pop,
    Ready,
    Reason,
    Report,
    Stats,
    check_limit,
    check_report,
    check_seed,
    check_time,
)
from .snapshot import Snapshot

if TYPE_CHECKING:
    import asyncio
    import threading

    from ..revisit import Adapt, Revisit
    from ..seen import SeenSet
    from .facades import (
        AllowHosts,
        Dedup,
        Filter,
        MaxDepth,
        RetryFacade,
        RetryPolicy,
        Scored,
        TagBackoff,
    )
    from .revisits import Revisits
    from .traps import AvoidTraps, TrapPolicy

__all__ = ["Frontier", "StateMap"]

#: Persisted key/value state a facade keeps in its storage (values must be msgpack-able).
StateMap = MutableMapping[str, Any]


class Frontier(ABC):
    """Push seeds in, pop ready seeds out, report how each ended.

    A *storage* (``InMemFrontier``, a store's frontier) holds state; a *facade* wraps another
    frontier and holds policy. The chain methods (``dedup()``, ``retry(3)`` ...) wrap ``self``
    and return the new outermost frontier: a push flows from the last one called inwards.
    """

    # -- the protocol ---------------------------------------------------------------------------

    @property
    @abstractmethod
    def clock(self) -> Clock:
        """The clock of the storage; every facade in the chain shares it."""

    @abstractmethod
    def push(self, seed: Seed) -> Admission:
        """Offer a seed; the answer says whether it was queued, or why not."""

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        """Offer several seeds in one transaction."""
        with self.transaction():
            return [self.push(seed) for seed in seeds]

    @abstractmethod
    def pop(self) -> Pop:
        """``Ready(seed)`` (now in flight), ``Wait(until)``, or ``Empty``."""

    def pop_many(self, limit: int) -> list[Seed]:
        """Up to ``limit`` ready seeds, now in flight, in one transaction. Fewer (or none) when
        fewer are ready: ``pop()`` then tells when the next one will be."""
        check_limit(limit)
        seeds: list[Seed] = []
        with self.transaction():
            while len(seeds) < limit and isinstance(popped := self.pop(), Ready):
                seeds.append(popped.seed)
        return seeds

    @abstractmethod
    def report(self, report: Report) -> None:
        """Tell the frontier how a popped seed ended (or pause a tag with ``Backoff``)."""

    def report_many(self, reports: Iterable[Report]) -> None:
        """Several reports in one transaction: all of them, or (on an error) none."""
        batch = list(reports)
        for report in batch:
            check_report(report)
        with self.transaction():
            for report in batch:
                self.report(report)

    @abstractmethod
    def refuse(self, seed: Seed, reason: Reason) -> Admission:
        """Count a refusal in the storage's statistics and return it: facades call this."""

    @abstractmethod
    def extend_lease(self, seed: Seed, seconds: float | None = None) -> None:
        """Keep a slow seed in flight ``seconds`` longer (where leases expire); raises
        ``NotInFlight`` for a seed that is not in flight."""

    @abstractmethod
    def schedule(self, seed: Seed, at: float, *, revisit: bool = False) -> None:
        """Queue ``seed`` at time ``at``; one schedule per fingerprint (a new one replaces).

        Retries and parked seeds are work the crawl waits for; a ``revisit`` is waited for only
        under ``revisit()``: without it, ``pop`` says ``Empty`` when only revisits remain."""

    def pause_queue(self, seed: Seed, until: float) -> bool:
        """Pop nothing from the queue ``seed`` belongs to before ``until`` (a host that said
        ``Retry-After``), while other queues go on. True when it paused one; False on a storage
        without per-host (or per-key) queues, where the one queue is the whole crawl."""
        check_seed(seed)
        check_time("until", until)
        return False

    @abstractmethod
    def next_revisit(self) -> float | None:
        """When the earliest scheduled revisit is due; None when there is none."""

    @abstractmethod
    def state(self, namespace: str) -> StateMap:
        """A facade's persisted key/value state, kept by the storage."""

    @abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """Group operations into one atomic step; nested use joins the outer one."""

    @abstractmethod
    def stats(self) -> Stats:
        """Counters and gauges."""

    @abstractmethod
    def snapshot(self) -> Snapshot:
        """Every seed held: queued, in flight, and scheduled (retries, pauses, revisits)."""

    @abstractmethod
    def __len__(self) -> int:
        """Seeds held: queued, in flight and scheduled."""

    # -- waiting --------------------------------------------------------------------------------

    def next_seed(
        self,
        *,
        timeout: float | None = None,
        stop: threading.Event | None = None,
        sleep: Callable[[float], Any] | None = None,
        poll: float = 1.0,
    ) -> Seed | None:
        """Block until a seed is ready; ``None`` when the crawl is over, timed out or stopped."""
        from .waiting import next_seed

        return next_seed(self, timeout=timeout, stop=stop, sleep=sleep, poll=poll)

    async def anext_seed(
        self,
        *,
        timeout: float | None = None,
        stop: asyncio.Event | None = None,
        sleep: Callable[[float], Any] | None = None,
        poll: float = 1.0,
    ) -> Seed | None:
        """The asyncio twin of ``next_seed``."""
        from .waiting import anext_seed

        return await anext_seed(self, timeout=timeout, stop=stop, sleep=sleep, poll=poll)

    # -- the facade chain -----------------------------------------------------------------------

    def dedup(self) -> Dedup:
        """Refuse seeds whose fingerprint was admitted before (an in-memory exact set)."""
        from ..seen import InMemSeen
        from .facades import Dedup

        return Dedup(self, InMemSeen())

    def dedup_with(self, seen: SeenSet) -> Dedup:
        """Dedup against ``seen``: any seen set, e.g. ``BloomSeen`` or a store's."""
        from .facades import Dedup

        return Dedup(self, seen)

    def filter(self, predicate: Callable[[Seed], bool]) -> Filter:
        """Refuse seeds for which ``predicate`` is false (reason ``FILTERED``)."""
        from .facades import Filter

        return Filter(self, predicate)

    def allow_hosts(self, hosts: Iterable[str]) -> AllowHosts:
        """Refuse seeds outside these hosts and their subdomains (reason ``OUT_OF_SCOPE``)."""
        from .facades import AllowHosts

        return AllowHosts(self, hosts)

    def max_depth(self, depth: int) -> MaxDepth:
        """Refuse seeds deeper than ``depth`` (reason ``TOO_DEEP``)."""
        from .facades import MaxDepth

        return MaxDepth(self, depth)

    def retry(self, max_retries: int) -> RetryFacade:
        """Retry failed seeds up to ``max_retries`` times with exponential backoff."""
        from .facades import RetryPolicy

        return self.retry_with(RetryPolicy(max_retries))

    def retry_with(self, policy: RetryPolicy) -> RetryFacade:
        from .facades import RetryFacade

        return RetryFacade(self, policy)

    def revisit(self, intervals: Revisit, *, adapt: Adapt | None = None) -> Revisits:
        """Crawl pages again: a seed reported ``Done`` or ``Failed`` whose tag has an interval
        is scheduled that interval later, on its first attempt. Goes directly on a storage.
        ``adapt`` stretches the interval of pages that do not change, shortens it for those
        that do."""
        from .revisits import Revisits

        return Revisits(self, intervals, adapt)

    def avoid_traps(self) -> AvoidTraps:
        """Bound crawler traps per URL prefix with the default ``TrapPolicy``."""
        return self.avoid_traps_with(None)

    def avoid_traps_with(self, policy: TrapPolicy | None) -> AvoidTraps:
        """Bound crawler traps per URL prefix: calendars, session ids, repeating segments."""
        from .traps import AvoidTraps

        return AvoidTraps(self, policy)

    def tag_backoff(self) -> TagBackoff:
        """Honour ``Backoff(tag, until)``: that tag's seeds wait, in order, while others go on."""
        from .facades import TagBackoff

        return TagBackoff(self)

    def score(self, scorer: Callable[[Seed], int]) -> Scored:
        """Best-first: add ``scorer(seed)`` to each pushed seed's priority (saturating)."""
        from .facades import Scored

        return Scored(self, scorer)
