"""``CoreFrontier``: the one place where the frontier's policy lives, over any storage.

It decides everything: which queue is ready (round robin over the crawl's index of queues by
their next event; a queue's delay, in-flight cap, block and limit), leases (taken, extended,
expired, ended by token), the schedule (retries, pauses, revisits, released when due), what a
report does, and every counter. A storage (``spi.Storage``) only keeps what it is told, inside
one of its write units; the clock is injected.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from dataclasses import replace
from itertools import repeat
from typing import Any, Protocol, TypeVar, cast

from ..clock import Clock
from ..errors import CorruptRecord, InvalidArgument, NotInFlight, PolicyConflict
from ..seed import Lease, Seed
from . import indexes, listing, partitioned, spi
from .base import FrontierCore
from .crawlstate import CrawlState
from .holders import REMOTE, process_alive, this_process
from .places import finished_count, queue_place
from .policy import (
    DEFAULTS,
    CrawlPolicy,
    Defaults,
    Effective,
    check_cap,
    check_delay,
    key_function,
    next_event,
    ready_at,
    resolve,
)
from .protocol import (
    ACCEPTED,
    UNSET,
    Admission,
    Backoff,
    Cancelled,
    Done,
    Empty,
    Pop,
    Ready,
    Reason,
    RecentFailure,
    Report,
    Reschedule,
    SeedReport,
    Skipped,
    Stats,
    Upcoming,
    Wait,
    check_limit,
    check_reasons,
    check_report,
    check_seed,
    check_seeds,
    check_time,
    final_counters,
)
from .snapshot import Snapshot
from .spi import (
    ACTIVE,
    IN_FLIGHT,
    QUEUED,
    REVISIT,
    SCHEDULED,
    CrawlRecord,
    LeaseRecord,
    QueueRecord,
    Slot,
    UrlRecord,
    Visit,
)

__all__ = ["CoreFrontier", "set_defaults"]

_T = TypeVar("_T")

#: Each reason's counter, and its answer (an ``Admission`` is a frozen value: one serves all).
_REFUSED = {reason: "refused:" + reason.value for reason in Reason}
_REFUSALS = {reason: Admission(reason) for reason in Reason}
_DUPLICATE = _REFUSALS[Reason.DUPLICATE]
#: Queues looked at per index read while popping.
_BATCH = 32
#: The state a final report leaves a URL in (a Retry that no retry facade took: failed).
_FINAL_STATES = {Done: spi.DONE, Skipped: spi.SKIPPED}
_FINISHED_GAUGES = frozenset(spi.FINISHED.values())
#: What a queue counts of a unit's counters (the crawl counts them all).
_QUEUE_COUNTS = frozenset(spi.COUNTS) | _FINISHED_GAUGES


def set_defaults(storage: spi.Storage, **changes: Any) -> Defaults:
    """Change the storage-wide level of the policy, which every crawl inherits where neither
    it nor a queue sets a value (``delay``, ``max_in_flight``: an int, ``"auto"`` or None for
    no cap, ``lease_time``, ``active``); the new defaults."""
    unknown = set(changes) - {"delay", "max_in_flight", "lease_time", "active"}
    if unknown:
        raise InvalidArgument(f"no store-wide setting named {sorted(unknown)}")
    if "max_in_flight" in changes and changes["max_in_flight"] is None:
        changes["max_in_flight"] = -1

    def write() -> Defaults:
        defaults = replace(storage.defaults(), **changes)  # checked by Defaults itself
        storage.save_defaults(defaults)
        return defaults

    return storage.run(write)


def _capped(q: QueueRecord, max_in_flight: int, now: float) -> bool:
    """Whether ``q`` has ``max_in_flight`` seeds in flight or more, with no schedule due and no
    lease expired: a pop with that cap takes nothing from it, and would change nothing of it
    (its place in the index included: it is ready as it was)."""
    return (q.in_flight >= max_in_flight and not q.stale
            and (q.due_at is None or q.due_at > now)
            and (q.expiry_at is None or q.expiry_at > now))  # fmt: skip


class CoreFrontier(FrontierCore):
    """A crawl's frontier over a storage. Every operation is one write unit of the storage
    (or joins the caller's transaction); the crawl's policy is the storage's, read when the
    view is made and refreshed every ``reap_interval``.

    The policy rule: ``order`` and ``queues`` are fixed when the crawl is created (another one
    raises ``PolicyConflict``); ``delay``, ``max_in_flight`` and ``lease_time`` given to a view
    become the crawl's (stored at once); left out, the crawl's stored values apply. A crawl is
    created by its first write (a push, or a view that sets its policy), never by a view alone.
    """

    def __init__(
        self,
        storage: spi.Storage,
        *,
        crawl: str,
        clock: Clock,
        order: str | None = None,
        queues: str | None = None,
        delay: float | None = UNSET,
        max_in_flight: Any = UNSET,
        lease_time: float | None = UNSET,
        reap_interval: float = 10.0,
    ) -> None:
        self.storage = storage
        self.name = crawl
        self._clock = clock
        self.reap_interval = check_time("reap_interval", reap_interval, minimum=0)
        changes: dict[str, Any] = {}
        if delay is not UNSET:
            changes["delay"] = check_delay("delay", delay)
        if max_in_flight is not UNSET:
            changes["max_in_flight"] = -1 if max_in_flight is None else check_cap(
                max_in_flight, allow_auto=True)  # fmt: skip
        if lease_time is not UNSET:
            changes["lease_time"] = check_delay("lease_time", lease_time)
            if changes["lease_time"] == 0:
                raise InvalidArgument("lease_time must be more than 0 seconds")
        if queues is not None and not callable(queues):
            key_function(queues)  # registered here?
        elif queues is not None:
            raise TypeError(
                'queues names a queue mode ("single", "host", or one registered with '
                "crawlstore.register_queue_key(name, function)): a crawl stores the name"
            )
        self._owner = this_process()
        self._next_reap = -math.inf
        #: Over a partitioned storage, when each partition is reaped next.
        self._next_reaps: dict[int, float] = {}
        #: The partitions this frontier posted to in transactions (with a queue posted to in
        #: each), where nothing folded them yet: its next read folds them first (``_settle``).
        self._unfolded: dict[int, str] = {}
        #: What a dry run's copy tells of its steps (``dry_copy``); None on a real core.
        self._watch: Watch | None = None
        #: The crawl as this view last read it, inside a unit of the storage; every unit reads
        #: it again (a rolled-back transaction may have created it, another view changed it).
        self._crawl: CrawlRecord | None = None
        self._defaults = DEFAULTS
        #: The policy of a queue that sets none: (crawl policy, defaults, effective policy).
        self._plain: tuple[Any, Any, Any] = (None, None, None)
        given = changes or order is not None or queues is not None
        self._pending = CrawlRecord(
            crawl,
            CrawlPolicy(order or "priority", queues or storage.capabilities.default_queues).merged(
                **changes
            ),
            0.0,
        )

        def settle() -> CrawlRecord | None:
            """Read the crawl and, when arguments were given, apply them in the same unit:
            create it with them, or check them against it and store what changed."""
            stored = storage.crawl(crawl)
            if stored is None or not stored.settled:
                return self.crawl_for_write() if given else None
            for name, value in (("order", order), ("queues", queues)):
                if value is not None and getattr(stored.policy, name) != value:
                    raise PolicyConflict(
                        f"crawl {crawl!r} has {name}={getattr(stored.policy, name)!r}, fixed "
                        f"when it was created; open it with that, or leave {name} out"
                    )
            if any(getattr(stored.policy, k) != v for k, v in changes.items()):
                stored.policy = stored.policy.merged(**changes)
                storage.save_crawl(stored)
            return stored

        found = storage.run(settle) if given else storage.view(settle)
        if found is not None:
            self._pending = found
            self._crawl = found

    # -- the crawl and its policy ---------------------------------------------------------------

    def existing_crawl(self) -> CrawlRecord | None:
        """The crawl, read in the current unit; None while it does not exist."""
        crawl = self.storage.crawl(self.name)
        if crawl is not None:
            if not crawl.settled:  # reads see the policy this view's first write will fix
                crawl.policy = self._pending.policy
            self._crawl = crawl
            self._defaults = self.storage.defaults()
        return crawl

    def crawl_for_write(self) -> CrawlRecord:
        """The crawl, created by this write when it does not exist yet (or its policy settled
        when its seen set or validators created it)."""
        crawl = self.existing_crawl()
        if crawl is None or not crawl.settled:
            if crawl is None:
                crawl = CrawlRecord(self.name, self._pending.policy, self._clock())
            crawl.settled = True
            self.storage.save_crawl(crawl)
            self._crawl = crawl
            self._defaults = self.storage.defaults()
        return crawl

    @property
    def core(self) -> CoreFrontier:
        return self

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def policy(self) -> CrawlPolicy:
        """The crawl's policy (a new crawl's, as it will be created)."""
        crawl = self.storage.view(self.existing_crawl) or self._pending
        assert crawl is not None
        return crawl.policy

    @property
    def order(self) -> str:
        return self.policy.order

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        return self.storage.transaction()

    def atomic(self, operation: Callable[[], _T]) -> _T:
        """``operation()`` as one transaction of the storage, run again while its commit
        conflicts with another client's (only a storage that commits optimistically has
        conflicts); what it returned. Inside an open transaction it joins it: a conflict is
        then the outer transaction's."""
        return self.storage.run(operation)

    def _view(self, operation: Callable[[], _T]) -> _T:
        """``operation`` as a read of the storage, once this frontier's own posts are folded
        (``_settle``): a process reads its own pushes."""
        self._settle()
        return self.storage.view(operation)

    def _settle(self, every: bool = False) -> None:
        """Fold the inboxes this frontier posted to in transactions (a storage with inboxes),
        unless a transaction is open (its reads do not see its own posts); with ``every``,
        every inbox of the crawl that holds anything (an export carries what any client
        posted; on a store opened read-only, what is not folded yet is not exported)."""
        storage = self.storage
        if every and storage.capabilities.inboxes:
            partitioned.fold_all(self)
        if self._unfolded and not cast("spi.Inboxes", storage).in_transaction():
            keys, self._unfolded = list(self._unfolded.values()), {}
            partitioned.fold_posts(self, (), keys)

    def queue_for(self, seed: Seed) -> str:
        check_seed(seed)
        return self._key_for(self.storage.view(self.existing_crawl) or self._pending, seed)

    def _key_for(self, crawl: CrawlRecord, seed: Seed) -> str:
        """The queue key of ``seed`` in ``crawl`` (as read in the current unit)."""
        return self._keys_for(crawl, [seed])[0]

    def _new_key(self, crawl: CrawlRecord, seed: Seed) -> str:
        """The queue a URL the crawl does not hold joins: where the storage has partitions, the
        one it is claimed by (``claim_queues``: a claim may outlive a unit rolled back)."""
        key = self._key_for(crawl, seed)
        if self.storage.capabilities.partitions == 1:
            return key
        storage = cast("spi.Partitioned", self.storage)
        return storage.claim_queues(crawl, [seed.fingerprint], [key])[0]

    @staticmethod
    def _keys_for(crawl: CrawlRecord, seeds: list[Seed]) -> list[str]:
        """The queue key of each seed in ``crawl`` (``TypeError`` unless each is a str)."""
        keys: list[Any] = list(map(key_function(crawl.policy.queues), seeds))
        if not all(map(isinstance, keys, repeat(str))):
            key = next(key for key in keys if not isinstance(key, str))
            raise TypeError(f"a queue key is a str; the queue mode gave {key!r:.100}")
        return keys

    def _effective(self, crawl: CrawlRecord, q: QueueRecord) -> Effective:
        if q.delay is None and q.cap is None and q.limit is None and not q.blocked:
            # a queue with no policy of its own (most): the crawl's, kept while it is the same
            plain = self._plain
            if plain[0] is crawl.policy and plain[1] is self._defaults:
                known: Effective = plain[2]
                return known
            effective = resolve(self._defaults, crawl.policy, None, None, None, q.blocked)
            self._plain = (crawl.policy, self._defaults, effective)
            return effective
        return resolve(self._defaults, crawl.policy, q.delay, q.cap, q.limit, q.blocked)

    # -- queues: placing them in the crawl's index ---------------------------------------------

    def run_on(
        self,
        operation: Callable[[], _T],
        *,
        key: str | None = None,
        token: bytes | None = None,
        seed: Seed | None = None,
        key_of: Seed | None = None,
        fp: bytes | None = None,
        create: bool = True,
    ) -> _T:
        """Run ``operation`` as one write unit; where the storage has partitions, a unit on
        the partition of the queue ``key``, of the lease ``token``, of the queue ``seed``'s URL
        is in, of the queue ``key_of`` belongs to, or of the queue the URL ``fp`` is in (the
        operation reaches nothing else), the crawl created first unless not ``create``."""
        if self.storage.capabilities.partitions == 1:
            return self.storage.run(operation)
        return partitioned.run_on(self, operation, key, token, seed, key_of, fp, create)

    def units(self, *, key: str | None = None) -> list[Callable[[Callable[[], _T]], _T]]:
        """How to run a write unit on each partition in turn (one: the store's ``run``),
        or on the partition of the queue ``key`` only; none while the crawl does not
        exist."""
        if self.storage.capabilities.partitions == 1:
            return [self.storage.run]
        return partitioned.units(self, key)

    def unit(self, crawl: CrawlRecord) -> CrawlUnit:
        """The door through which the core's own modules (listings, the overwrite of a known
        URL, export and load, a migration's moves) change the crawl inside a storage unit."""
        return CrawlUnit(self, crawl)

    def dry_copy(self, watch: Watch) -> CoreFrontier:
        """A copy of this core for a dry run inside a ``scratch`` unit (its own reap timer and
        caches: this core's are left as they were), telling ``watch`` of its steps."""
        sim = copy.copy(self)
        sim._watch = watch
        return sim

    def forget_crawl(self, crawl: CrawlRecord) -> None:
        """After the crawl was deleted in this unit: the next write makes it anew, with its
        policy."""
        self._pending = CrawlRecord(self.name, crawl.policy, 0.0)
        self._crawl = None

    def _queue(self, crawl: CrawlRecord, key: str, now: float) -> QueueRecord:
        """The queue ``key``, created (not yet indexed) when it does not exist."""
        q = self.storage.queue(crawl, key)
        if q is None:
            q = QueueRecord(key, now)
            self.storage.save_queue(crawl, q, None)
        return q

    def _place(self, crawl: CrawlRecord, q: QueueRecord, now: float, rotate: bool = False) -> None:
        """Store the queue, indexed at when it may next hand out a seed (``next_event``).
        ``rotate``: behind the queues ready with it."""
        if q.stale:
            q.expiry_at = self.storage.next_expiry(crawl, q)
            q.stale = False
        policy = self._effective(crawl, q)
        event = next_event(q.queued, q.in_flight, finished_count(q), q.last, policy, q.due_at,
                           q.expiry_at)  # fmt: skip
        old = q.event
        if not rotate and old is not None and event is not None and event <= now and old <= now:
            event = old  # ready now, as it was: it keeps its place
        self.storage.save_queue(crawl, q, event, rotate)

    def _count(self, crawl: CrawlRecord, q: QueueRecord | None, **deltas: int) -> None:
        totals: dict[str, int] = {}
        self._tally(totals, q, deltas)
        self.storage.add_totals(crawl, totals)

    @staticmethod
    def _tally(totals: dict[str, int], q: QueueRecord | None, deltas: dict[str, int]) -> None:
        """Add ``deltas`` to the counters: the queue's in place, the crawl's to ``totals`` (a
        batch's, which its caller adds at once)."""
        counts = q.counts if q is not None else None
        for name, n in deltas.items():
            totals[name] = totals.get(name, 0) + n
            if counts is not None and name in _QUEUE_COUNTS:
                counts[name] = counts.get(name, 0) + n

    # -- URLs going in and out of queues --------------------------------------------------------

    def _enqueue(self, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord, cls: int) -> None:
        """Queue a URL (class 0: coming back, ahead of pushed seeds of its priority)."""
        if self._watch is not None:
            self._watch.enqueuing(url)
        url.where = entry = queue_place(
            crawl.policy.order, url.seed, cls, self.storage.next_seq(crawl)
        )
        self.storage.enqueue(crawl, q, entry, url.fp)
        url.state, url.queue, url.kind = QUEUED, q.key, None
        self.storage.save_url(crawl, q, url)
        q.queued += 1

    @staticmethod
    def _admission(url: UrlRecord | None, new_only: bool) -> Admission:
        """A push of a URL whose record is ``url``: refused as a duplicate when the URL is
        queued, in flight or scheduled (``new_only``: when the crawl knows it at all)."""
        return _DUPLICATE if url is not None and (new_only or url.state in ACTIVE) else ACCEPTED

    def _admit_many(
        self,
        crawl: CrawlRecord,
        seeds: list[Seed],
        now: float,
        new_only: bool,
        keys: list[str] | None = None,
    ) -> list[Admission]:
        """Queue each seed unless it is queued, in flight or scheduled already (``new_only``:
        unless the crawl knows it at all), in one pass: the URLs read at once, each queue's
        new entries written at once, the counters added once. ``keys``: each seed's queue,
        chosen already."""
        storage = self.storage
        fps = [seed.fingerprint for seed in seeds]
        if keys is None:
            keys = self._keys_for(crawl, seeds)
        found = storage.find_urls(crawl, fps, keys)
        queues: dict[str, QueueRecord] = {}
        admitted: list[tuple[Seed, UrlRecord]] = []  # in the batch's order
        this_batch: dict[bytes, UrlRecord] = {}
        totals: dict[str, int] = {}
        out: list[Admission] = []
        duplicates = 0
        watch = self._watch
        for seed, fp, key, url in zip(seeds, fps, keys, found, strict=True):
            if fp in this_batch:
                url = this_batch[fp]
            if not self._admission(url, new_only):
                duplicates += 1
                out.append(_DUPLICATE)
                continue
            # A URL stays in the queue it was first admitted to (a key function of its tag,
            # say, could send it elsewhere when it is pushed again).
            if url is not None:
                key = url.queue
            q = queues.get(key)
            if q is None:
                q = queues[key] = self._queue(crawl, key, now)
            fresh = seed if seed.lease is None else seed.with_lease(None)
            if url is None:
                url = UrlRecord(fp, fresh, QUEUED, key, None, now)
            else:  # known and finished: crawled again
                gauge = spi.FINISHED[url.state]
                q.counts[gauge] = q.counts.get(gauge, 0) - 1
                totals[gauge] = totals.get(gauge, 0) - 1
                url.seed = fresh
            if watch is not None:
                watch.enqueuing(url)
            url.state, url.kind = QUEUED, None
            this_batch[fp] = url
            admitted.append((fresh, url))
            out.append(ACCEPTED)
        # sequence numbers in the batch's order (a snapshot lists seeds in it across queues),
        # then each queue's entries in one call
        order = crawl.policy.order
        seq = storage.next_seq(crawl, len(admitted)) if admitted else 0
        groups: dict[str, list[UrlRecord]] = {}
        for fresh, url in admitted:
            url.where = queue_place(order, fresh, 1, seq)
            seq += 1
            group = groups.get(url.queue)
            if group is None:
                group = groups[url.queue] = []
            group.append(url)
        for key, group in groups.items():
            q = queues[key]
            storage.enqueue_many(crawl, q, group)
            n = len(group)
            q.queued += n
            q.counts["admitted"] = q.counts.get("admitted", 0) + n
        n = len(admitted)
        if n:
            totals["admitted"] = totals.get("admitted", 0) + n
            totals["queued"] = n
        if duplicates:
            totals["refused:duplicate"] = duplicates
        if totals:
            storage.add_totals(crawl, totals)
        for q in queues.values():
            self._place(crawl, q, now)
        return out

    def push(self, seed: Seed) -> Admission:
        return self.push_many([seed])[0]

    def push_many(self, seeds: Iterable[Seed], *, new_only: bool = False) -> list[Admission]:
        """``new_only``: refuse (as ``DUPLICATE``) every URL the crawl knows, finished ones
        too, instead of crawling a finished one again (the URL Frontier's discovered URLs)."""
        batch = check_seeds(seeds)
        if self.storage.capabilities.partitions > 1:
            return partitioned.push_many(self, batch, new_only)

        def _write() -> list[Admission]:
            return self._admit_many(self.crawl_for_write(), batch, self._clock(), new_only)

        return self.storage.run(_write)

    def refuse(self, seed: Seed, reason: Reason) -> Admission:
        """Count a refusal (facades call this)."""
        return self.refuse_many([reason])[0]

    def refuse_many(self, reasons: list[Reason]) -> list[Admission]:
        """Count several refusals in one write (a facade's batch)."""
        check_reasons(reasons)
        if not reasons:
            return []
        deltas = {_REFUSED[reason]: n for reason, n in Counter(reasons).items()}

        def _write() -> None:
            self.storage.add_totals(self.crawl_for_write(), deltas)

        self.storage.run(_write)
        return [_REFUSALS[reason] for reason in reasons]

    # -- popping --------------------------------------------------------------------------------

    def pop(self) -> Pop:
        if self.storage.capabilities.partitions > 1:
            return partitioned.pop(self)

        def _write() -> Pop:
            crawl = self.existing_crawl()
            if crawl is None:
                return Empty
            now = self._clock()
            popped = self._pop(crawl, now, 1, None, None, None, None)
            if popped:
                return popped[0]
            return self._wait(crawl, now)

        return self.storage.run(_write)

    def pop_many(
        self,
        limit: int,
        *,
        per_queue: int | None = None,
        queues: int | None = None,
        queue: str | None = None,
        lease_time: float | None = None,
        max_in_flight: int | None = None,
        remote: bool = False,
    ) -> list[Ready]:
        """The core's own limits: ``max_in_flight``: take no more from a queue than leaves
        it that many seeds in flight, on top of its own cap (the URL Frontier's
        ``max_urls_per_queue``); ``remote``: the leases are a remote client's, taken through
        a service, and end only when they expire (not when this process is gone)."""
        check_limit(limit)
        for value in (per_queue, queues, max_in_flight):
            if value is not None:
                check_limit(value)
        if lease_time is not None:
            check_time("lease_time", lease_time, minimum=0)
        holder = REMOTE if remote else self._owner
        if self.storage.capabilities.partitions > 1:
            return partitioned.pop_many(self, limit, per_queue, queues, queue, lease_time,
                                        max_in_flight, holder)  # fmt: skip

        def _write() -> list[Ready]:
            crawl = self.existing_crawl()
            if crawl is None or limit == 0:
                return []
            return self._pop(crawl, self._clock(), limit, per_queue, queues, queue, lease_time,
                             max_in_flight, holder)  # fmt: skip

        return self.storage.run(_write)

    def _pop(
        self,
        crawl: CrawlRecord,
        now: float,
        limit: int,
        per_queue: int | None,
        queues: int | None,
        only: str | None,
        lease_time: float | None,
        max_in_flight: int | None = None,
        holder: tuple[int, int] | None = None,
        served_keys: set[str] | None = None,
        reap: bool = True,
    ) -> list[Ready]:
        """Hand out up to ``limit`` seeds; ``served_keys`` gets the keys of the queues that
        handed one out. ``reap``: reap first when it is time (else the caller does)."""
        if not self._defaults.active:
            return []  # the store-wide switch is off: nothing is handed out
        if reap and now >= self._next_reap and self.storage.capabilities.local_holders:
            # (a lease held on another machine ends by time only: the index brings its queue)
            self._reap(crawl, now)
        out: list[Ready] = []
        served = 0
        # the queues at this call's cap stay out of the walk (the storage's index by in-flight
        # count), but for those with a schedule or lease to tend
        below = max_in_flight if max_in_flight else None
        visited: set[str] = set()
        stayed = 0  # queues visited that kept their place in the index (nothing taken)
        while len(out) < limit and (queues is None or served < queues):
            if only is not None:
                q = self.storage.queue(crawl, only)
                fresh = [q] if q is not None and only not in visited else []
            else:  # past those visited that kept their place (those that handed out a seed
                # went behind), twice as many each round: a pop that passes over many queues
                # it cannot take from (at a cap) reads each a bounded number of times, not
                # once a round; when those read were all visited, past every one visited
                wanted = min(_BATCH, limit - len(out))
                window, wide = 2 * stayed + wanted, 2 * len(visited) + wanted
                candidates = self.storage.due_queues(crawl, now, window, below)
                fresh = [q for q in candidates if q.key not in visited]
                if not fresh and len(candidates) == window < wide:
                    candidates = self.storage.due_queues(crawl, now, wide, below)
                    fresh = [q for q in candidates if q.key not in visited]
            if not fresh:
                break
            if len(fresh) > 1:
                self.storage.prefetch(crawl, (), [q.key for q in fresh])
            for q in fresh:
                visited.add(q.key)
                if max_in_flight is not None and _capped(q, max_in_flight, now):
                    stayed += 1
                    continue  # no room for this call, nothing to maintain: left as it is
                self._maintain(crawl, q, now)
                policy = self._effective(crawl, q)
                at = ready_at(q.queued, q.in_flight, finished_count(q), q.last, policy)
                took = 0
                if at is not None and at <= now:
                    room = limit - len(out)
                    if per_queue is not None:
                        room = min(room, per_queue)
                    elif policy.delay > 0:  # a delay between pops: one a pop
                        room = 1
                    if policy.cap is not None:
                        room = min(room, policy.cap - q.in_flight)
                    if max_in_flight is not None:
                        room = min(room, max_in_flight - q.in_flight)
                    if policy.limit is not None:
                        room = min(room, policy.limit - finished_count(q) - q.in_flight)
                    lease = policy.lease_time if lease_time is None else lease_time
                    taken = (self._take(crawl, q, now, room, now + lease, holder or self._owner)
                             if room > 0 else [])  # fmt: skip
                    out.extend(taken)
                    took = len(taken)
                    served += took > 0
                    if took and served_keys is not None:
                        served_keys.add(q.key)
                stayed += not took
                self._place(crawl, q, now, rotate=took > 0)
                if len(out) >= limit or (queues is not None and served >= queues):
                    break
        return out

    def _take(
        self,
        crawl: CrawlRecord,
        q: QueueRecord,
        now: float,
        n: int,
        expires: float,
        holder: tuple[int, int],
    ) -> list[Ready]:
        out = []
        storage = self.storage
        for fp in storage.dequeue(crawl, q, n):
            url = storage.url(crawl, fp)
            if url is None:
                raise CorruptRecord(f"queue {q.key!r} of crawl {self.name!r} holds an entry "
                                    f"for {fp.hex()}, which has no URL record")  # fmt: skip
            lease = LeaseRecord(b"", fp, q.key, expires, holder)
            storage.lease(crawl, q, lease)
            url.state, url.where = IN_FLIGHT, lease.token
            storage.save_url(crawl, q, url)
            handed = Lease(lease.token, expires)
            out.append(Ready(url.leased(handed), handed))
        taken = len(out)
        if taken:
            q.queued -= taken
            q.in_flight += taken
            q.last = now
            if q.expiry_at is None or expires < q.expiry_at:
                q.expiry_at = expires
            self._count(crawl, q, popped=taken, queued=-taken, in_flight=taken)
        return out

    def _wait(self, crawl: CrawlRecord, now: float) -> Pop:
        totals = self.storage.totals(crawl)
        work = totals.get("queued", 0) + totals.get("scheduled", 0) - totals.get("revisits", 0)
        if work <= 0:
            return Empty  # nothing, or only revisits: revisit() waits for those
        at = self.storage.next_event(crawl)
        if at is None:
            return Empty  # what is left waits in queues that reached their limit: never due
        return Wait(max(at, now))

    def peek(self, n: int = 10, *, queue: str | None = None) -> list[Upcoming]:
        """The next ``n`` seeds pop will hand out (of the queue ``queue`` only, as
        ``pop_many(1, queue=queue)`` does), without handing any out: a dry run of pop in one
        read, which changes nothing. The ones ready now come first, in pop's order, then the
        ones that come later (with the time pop first hands each out and why), then those that
        only a report frees; see ``frontier/peek.py``."""
        from .peek import peek

        self._settle()
        return peek(self, n, queue)

    def next_revisit(self) -> float | None:
        """While revisits are scheduled, when something of the crawl may next happen (a lower
        bound); None when none is: what ``revisit()`` waits for once nothing else is left."""

        def read() -> float | None:
            crawl = self.existing_crawl()
            if crawl is None or self.storage.totals(crawl).get("revisits", 0) <= 0:
                return None
            return self.storage.next_event(crawl)

        return self._view(read)

    def next_due(self) -> float | None:
        """When something of the crawl may next happen (a lower bound): a queue's delay ends,
        a schedule falls due, a lease expires. Facades wait on it."""

        def _read() -> float | None:
            crawl = self.existing_crawl()
            return self.storage.next_event(crawl) if crawl is not None else None

        return self._view(_read)

    # -- upkeep: due schedules and leases that ended without a report ---------------------------

    def _maintain(self, crawl: CrawlRecord, q: QueueRecord, now: float) -> None:
        if self._watch is not None:
            self._watch.maintaining(q)
        storage = self.storage
        if q.due_at is not None and q.due_at <= now:
            for fp in storage.due(crawl, q, now):
                url = storage.url(crawl, fp)
                if url is None:
                    raise CorruptRecord(f"a schedule of queue {q.key!r} names {fp.hex()}, "
                                        "which has no URL record")  # fmt: skip
                revisit = url.kind == REVISIT
                q.scheduled -= 1
                q.revisits -= revisit
                indexes.count_revisit(storage, crawl, q, url, -1)
                self._enqueue(crawl, q, url, 0)
                self._count(crawl, None, scheduled=-1, revisits=-revisit, queued=1)
            q.due_at = storage.next_due(crawl, q)
        if q.expiry_at is not None and q.expiry_at <= now:
            for lease in storage.expired(crawl, q, now):
                self._requeue(crawl, q, lease)
            q.expiry_at = storage.next_expiry(crawl, q)

    def _requeue(self, crawl: CrawlRecord, q: QueueRecord, lease: LeaseRecord) -> None:
        """A lease that ended without a report: its seed goes back to the front of its queue."""
        url = self._end(crawl, q, lease)
        self._enqueue(crawl, q, url, 0)
        self._count(crawl, q, queued=1, requeued=1, in_flight=-1)

    def _reap(self, crawl: CrawlRecord, now: float) -> int:
        """Requeue the leases whose holder is gone (a killed worker, a reused pid)."""
        self._next_reap = now + self.reap_interval
        alive: dict[tuple[int, int], bool] = {}
        ended = []
        local = self.storage.capabilities.local_holders
        for lease in self.storage.leases(crawl):
            owner = lease.owner
            if owner not in alive:
                alive[owner] = not local or owner == self._owner or process_alive(*owner)
            if not alive[owner] or lease.expires <= now:
                ended.append(lease)
        queues: dict[str, QueueRecord] = {}
        for lease in ended:
            q = queues.get(lease.queue) or queues.setdefault(
                lease.queue, self._queue(crawl, lease.queue, now)
            )
            self._requeue(crawl, q, lease)
        for q in queues.values():
            self._place(crawl, q, now)
        return len(ended)

    def reap(self) -> int:
        """Queue again every seed whose lease expired or whose holder is gone; how many."""

        def _write() -> int:
            crawl = self.existing_crawl()
            return self._reap(crawl, self._clock()) if crawl is not None else 0

        if self.storage.capabilities.partitions > 1:
            return partitioned.each(self, _write)
        return self.storage.run(_write)

    # -- reports --------------------------------------------------------------------------------

    def _lease_of(self, crawl: CrawlRecord, seed: Seed) -> LeaseRecord:
        lease = seed.lease
        if lease is None:
            raise NotInFlight(
                f"seed has no lease (it was not handed out by this frontier, or it crossed a "
                f"process boundary without it: seed.with_lease(lease)): {seed!r}"
            )
        record = self.storage.get_lease(crawl, lease.token)
        if record is None or record.fp != seed.fingerprint:
            raise NotInFlight(
                f"seed is not in flight in crawl {self.name!r} under its lease (reported "
                f"already, or the lease ended and the seed went to another holder): {seed!r}"
            )
        return record

    def report(self, report: Report) -> None:
        check_report(report)
        if isinstance(report, Backoff):
            return  # pauses need tag_backoff()
        self.report_many([report])

    def report_many(self, reports: Iterable[Report]) -> None:
        batch = list(reports)
        for report in batch:
            check_report(report)
        todo = [report for report in batch if not isinstance(report, Backoff)]
        if self.storage.capabilities.partitions > 1:
            partitioned.report_many(self, todo)
        else:
            self.storage.run(lambda: self._report_unit(todo))

    def _report_unit(self, todo: list[SeedReport]) -> None:
        """Apply these reports (no ``Backoff``) in the current unit: all of them, or none."""
        crawl = self.crawl_for_write()
        now = self._clock()
        if len(todo) > 1:  # (a server's reads: the seeds' URLs and leases in one go)
            tokens = [r.seed.lease.token for r in todo if r.seed.lease is not None]
            self.storage.prefetch(crawl, [r.seed.fingerprint for r in todo], (), tokens)
        leases = [self._lease_of(crawl, report.seed) for report in todo]  # all, or none
        if len(leases) > 1:  # and their queues
            self.storage.prefetch(crawl, (), list(dict.fromkeys(x.queue for x in leases)))
        if len({lease.token for lease in leases}) < len(leases):
            raise NotInFlight("a seed is reported twice in one report_many")
        queues: dict[str, QueueRecord] = {}
        totals: dict[str, int] = {}
        for report, lease in zip(todo, leases, strict=True):
            self._report(crawl, report, now, queues, totals, lease)
        if totals:
            self.storage.add_totals(crawl, totals)
        for q in queues.values():
            self._place(crawl, q, now)

    def _report(
        self,
        crawl: CrawlRecord,
        report: Report,
        now: float,
        queues: dict[str, QueueRecord],
        totals: dict[str, int],
        lease: LeaseRecord | None = None,
    ) -> QueueRecord:
        """Apply a report (its lease read already, or not); the queue it changed, to place
        (``queues`` holds the queues this unit read already: each is read once, placed once).
        The crawl's counters go to ``totals``, which the caller adds once."""
        assert not isinstance(report, Backoff)
        if lease is None:
            lease = self._lease_of(crawl, report.seed)
        q = queues.get(lease.queue)
        if q is None:
            q = queues[lease.queue] = self._queue(crawl, lease.queue, now)
        url = self._end(crawl, q, lease)
        deltas = {"in_flight": -1}
        names = final_counters(report)
        if names:  # Done, Failed, Skipped (and a Retry nobody took): the URL is finished
            state = _FINAL_STATES.get(type(report), spi.FAILED)
            status = getattr(report, "status", None)
            reason = getattr(report, "reason", None)
            url.state, url.where, url.kind = state, None, None
            url.outcome = visit = Visit(now, status, reason, state)
            self.storage.save_url(crawl, q, url)
            if state == spi.FAILED:
                indexes.note_failure(self.storage, crawl, q, report.seed.url, visit)
            deltas.update(dict.fromkeys(names, 1))
            deltas[spi.FINISHED[state]] = 1
        elif isinstance(report, Cancelled):
            self._enqueue(crawl, q, url, 0)
            deltas.update(cancelled=1, queued=1)
        else:
            assert isinstance(report, Reschedule)
            url.seed = report.seed.with_lease(None)
            self._schedule(crawl, q, url, report.at, report.kind)
            if report.retried:
                deltas["retried"] = 1
        self._tally(totals, q, deltas)
        return q

    def _end(self, crawl: CrawlRecord, q: QueueRecord, lease: LeaseRecord) -> UrlRecord:
        """End a lease, and the queue's gauge of it (the crawl's ``in_flight`` is the caller's
        to count, with the rest of what it changes)."""
        self.storage.end_lease(crawl, lease)
        q.in_flight -= 1
        if q.expiry_at is not None and lease.expires <= q.expiry_at:
            q.stale = True  # it was the earliest: read the next once, when the queue is placed
        url = self.storage.url(crawl, lease.fp)
        if url is None:
            raise CorruptRecord(f"a lease of crawl {self.name!r} names {lease.fp.hex()}, which "
                                "has no URL record")  # fmt: skip
        return url

    def _schedule(
        self, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord, at: float, kind: str
    ) -> None:
        url.where = slot = Slot(at, self.storage.next_seq(crawl))
        self.storage.schedule(crawl, q, slot, url.fp)
        url.state, url.queue, url.kind = SCHEDULED, q.key, kind
        self.storage.save_url(crawl, q, url)
        indexes.count_revisit(self.storage, crawl, q, url, 1)
        revisit = kind == REVISIT
        q.scheduled += 1
        q.revisits += revisit
        if q.due_at is None or at < q.due_at:
            q.due_at = at
        self._count(crawl, None, scheduled=1, revisits=revisit)

    def _unplace(self, crawl: CrawlRecord, q: QueueRecord, url: UrlRecord) -> None:
        """Take a URL out of where it is, and out of its gauge (its record stays)."""
        if url.state in spi.FINISHED:
            self._count(crawl, q, **{spi.FINISHED[url.state]: -1})
        elif url.state == QUEUED:
            self.storage.unqueue(crawl, q, url.entry)
            q.queued -= 1
            self._count(crawl, None, queued=-1)
        elif url.state == SCHEDULED:
            slot = url.slot
            self.storage.unschedule(crawl, q, slot)
            indexes.count_revisit(self.storage, crawl, q, url, -1)
            if q.due_at is not None and slot.at <= q.due_at:
                q.due_at = self.storage.next_due(crawl, q)  # it was the earliest
            revisit = url.kind == REVISIT
            q.scheduled -= 1
            q.revisits -= revisit
            self._count(crawl, None, scheduled=-1, revisits=-revisit)

    def schedule(self, seed: Seed, at: float, *, kind: str = spi.RETRY) -> None:
        """Schedule ``seed`` at ``at`` (facades call this): one schedule per URL, a new one
        replaces the old. A URL in flight must be reported first."""
        check_seed(seed)
        check_time("at", at)

        def _write() -> None:
            crawl = self.crawl_for_write()
            now = self._clock()
            fp = seed.fingerprint
            url = self.storage.url(crawl, fp)
            key = url.queue if url is not None else self._new_key(crawl, seed)
            q = self._queue(crawl, key, now)
            if url is None:
                url = UrlRecord(fp, seed.with_lease(None), SCHEDULED, key, None, now)
            elif url.state == IN_FLIGHT:
                raise InvalidArgument(f"seed is in flight: report it before scheduling: {seed!r}")
            else:
                self._unplace(crawl, q, url)
                url.seed = seed.with_lease(None)
            self._schedule(crawl, q, url, at, kind)
            self._place(crawl, q, now)

        self.run_on(_write, seed=seed)

    def extend_lease(self, seed: Seed, seconds: float | None = None) -> Lease:
        check_seed(seed)
        if seconds is not None:
            check_time("seconds", seconds, minimum=0)

        def _write() -> Lease:
            crawl = self.crawl_for_write()
            now = self._clock()
            lease = self._lease_of(crawl, seed)
            q = self._queue(crawl, lease.queue, now)
            length = self._effective(crawl, q).lease_time if seconds is None else seconds
            expires = now + length
            self.storage.extend_lease(crawl, lease, expires)
            if q.expiry_at is None or expires < q.expiry_at:
                q.expiry_at = expires
                self._place(crawl, q, now)
            return Lease(lease.token, expires)

        token = seed.lease.token if seed.lease is not None else None
        return self.run_on(_write, token=token, create=False)  # (refused: nothing created)

    def end_lease_of(self, fp: bytes) -> bool:
        """End whatever lease the URL ``fp`` has, whoever holds it, and queue it at the front:
        for protocols without tokens (the URL Frontier's update of a known URL). Whether it
        was in flight."""

        def _write() -> bool:
            crawl = self.existing_crawl()
            url = self.storage.url(crawl, fp) if crawl is not None else None
            if crawl is None or url is None or url.state != IN_FLIGHT:
                return False
            lease = self.storage.get_lease(crawl, url.token)
            if lease is None:
                raise CorruptRecord(f"URL {fp.hex()} is in flight without its lease")
            now = self._clock()
            q = self._queue(crawl, lease.queue, now)
            self._requeue(crawl, q, lease)
            self._place(crawl, q, now)
            return True

        return self.run_on(_write, fp=fp, create=False)

    def overwrite_many(self, items: Iterable[tuple[Seed, float | None]]) -> None:
        """Replace each URL's seed, whatever its state, ending its lease whoever holds it,
        and schedule it at ``at``, or mark it done for good when ``at`` is None, in the queue
        the new seed belongs to (the URL moves there from another); an unknown URL is created
        so. The URL Frontier's update of a known URL (a protocol without lease tokens), all in
        one write unit."""
        from .known import overwrite

        overwrite(self, items)

    def pause_queue(self, seed: Seed, until: float) -> bool:
        check_seed(seed)
        check_time("until", until)

        def _write() -> bool:
            if (self.existing_crawl() or self._pending).policy.queues == "single":
                return False  # one queue is the whole crawl
            crawl = self.crawl_for_write()
            q = self._queue(crawl, self._key_for(crawl, seed), self._clock())
            if until > q.blocked:
                q.blocked = until
                self._place(crawl, q, self._clock(), rotate=True)
            return True

        return self.run_on(_write, key_of=seed)

    # -- state and statistics -------------------------------------------------------------------

    def state(self, namespace: str) -> MutableMapping[str, Any]:
        """A facade's key/value state, kept by the storage (the crawl is created by its first
        write)."""
        return CrawlState(self, namespace)

    def recent_failures(self, limit: int = 20) -> list[RecentFailure]:
        """The crawl's newest visits that failed for good, newest first: up to ``limit`` of
        the last ``indexes.RECENT_FAILURES`` or so (each partition keeps its share). A read of
        what it returns, whatever the crawl holds."""
        check_limit(limit)

        def read() -> list[spi.Failure]:
            crawl = self.existing_crawl()
            return self.storage.failures(crawl, limit) if crawl is not None and limit else []

        return [RecentFailure(f.at, f.url, f.queue, f.status, f.reason)
                for f in self._view(read)]  # fmt: skip

    def revisits_due(self, until: float) -> int:
        """How many revisits are due by ``until`` (epoch seconds; those overdue included),
        counted by the minute: every revisit of the minute that holds ``until`` too."""
        check_time("until", until)

        def read() -> int:
            crawl = self.existing_crawl()
            return self.storage.revisits_due(crawl, until) if crawl is not None else 0

        return self._view(read)

    def stats(self) -> Stats:
        def totals() -> dict[str, int]:
            crawl = self.existing_crawl()
            return self.storage.totals(crawl) if crawl is not None else {}

        c = self._view(totals)
        refused = {k.split(":", 1)[1]: v for k, v in c.items() if k.startswith("refused:") and v}
        return Stats(
            admitted=c.get("admitted", 0),
            refused=refused,
            popped=c.get("popped", 0),
            done=c.get("done", 0),
            failed=c.get("failed", 0),
            retried=c.get("retried", 0),
            skipped=c.get("skipped", 0),
            cancelled=c.get("cancelled", 0),
            unchanged=c.get("unchanged", 0),
            queued=c.get("queued", 0),
            in_flight=c.get("in_flight", 0),
            scheduled=c.get("scheduled", 0),
        )

    def __len__(self) -> int:
        stats = self.stats()
        return stats.queued + stats.in_flight + stats.scheduled

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def delete_crawl(self) -> int:
        """Remove the crawl and everything it holds; how many URLs it knew."""
        return listing.delete_crawl(self)

    # -- the complete form: an export, and a snapshot of every seed held -----------------------

    def export(self) -> Iterator[dict[str, Any]]:
        """The crawl's frontier as versioned records, read from one consistent snapshot (held
        while the records are read: consume them, or close the iterator)."""
        from .export import export_frontier, in_reader, with_end

        self._settle(every=True)
        return in_reader(self.storage, lambda: with_end(export_frontier(self)))

    def load(
        self,
        records: Iterable[dict[str, Any]],
        other: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        """Load an export into this crawl, which must hold nothing yet (records of another
        kind go to ``other``, or are refused)."""
        from .export import load_frontier

        load_frontier(self, records, other)

    def snapshot(self) -> Snapshot:
        def read() -> tuple[str, list[Any], list[Seed], list[Any]]:
            crawl = self.existing_crawl()
            queued: list[Any] = []
            in_flight: list[Seed] = []
            scheduled: list[Any] = []
            if crawl is None:
                return self.order, queued, in_flight, scheduled
            for url in listing.scan(self, crawl, None, None):
                if url.state == QUEUED:
                    queued.append((url.entry, url.seed))
                elif url.state == IN_FLIGHT:
                    in_flight.append(url.seed)
                elif url.state == SCHEDULED:
                    scheduled.append((*url.slot, url.seed, url.kind))
            return crawl.policy.order, queued, in_flight, scheduled

        order, queued, in_flight, scheduled = self._view(read)
        queued.sort(key=lambda e: tuple(e[0]))
        scheduled.sort(key=lambda e: (e[0], e[1]))
        return Snapshot(
            order,
            queued=tuple(seed for _, seed in queued),
            in_flight=tuple(in_flight),
            scheduled=tuple((at, seed) for at, _, seed, kind in scheduled if kind != REVISIT),
            revisits=tuple((at, seed) for at, _, seed, kind in scheduled if kind == REVISIT),
        )


class CrawlUnit:
    """What the core's modules may do to one crawl inside a storage unit (``core.unit(crawl)``):
    the steps every operation of the core is made of, each keeping the queues' gauges, the
    crawl's counters and its index of queues right. Nothing else reaches into the core."""

    __slots__ = ("_core", "crawl")

    def __init__(self, core: CoreFrontier, crawl: CrawlRecord) -> None:
        self._core, self.crawl = core, crawl

    def now(self) -> float:
        """The core's clock."""
        return self._core._clock()

    def key_for(self, seed: Seed) -> str:
        """The queue key of ``seed`` in the crawl."""
        return self._core._key_for(self.crawl, seed)

    def queue(self, key: str, now: float) -> QueueRecord:
        """The queue ``key``, created (not yet indexed) when it does not exist."""
        return self._core._queue(self.crawl, key, now)

    def place(self, q: QueueRecord, now: float, *, rotate: bool = False) -> None:
        """Store the queue, indexed at when it may next hand out a seed (``rotate``: behind
        the queues ready with it)."""
        self._core._place(self.crawl, q, now, rotate)

    def count(self, q: QueueRecord | None, **deltas: int) -> None:
        """Add counter deltas to the queue (when given) and the crawl."""
        self._core._count(self.crawl, q, **deltas)

    def enqueue(self, q: QueueRecord, url: UrlRecord, cls: int) -> None:
        """Queue a URL (class 0: coming back, ahead of pushed seeds of its priority)."""
        self._core._enqueue(self.crawl, q, url, cls)

    def requeue(self, q: QueueRecord, lease: LeaseRecord) -> None:
        """End a lease without a report: its seed goes back to the front of its queue."""
        self._core._requeue(self.crawl, q, lease)

    def end(self, q: QueueRecord, lease: LeaseRecord) -> UrlRecord:
        """End a lease; its URL record."""
        url = self._core._end(self.crawl, q, lease)
        self._core._count(self.crawl, None, in_flight=-1)
        return url

    def schedule(self, q: QueueRecord, url: UrlRecord, at: float, kind: str) -> None:
        """Schedule a URL at ``at`` (a retry, a pause or a revisit)."""
        self._core._schedule(self.crawl, q, url, at, kind)

    def unplace(self, q: QueueRecord, url: UrlRecord) -> None:
        """Take a URL out of where it is, and out of its gauge (its record stays)."""
        self._core._unplace(self.crawl, q, url)

    def effective(self, q: QueueRecord) -> Effective:
        """The policy that applies to the queue: its overrides over the crawl's and the store's."""
        return self._core._effective(self.crawl, q)

    def pop_one(self, now: float, only: str | None) -> Ready | None:
        """What ``pop`` hands out at ``now`` (from queue ``only``, when given), leased for ever:
        for a dry run, whose leases never come back."""
        out = self._core._pop(self.crawl, now, 1, None, None, only, math.inf)
        return out[0] if out else None

    def done(self, seed: Seed, now: float) -> None:
        """Report a seed handed out done at ``now``, its queue placed again (as a report does)."""
        totals: dict[str, int] = {}
        q = self._core._report(self.crawl, Done(seed), now, {}, totals)
        self.count(None, **totals)
        self._core._place(self.crawl, q, now)


class Watch(Protocol):
    """What a dry run's copy of the core (``dry_copy``) tells of its steps."""

    def enqueuing(self, url: UrlRecord) -> None:
        """``url`` joins its queue (in the state it leaves: a schedule, a lease, or queued)."""

    def maintaining(self, q: QueueRecord) -> None:
        """A pop looks at queue ``q``, before its due schedules and expired leases join it."""
