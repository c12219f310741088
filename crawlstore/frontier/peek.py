"""``peek``: the seeds pop will hand out next, found by a dry run of pop itself.

The core's own pop runs in a ``scratch`` unit of the storage (a write unit over one read,
whose writes are all thrown away), on a copy of the core (``dry_copy``: its reap timer is left
as it was), through the core's door (``CrawlUnit.pop_one``, ``done``, ``effective``). So the
order is pop's by construction, never a second reading of the policy:

1. the seeds ready now, in the exact order successive ``pop()`` calls (or
   ``pop_many(1, queue=key)`` calls, for one queue) hand them out, with what a pop does first
   included: leases that expired or whose holder is gone go back to the front of their queue,
   schedules that fell due join theirs;
2. then the seeds that come later, in the order and at the time pop would first hand each out
   if every seed handed out from now on were reported done at once (the ready ones, once they
   are all out) and nothing else happened: no push, no other report. The dry run's clock moves
   on to each next event of the crawl's index (a delay ending, a block ending, a schedule
   falling due). The seeds in flight now stay in flight (each is expected to be reported, when
   is unknown) and are never listed;
3. last, seeds that only such a report frees, with no time: the queued seeds of queues at
   their ``max_in_flight`` with seeds in flight now ("held"), or at their ``limit``
   ("limit"), one a queue in turn.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .places import finished_count
from .policy import ready_at
from .protocol import Ready, Upcoming, check_limit
from .spi import QUEUED, SCHEDULED, CrawlRecord, QueueRecord, UrlRecord

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = ["peek"]

#: Events at or past this time never come (a lease the dry run took or froze).
_NEVER = 1e15
#: Rounds of the dry run's clock at most, per seed asked for (a bound, never reached).
_ROUNDS = 64


def peek(core: CoreFrontier, n: int, queue: str | None) -> list[Upcoming]:
    check_limit(n)
    if queue is not None and not isinstance(queue, str):
        raise TypeError(f"a queue key is a str, not {type(queue).__name__}: {queue!r:.100}")
    now = core.clock()

    def dry() -> list[Upcoming]:
        crawl = core.existing_crawl()
        if crawl is None or n == 0:
            return []
        return _DryRun(core, crawl, now, queue).run(n)

    return core.storage.scratch(dry)


class _DryRun:
    """Pops of one scratch unit, and what each handed out; the dry run's core tells it of the
    seeds that join a queue and of the queues it looks at (``Watch``)."""

    def __init__(self, core: CoreFrontier, crawl: CrawlRecord, now: float, only: str | None):
        #: Where the seeds that joined a queue during the dry run came from (their URL's state
        #: and kind before): a schedule, or a lease.
        self.origin: dict[bytes, str] = {}
        #: Why each queue first visited after the ready ones had none ready at ``now``.
        self.waiting: dict[str, str] = {}
        #: The queue of each seed the dry run handed out, by its lease's token.
        self.queues: dict[bytes, str] = {}
        self.later = False
        self.sim = core.dry_copy(self).unit(crawl)
        self.crawl, self.now, self.only = crawl, now, only
        self.storage = core.storage

    def enqueuing(self, url: UrlRecord) -> None:
        if url.state != QUEUED:
            kind = url.kind if url.state == SCHEDULED else "lease"
            self.origin.setdefault(url.fp, kind or "retry")

    def maintaining(self, q: QueueRecord) -> None:
        if self.later and q.key not in self.waiting:
            self.waiting[q.key] = self._why_not_now(q)

    def _why_not_now(self, q: QueueRecord) -> str:
        """Why the queue hands out no (more) seed now: its block, its delay, or its cap."""
        policy = self.sim.effective(q)
        if q.blocked > self.now:
            return "blocked"
        if q.last + policy.delay > self.now:
            return "delay"
        if policy.cap is not None and q.in_flight >= policy.cap:
            return "held"
        return "delay"

    def _pop(self, at: float) -> Ready | None:
        return self.sim.pop_one(at, self.only)

    def _freeze(self) -> None:
        """Leases in flight now never expire in the dry run (their reports are to come); a
        holder that is gone is still found by the reaps."""
        for lease in self.storage.leases(self.crawl):
            if lease.expires > self.now:
                self.storage.extend_lease(self.crawl, lease, math.inf)

    def _next_event(self) -> float | None:
        if self.only is None:
            return self.storage.next_event(self.crawl)
        q = self.storage.queue(self.crawl, self.only)
        return q.event if q is not None else None

    def _done(self, ready: Ready, at: float) -> None:
        """Report a seed the dry run handed out done, at ``at`` (as the core does)."""
        self.sim.done(ready.seed, at)

    def run(self, n: int) -> list[Upcoming]:
        out: list[Upcoming] = []
        now = self.now
        self._freeze()
        handed: list[Ready] = []
        while len(out) < n and (ready := self._pop(now)) is not None:
            handed.append(ready)
            out.append(Upcoming(ready.seed.with_lease(None), self._queue_of(ready), now, "ready"))
        if len(out) >= n:
            return out
        for ready in handed:  # why each of their queues has no more now, then their reports
            key = self._queue_of(ready)
            if key not in self.waiting:
                q = self.storage.queue(self.crawl, key)
                assert q is not None
                self.waiting[key] = self._why_not_now(q)
        for ready in handed:
            self._done(ready, now)
        self.later = True
        at, idle = now, 0
        for _ in range(_ROUNDS * n):
            if len(out) >= n:
                break
            ready = self._pop(at)
            if ready is not None:
                idle = 0
                key = self._queue_of(ready)
                why = self.origin.get(ready.seed.fingerprint) or self.waiting.get(key, "delay")
                out.append(Upcoming(ready.seed.with_lease(None), key, at, why))
                self._done(ready, at)
                q = self.storage.queue(self.crawl, key)
                assert q is not None
                policy = self.sim.effective(q)
                if policy.delay > 0 or policy.cap is not None:  # its next one waits for this one
                    self.waiting[key] = "delay" if policy.delay > 0 else "held"
                continue
            event = self._next_event()
            if event is None or event >= _NEVER:
                break
            idle = idle + 1 if event <= at else 0
            if idle > 2:
                break  # an event that hands out nothing and does not move (never seen)
            at = max(at, event)
        if len(out) < n:
            out.extend(self._held(n - len(out)))
        return out

    def _queue_of(self, ready: Ready) -> str:
        assert ready.lease is not None
        key = self.queues.get(ready.lease.token)
        if key is None:
            lease = self.storage.get_lease(self.crawl, ready.lease.token)
            assert lease is not None
            key = self.queues[ready.lease.token] = lease.queue
        return key

    def _held(self, n: int) -> list[Upcoming]:
        """Queued seeds of queues that wait for reports of seeds in flight now (or that reached
        their limit), one a queue in turn."""
        if self.only is not None:
            keys = {self.only}
        else:
            keys = {lease.queue for lease in self.storage.leases(self.crawl)}
        queues = [
            q
            for key in sorted(keys)
            if (q := self.storage.queue(self.crawl, key)) is not None and q.queued > 0
        ]
        out: list[Upcoming] = []
        whys = {}
        for q in queues:
            policy = self.sim.effective(q)
            capped = ready_at(q.queued, q.in_flight, finished_count(q), q.last, policy) is None
            limited = policy.limit is not None and finished_count(q) + q.in_flight >= policy.limit
            whys[q.key] = "limit" if limited else "held" if capped else ""
        queues = [q for q in queues if whys[q.key]]
        while queues and len(out) < n:
            for q in list(queues):
                fps = self.storage.dequeue(self.crawl, q, 1)
                url = self.storage.url(self.crawl, fps[0]) if fps else None
                if url is None:
                    queues.remove(q)
                    continue
                out.append(Upcoming(url.seed.with_lease(None), q.key, None, whys[q.key]))
                if len(out) >= n:
                    break
        return out
