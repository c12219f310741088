"""``Frontier``: the protocol every storage and facade implements, and the facade chain."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ..clock import Clock
from ..seed import Seed
from . import listing
from .protocol import (
    UNSET,
    Admission,
    Lease,
    Pop,
    QueueInfo,
    Ready,
    Report,
    Stats,
    Upcoming,
    URLStatus,
    check_report,
    check_seeds,
)
from .snapshot import Snapshot

#: The facade classes the chain methods build, by class name: each facade module registers its
#: own when it is imported (``crawlstore.frontier`` imports them all), so that this module, which
#: they subclass, imports none of them.
FACADES: dict[str, type[Any]] = {}


def register_facades(*classes: type[Any]) -> None:
    FACADES.update((cls.__name__, cls) for cls in classes)


if TYPE_CHECKING:
    import asyncio
    import threading

    from ..revisit import Adapt, Revisit
    from ..seen import SeenSet
    from ..validators import Validators
    from .core import CoreFrontier
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
    from .policy import CrawlPolicy
    from .protocol import Reason
    from .revisits import Revisits
    from .traps import AvoidTraps, TrapPolicy
    from .worker import AsyncWorker, Worker

__all__ = ["Frontier", "FrontierCore", "StateMap"]

_T = TypeVar("_T")


#: Persisted key/value state a facade keeps in its storage (values must be msgpack-able).
StateMap = MutableMapping[str, Any]


class Frontier(ABC):
    """Push seeds in, pop ready seeds out, report how each ended.

    The frontier *core* (``InMemFrontier``, a store's frontier) holds the crawl's policy over a
    storage; a *facade* wraps another frontier and adds policy of its own. The chain methods
    (``dedup()``, ``retry(3)`` ...) wrap ``self`` and return the new outermost frontier: a push
    flows from the last one called inwards. Everything a facade does not change (statistics,
    leases, queues, URLs, transactions) is the core's.
    """

    @property
    @abstractmethod
    def core(self) -> CoreFrontier:
        """The frontier core at the bottom of the chain (what a facade calls of it is
        ``FrontierCore``'s)."""

    @property
    def clock(self) -> Clock:
        """The clock of the core; every facade in the chain shares it."""
        return self.core.clock

    # -- the protocol ---------------------------------------------------------------------------

    @abstractmethod
    def push(self, seed: Seed) -> Admission:
        """Offer a seed; the answer says whether it was queued, or why not."""

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        """Offer several seeds in one transaction."""
        batch = check_seeds(seeds)

        def push() -> list[Admission]:
            return [self.push(seed) for seed in batch]

        return self.atomic(push)

    @abstractmethod
    def pop(self) -> Pop:
        """``Ready(seed, lease)`` (now in flight), ``Wait(until)``, or ``Empty``."""

    @abstractmethod
    def pop_many(
        self,
        limit: int,
        *,
        per_queue: int | None = None,
        queues: int | None = None,
        queue: str | None = None,
        lease_time: float | None = None,
    ) -> list[Ready]:
        """Up to ``limit`` ready seeds, now in flight, in one transaction, in the core's fair
        order (round robin over the queues that are ready): at most ``per_queue`` from a queue,
        from at most ``queues`` queues, or only from the queue ``queue``; leased for
        ``lease_time`` seconds (the crawl's by default). A queue with a delay hands out one
        seed, or ``per_queue`` when given (a service's batch per delay window). Fewer (or none)
        when fewer are ready: ``pop()`` then tells when the next one will be."""

    def _through(self, ready: Ready) -> list[Ready]:
        """What this frontier makes of a seed the core handed out (a facade may take it
        back, as ``pop`` would): the seeds to hand on."""
        return [ready]

    @abstractmethod
    def report(self, report: Report) -> None:
        """Tell the frontier how a popped seed ended (or pause a tag with ``Backoff``)."""

    def report_many(self, reports: Iterable[Report]) -> None:
        """Several reports in one transaction: all of them, or (on an error) none."""
        batch = list(reports)
        for report in batch:
            check_report(report)

        def write() -> None:
            for report in batch:
                self.report(report)

        self.atomic(write)

    def extend_lease(self, seed: Seed, seconds: float | None = None) -> Lease:
        """Keep a slow seed in flight ``seconds`` (the crawl's lease time by default) from now;
        the lease, with its new expiry. ``NotInFlight`` unless the seed's lease is held."""
        return self.core.extend_lease(seed, seconds)

    def pause_queue(self, seed: Seed, until: float) -> bool:
        """Pop nothing from the queue ``seed`` belongs to before ``until`` (a host that said
        ``Retry-After``), while other queues go on. True when it paused one; False when the
        crawl's seeds are in one queue, which is the whole crawl."""
        return self.core.pause_queue(seed, until)

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """Group operations into one atomic step; nested use joins the outer one."""
        return self.core.transaction()

    def atomic(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation()`` as one atomic step, as ``transaction()`` does, and return what
        it returns. Where the storage commits optimistically (Redis in partitions), a step
        that conflicts with another client's commit wrote nothing, and ``operation`` runs
        again until one commits: it must have no effect outside the store, or tolerate running
        twice. Inside an open transaction it joins it, which then commits or conflicts as a
        whole."""
        return self.core.atomic(operation)

    def stats(self) -> Stats:
        """Counters and gauges."""
        return self.core.stats()

    def peek(self, n: int = 10, *, queue: str | None = None) -> list[Upcoming]:
        """The next ``n`` seeds pop will hand out, without handing any out (the core's order:
        a facade that takes a seed back at pop, ``tag_backoff``, is not applied): the ready
        ones first, in pop's order, then the later ones, each with its time and why."""
        return self.core.peek(n, queue=queue)

    def snapshot(self) -> Snapshot:
        """Every seed held: queued, in flight, and scheduled (retries, pauses, revisits)."""
        return self.core.snapshot()

    def __len__(self) -> int:
        """Seeds held: queued, in flight and scheduled (revisits included)."""
        return len(self.core)

    # -- queues and URLs (the core's) ---------------------------------------------------------

    def queue_for(self, seed: Seed) -> str:
        """The key of the queue ``seed`` goes to (its host, with per-host queues)."""
        return self.core.queue_for(seed)

    def queue(self, key: str) -> QueueInfo | None:
        """The queue named ``key``, or None."""
        return listing.queue(self.core, key)

    def queues(self, *, after: str | None = None, limit: int = 100) -> list[QueueInfo]:
        """The crawl's queues in key order, ``limit`` at a time, from after ``after``."""
        return listing.queues(self.core, after=after, limit=limit)

    def set_queue(
        self,
        key: str,
        *,
        delay: float | None = UNSET,
        max_in_flight: int | None = UNSET,
        blocked_until: float = UNSET,
        limit: int | None = UNSET,
    ) -> QueueInfo:
        """Set a queue's own ``delay``, ``max_in_flight``, ``blocked_until`` or ``limit``
        (None: the crawl's again; leave one out to keep it), kept for a queue that has no seed
        yet."""
        return listing.set_queue(self.core, key, delay=delay, max_in_flight=max_in_flight,
                                   blocked_until=blocked_until, limit=limit)  # fmt: skip

    def block_queue(self, key: str, until: float) -> QueueInfo:
        """Pop nothing from the queue ``key`` before ``until`` (0: unblock)."""
        return listing.set_queue(self.core, key, blocked_until=until)

    def delete_queue(self, key: str) -> int:
        """Remove a queue with its seeds, leases, schedule and URLs; how many URLs it held."""
        return listing.delete_queue(self.core, key)

    def url(self, url: str | bytes) -> URLStatus:
        """Where a URL (or a fingerprint) stands in the crawl."""
        return listing.url(self.core, url)

    def urls(
        self,
        *,
        queue: str | None = None,
        state: str | None = None,
        contains: str | None = None,
        outcome: str | None = None,
        http_status: int | None = None,
        reason: str | None = None,
        after: bytes | None = None,
        limit: int = 100,
    ) -> list[URLStatus]:
        """The crawl's URLs, ``limit`` at a time, in fingerprint order from after the
        fingerprint ``after``: of one ``queue``, in one ``state``, whose URL ``contains`` a
        string, whose last visit ended as ``outcome`` ("done", "failed", "skipped"), with the
        status code ``http_status`` or the ``reason`` (exactly); each filter left out (None)
        keeps every URL."""
        return listing.urls(self.core, queue=queue, state=state, contains=contains,
                            outcome=outcome, http_status=http_status, reason=reason,
                            after=after, limit=limit)  # fmt: skip

    def count(
        self,
        *,
        queue: str | None = None,
        state: str | None = None,
        contains: str | None = None,
        outcome: str | None = None,
        http_status: int | None = None,
        reason: str | None = None,
    ) -> int:
        """How many URLs the crawl (or one ``queue``) knows, with the filters of ``urls``;
        read from counters, without a scan, unless a filter other than ``state`` is given."""
        return listing.count(self.core, queue=queue, state=state, contains=contains,
                             outcome=outcome, http_status=http_status,
                             reason=reason)  # fmt: skip

    def purge(self, *, before: float, queue: str | None = None) -> int:
        """Forget the URLs of the crawl (or of one queue) first admitted before ``before``,
        finished or not, a thousand a transaction; how many."""
        return listing.purge(self.core, before=before, queue=queue)

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

    # -- group commit ---------------------------------------------------------------------------

    def worker(
        self,
        *,
        prefetch: int = 64,
        group: int = 256,
        lease_time: float | None = None,
        poll: float = 1.0,
        linger: float = 0.002,
        validators: Validators | None = None,
        idle: float | None = None,
        notify: Callable[[], None] | None = None,
    ) -> Worker:
        """Group commit for threads: a ``Worker`` that leases seeds ahead (``prefetch`` at
        most held) and commits the units of many pages in flight together (each page's report,
        links and validator one unit; ``validators``: where ``finish(validator=)`` writes;
        ``idle``: end when the next seed is due later than that, nothing in flight;
        ``notify``: called on the writer thread when seeds leased ahead wait for a caller)."""
        from .worker import Worker

        return Worker(self, prefetch=prefetch, group=group, lease_time=lease_time, poll=poll,
                      linger=linger, validators=validators, idle=idle,
                      notify=notify)  # fmt: skip

    def async_worker(
        self,
        *,
        prefetch: int = 64,
        group: int = 256,
        lease_time: float | None = None,
        poll: float = 1.0,
        linger: float = 0.002,
        validators: Validators | None = None,
        idle: float | None = None,
    ) -> AsyncWorker:
        """``worker()`` for asyncio: every write on the worker's thread, awaited by the loop."""
        from .worker import AsyncWorker

        return AsyncWorker(self, prefetch=prefetch, group=group, lease_time=lease_time,
                           poll=poll, linger=linger, validators=validators,
                           idle=idle)  # fmt: skip

    # -- the facade chain -----------------------------------------------------------------------

    def dedup(self) -> Dedup:
        """Refuse seeds whose fingerprint was admitted before (an in-memory exact set)."""
        from ..seen import InMemSeen

        return cast("Dedup", FACADES["Dedup"](self, InMemSeen()))

    def dedup_with(self, seen: SeenSet) -> Dedup:
        """Dedup against ``seen``: any seen set, e.g. ``BloomSeen`` or a store's."""
        return cast("Dedup", FACADES["Dedup"](self, seen))

    def filter(self, predicate: Callable[[Seed], bool]) -> Filter:
        """Refuse seeds for which ``predicate`` is false (reason ``FILTERED``)."""
        return cast("Filter", FACADES["Filter"](self, predicate))

    def allow_hosts(self, hosts: Iterable[str]) -> AllowHosts:
        """Refuse seeds outside these hosts and their subdomains (reason ``OUT_OF_SCOPE``)."""
        return cast("AllowHosts", FACADES["AllowHosts"](self, hosts))

    def max_depth(self, depth: int) -> MaxDepth:
        """Refuse seeds deeper than ``depth`` (reason ``TOO_DEEP``)."""
        return cast("MaxDepth", FACADES["MaxDepth"](self, depth))

    def retry(self, max_retries: int) -> RetryFacade:
        """Retry failed seeds up to ``max_retries`` times with exponential backoff."""
        return self.retry_with(FACADES["RetryPolicy"](max_retries))

    def retry_with(self, policy: RetryPolicy) -> RetryFacade:
        """``Retry`` reports scheduled again by ``policy`` (its retries, delays and jitter)."""
        return cast("RetryFacade", FACADES["RetryFacade"](self, policy))

    def revisit(self, intervals: Revisit, *, adapt: Adapt | None = None) -> Revisits:
        """Crawl pages again: a seed reported ``Done`` or ``Failed`` whose tag has an interval
        is scheduled that interval later, on its first attempt. Goes first in the chain.
        ``adapt`` stretches the interval of pages that do not change, shortens it for those
        that do."""
        return cast("Revisits", FACADES["Revisits"](self, intervals, adapt))

    def avoid_traps(self) -> AvoidTraps:
        """Bound crawler traps per URL prefix with the default ``TrapPolicy``."""
        return self.avoid_traps_with(None)

    def avoid_traps_with(self, policy: TrapPolicy | None) -> AvoidTraps:
        """Bound crawler traps per URL prefix: calendars, session ids, repeating segments."""
        return cast("AvoidTraps", FACADES["AvoidTraps"](self, policy))

    def tag_backoff(self) -> TagBackoff:
        """Honour ``Backoff(tag, until)``: that tag's seeds wait, in order, while others go on."""
        return cast("TagBackoff", FACADES["TagBackoff"](self))

    def score(self, scorer: Callable[[Seed], int]) -> Scored:
        """Best-first: add ``scorer(seed)`` to each pushed seed's priority (saturating)."""
        return cast("Scored", FACADES["Scored"](self, scorer))


class FrontierCore(Frontier):
    """What a facade may ask of the core at the bottom of its chain (``frontier.core``), the
    way Scrapy publishes ``BaseScheduler``: a frontier, its crawl's name, clock and policy, and
    the few operations a facade's own policy needs. Nothing else of the core is a facade's to
    call; the core (``crawlstore.frontier.core.CoreFrontier``) implements it."""

    name: str

    @property
    @abstractmethod
    def policy(self) -> CrawlPolicy:
        """The crawl's policy (a new crawl's, as it will be created)."""

    @abstractmethod
    def state(self, namespace: str) -> StateMap:
        """The facade's key/value state of ``namespace``, kept by the storage with the crawl
        (values msgpack-able): its writes join the unit of the operation under way."""

    @abstractmethod
    def refuse(self, seed: Seed, reason: Reason) -> Admission:
        """Count a seed the facade refused, for ``reason``; the admission to return."""

    @abstractmethod
    def refuse_many(self, reasons: list[Reason]) -> list[Admission]:
        """Count several refusals in one write."""

    @abstractmethod
    def schedule(self, seed: Seed, at: float, *, kind: str = "retry") -> None:
        """Schedule ``seed`` at ``at`` (a ``"retry"``, a ``"pause"`` or a ``"revisit"``): one
        schedule per URL, a new one replacing the last."""

    @abstractmethod
    def next_revisit(self) -> float | None:
        """While revisits are scheduled, the earliest time something of the crawl may happen."""
