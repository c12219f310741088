"""Differential: the core over the memory storage in 4 partitions (``PartitionedMemoryStorage``)
against the core over one memory storage, driven by the same random operations on two
ManualClocks kept in step: pushes (host and meta queue modes; URLs pushed again, with another
queue key, ``new_only``), pops (``per_queue``, ``queues``, ``queue=``, lease times, the core's
``max_in_flight``, remote holders, a holder that is gone), reports of every kind (leases that
ended among them), lease extensions, ``end_lease_of``, schedules, overwrites (a URL twice,
moves between queues of different partitions), pauses, blocks, a queue's own policy, deleting
a queue, purging, reaping, the clock past lease expiry, transactions committed or rolled back,
deleting the crawl, an export loaded into a fresh storage (of the same kind or the other), and
a second view of the partitioned storage taking over.

What must agree after every step, and inside a transaction after each of its steps:
``stats()``, ``len()``, ``count(state=...)`` of the crawl and of each queue, every URL's status
(``urls()``, ``url()``: state, queue, lease expiry or schedule time and kind, created, last
outcome, seed), the queues (``queues()``, ``queue()``: gauges, counters, block, own policy,
last pop, created), ``next_due()`` (a time at or before now counts as now), and of each call
its result or the error it raises (admissions and their reasons, ``NotInFlight``,
``InvalidArgument``, what ``delete_queue``, ``purge``, ``reap``, ``end_lease_of``,
``pause_queue``, ``extend_lease`` return), an export but for sequence numbers, and
``snapshot()`` and ``peek()``: each queue's seeds in the same order, across queues as sets.

What may differ (docs/concepts/storages.md "Partitions"), and how both sides are kept alike:

- **pop order across partitions** follows their turns. The partitioned side pops first; the
  queues its pop looks at are recorded in order (the core's ``Watch`` hook: ``maintaining``),
  with the seeds each hands out. The reference is then driven with exactly that, under one
  reap as one pop does: for each queue looked at, ``pop_many(n, queue=key, ...)`` for the
  ``n`` seeds it handed out, which must be the same seeds in the same order with the same
  lease expiry (each was the one the reference had ready there), or ``pop_many(1,
  queue=key, per_queue=0)`` for a queue looked at that handed out none (its upkeep only).
  The reference's own pop with the same arguments, run in a ``scratch`` unit (undone),
  checks that the partitioned pop is a pop one partition could make: as many seeds (without
  ``queues=``); within ``limit`` and ``queues``; stopping at the take that reached one, else
  having looked at every queue the reference looks at; and within each partition, the queues
  looked at in the reference's order (one sequence a prefix of the other): the round robin
  is exact among one partition's queues.
- **reaping** is lazy: ``reap_interval=0`` on both sides (the partitioned side keeps a timer a
  partition); a pop with ``queue=`` reaps only that queue's partition on the partitioned side,
  so both sides ``reap()`` first there.
- **report_many** is atomic per partition: the reference gets one ``report_many`` per
  partition of the partitioned side's leases, each failing or not on its own; the partitioned
  batch raises what the first failing one raised. A batch with a seed without a lease, or
  one seed twice, is refused whole on both sides.
- **claims outlive rolled-back units** (``spi.Partitioned.claim_queues``): a URL first
  written in a transaction that rolled back goes to the queue it claimed when it comes again;
  the test pushes and schedules such a URL with that queue's key on both sides.

Findings (``test_partition_findings.py``) are kept out, each where a comment names it.
``CRAWLSTORE_REVIEW=1`` runs a long hunt (see ``REVIEW`` below).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from crawlstore import Cancelled, Done, Failed, ManualClock, Ready, Retry, Seed, Skipped
from crawlstore.errors import CrawlstoreError
from crawlstore.frontier.core import CoreFrontier
from crawlstore.frontier.protocol import STATES, Reschedule, Upcoming
from crawlstore.frontier.spi import QueueRecord, UrlRecord
from crawlstore.storages._memory import MemoryStorage
from crawlstore.storages._partitioned import PartitionedMemoryStorage

#: Hosts in partitions 0, 1, 3, 2, 2 of 4; queue keys of the "meta" mode in 3, 1, 3, 0, 2.
HOSTS = ("h0.test", "h1.test", "h2.test", "h3.test", "h4.test")
META_KEYS = ("a", "b", "c", "d", "e")
#: A seed's ``meta["queue"]`` (None: its host's queue).
KEYS = (None, *META_KEYS)
QUEUE_KEYS = (*HOSTS, *META_KEYS)
URLS = tuple(f"https://{host}/{n}" for host in HOSTS for n in range(4))
LEASE = 30.0
KINDS = ("done", "unchanged", "failed", "retry", "cancelled", "skipped", "reschedule", "pause")


class Visits:
    """The core's ``Watch``: the keys of the queues its pops look at, in order."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def enqueuing(self, url: UrlRecord) -> None:
        pass

    def maintaining(self, q: QueueRecord) -> None:
        self.keys.append(q.key)


@dataclass
class Held:
    """A seed handed out by both sides: each side's seed under its own lease."""

    p: Seed
    r: Seed

    def side(self, i: int) -> Seed:
        return self.r if i else self.p


def visits(f: CoreFrontier) -> Visits:
    watch = f._watch
    assert isinstance(watch, Visits)
    return watch


def make_report(kind: str, seed: Seed, now: float) -> Any:
    if kind == "done":
        return Done(seed, status=200)
    if kind == "unchanged":
        return Done(seed, unchanged=True, status=304)
    if kind == "failed":
        return Failed(seed, reason="boom", status=500)
    if kind == "retry":
        return Retry(seed)  # no retry facade: failed
    if kind == "cancelled":
        return Cancelled(seed)
    if kind == "skipped":
        return Skipped(seed, reason="robots")
    if kind == "reschedule":
        return Reschedule(seed, now + 3, retried=True)
    return Reschedule(seed, now - 1, kind="pause")


def ready(r: Ready) -> tuple[Seed, float]:
    """A seed handed out, as both sides agree on it: the seed and its lease's expiry."""
    assert r.lease is not None and r.seed.lease == r.lease
    return r.seed, r.lease.expires


#: What ``pop()`` is, as ``pop_many``'s arguments.
ONE: dict[str, Any] = dict(limit=1, per_queue=None, queues=None, queue=None, lease_time=None,
                           max_in_flight=None, remote=False)  # fmt: skip


class _Rollback(Exception):
    pass


# -- strategies ---------------------------------------------------------------------------------

url_ix = st.integers(0, len(URLS) - 1)
key_ix = st.integers(0, len(KEYS) - 1)
queue_key = st.sampled_from(QUEUE_KEYS)
pushed = st.tuples(url_ix, key_ix, st.sampled_from([0, 0, 1, 5]))
push_batches = st.lists(pushed, min_size=1, max_size=6)
pop_args = st.fixed_dictionaries(
    {
        "limit": st.integers(0, 6),
        "per_queue": st.sampled_from([None, None, 0, 1, 2]),
        "queues": st.sampled_from([None, None, 1, 2]),
        "queue": st.one_of(st.none(), st.none(), queue_key),
        "lease_time": st.sampled_from([None, None, 0.0, 5.0, 60.0]),
        "max_in_flight": st.sampled_from([None, None, 1, 2]),
        "remote": st.sampled_from([False, False, True]),
    }
)
report_picks = st.lists(
    st.tuples(st.integers(0, 99), st.sampled_from(KINDS),
              st.sampled_from(["held"] * 5 + ["ended", "no lease"])),
    min_size=1, max_size=5,
)  # fmt: skip
overwrites = st.lists(
    st.tuples(url_ix, key_ix, st.sampled_from([None, -5.0, 0.0, 3.0, 40.0])), min_size=1, max_size=5
)
schedules = st.tuples(url_ix, key_ix, st.sampled_from([-5.0, 0.0, 2.0, 40.0]),
                      st.sampled_from(["retry", "pause", "revisit"]))  # fmt: skip
advances = st.sampled_from([0.5, 1.0, 5.0, 31.0])
#: Each operation of a step (``do_<name>``): its arguments, and how often it comes.
OPERATIONS: dict[str, tuple[st.SearchStrategy[Any], int]] = {
    "push_many": (push_batches, 4),
    "push_new": (push_batches, 1),
    "pop_many": (pop_args, 4),
    "pop": (st.none(), 1),
    "pop_dead": (pop_args, 1),
    "switch_view": (st.none(), 1),
    "report_many": (report_picks, 3),
    "advance": (advances, 2),
    "extend_lease": (st.tuples(st.integers(0, 99), st.sampled_from(["held", "held", "ended"]),
                               st.sampled_from([None, 10.0, 100.0])), 1),
    "end_lease_of": (url_ix, 1),
    "schedule": (schedules, 1),
    "overwrite_many": (overwrites, 2),
    "pause_queue": (st.tuples(url_ix, key_ix, st.sampled_from([-1.0, 3.0, 20.0])), 1),
    "block_queue": (st.tuples(queue_key, st.sampled_from([0, 5, 20])), 1),
    "set_queue": (st.tuples(queue_key, st.sampled_from(["-", None, 0.0, 2.0]),
                            st.sampled_from(["-", None, 1]),
                            st.sampled_from(["-", None, 1, 3])), 1),
    "delete_queue": (queue_key, 1),
    "purge": (st.tuples(st.sampled_from([-100.0, 0.0, 1.0]), st.one_of(st.none(), queue_key)),
              1),
    "reap": (st.none(), 1),
}  # fmt: skip
operations = st.one_of(
    [st.tuples(st.just(name), args) for name, (args, n) in OPERATIONS.items() for _ in range(n)]
)
#: A step of the machine: an operation, a transaction of a few, or (rarely) the crawl deleted
#: or exported and loaded again.
steps = st.one_of(
    operations,
    *[st.tuples(st.just("transaction"),
                st.tuples(st.lists(operations, min_size=1, max_size=5), st.booleans()))] * 4,
    st.tuples(st.just("delete_crawl"), st.none()),
    st.tuples(st.just("export_and_load"), st.booleans()),
)  # fmt: skip


class Differential(RuleBasedStateMachine):
    #: Whether the partitioned side folds pushes from inboxes (``spi.Inboxes``): a push in a
    #: transaction shows once the transaction commits (``capabilities.inboxes``).
    inboxes = False

    def __init__(self) -> None:
        super().__init__()
        self.clocks = (ManualClock(), ManualClock())
        #: Seeds handed out and not reported since (their leases may have ended: reaped, or
        #: rolled back); seeds reported (or whose crawl went), to report again.
        self.held: list[Held] = []
        self.ended: list[Held] = []
        self.mode = "host"

    # -- the two sides ------------------------------------------------------------------------

    @initialize(
        order=st.sampled_from(["fifo", "lifo", "priority"]),
        queues=st.sampled_from(["host", "meta"]),
        delay=st.sampled_from([0.0, 0.0, 1.0]),
        cap=st.sampled_from([None, 2]),
    )
    def open(self, order: str, queues: str, delay: float, cap: int | None) -> None:
        self.mode = queues
        self.policy = dict(order=order, queues=queues, delay=delay, max_in_flight=cap,
                           lease_time=LEASE)  # fmt: skip
        self.open_views(PartitionedMemoryStorage(4, inboxes=self.inboxes), MemoryStorage())

    def open_views(self, partitioned: PartitionedMemoryStorage, memory: MemoryStorage) -> None:
        """The views of each side: two on the partitioned storage (a step may switch them),
        one on the reference; and on each, one whose process is gone (a reused pid)."""
        self.views = [self.core(partitioned, 0), self.core(partitioned, 0)]
        self.p, self.r = self.views[0], self.core(memory, 1)
        self.dead = (self.core(partitioned, 0, dead=True), self.core(memory, 1, dead=True))
        self.exact = True

    def core(self, storage: Any, side: int, *, dead: bool = False) -> CoreFrontier:
        # reap_interval=0: each pop reaps every lease that expired (or whose holder is gone),
        # on both sides (the partitioned side keeps a reap timer a partition)
        f = CoreFrontier(storage, crawl="c", clock=self.clocks[side], reap_interval=0,
                         **self.policy)  # fmt: skip
        f._watch = Visits()
        if dead:  # this pid, another start: its leases are reaped as a dead holder's
            f._owner = (f._owner[0], f._owner[1] + 1)
        return f

    @property
    def sides(self) -> tuple[CoreFrontier, CoreFrontier]:
        return self.p, self.r

    def both(self, call: Callable[[CoreFrontier, int], Any]) -> Any:
        """``call`` on each side: the same result, or the same error."""
        out = []
        for i, f in enumerate(self.sides):
            try:
                out.append(("ok", call(f, i)))
            except CrawlstoreError as exc:
                out.append(("raised", type(exc).__name__))
        assert out[0] == out[1], f"partitioned {out[0]!r} != one partition {out[1]!r}"
        return out[0][1]

    def now(self) -> float:
        assert self.clocks[0]() == self.clocks[1]()
        return self.clocks[0]()

    def partition(self, key: str) -> int:
        storage = self.p.storage
        assert isinstance(storage, PartitionedMemoryStorage)
        return storage.partition_of(storage.crawl("c"), key)  # type: ignore[arg-type]

    def seed(self, u: int, k: int, priority: int = 0) -> Seed:
        seed = Seed.get(URLS[u])
        if KEYS[k] is not None:
            seed = seed.with_meta({"queue": KEYS[k]})
        return seed.with_priority(priority) if priority else seed

    def claimed(self, seed: Seed) -> Seed:
        """``seed``, in the queue that claims its URL on the partitioned side where a unit
        that rolled back left a claim without a record (documented: where the URL goes when
        it comes again)."""
        storage = self.p.storage
        assert isinstance(storage, PartitionedMemoryStorage)
        crawl = storage.crawl("c")
        if self.mode != "meta" or crawl is None:
            return seed
        claim = storage.claimed(crawl, [seed.fingerprint])[0]
        if claim is None or claim == self.p.queue_for(seed):
            return seed
        if self.p.url(seed.fingerprint).state != "unknown":
            return seed
        return seed.with_meta({"queue": claim})

    def pool(self, where: str) -> list[Held]:
        return self.ended if where == "ended" and self.ended else self.held or self.ended

    # -- operations (the rules, and a transaction's steps) ------------------------------------

    def do_push_many(self, items: list[tuple[int, int, int]], new_only: bool = False) -> None:
        seeds = [self.claimed(self.seed(*item)) for item in items]
        if len(seeds) == 1 and not new_only:
            self.both(lambda f, _: f.push(seeds[0]))
        else:
            self.both(lambda f, _: f.push_many(seeds, new_only=new_only))

    def do_push_new(self, items: list[tuple[int, int, int]]) -> None:
        """``push_many(new_only=True)``: every URL the crawl knows is a duplicate."""
        self.do_push_many(items, new_only=True)

    def do_pop_many(self, args: dict[str, Any] | None) -> None:
        """``args``: ``pop_many``'s (None: ``pop()``)."""
        single = args is None
        kwargs = dict(args or ONE)
        limit = kwargs.pop("limit")
        only, per_queue, queues = kwargs["queue"], kwargs["per_queue"], kwargs["queues"]
        if only is not None and limit:  # (the partitioned pop reaps only only's partition)
            self.both(lambda f, _: f.reap())
        p, r = self.sides
        visits(p).keys.clear()
        got: Any = p.pop() if single else p.pop_many(limit, **kwargs)
        looked = list(visits(p).keys)
        if limit and only is None:
            r.reap()  # the partitioned pop reaped every partition
        # the reference's own pop, undone (after the reap: a reap undone would put the leases
        # back in another order, which a later reap of leases expiring together follows)
        scratch = r.storage.scratch
        visits(r).keys.clear()
        own: Any = scratch(r.pop) if single else scratch(lambda: r.pop_many(limit, **kwargs))
        own_visits = list(visits(r).keys)
        if single:
            if not isinstance(got, Ready):
                assert got == own, (got, own)
            got = [got] if isinstance(got, Ready) else []
            own = [own] if isinstance(own, Ready) else []
        # the partitioned pop, queue by queue, on the reference
        assert len(looked) == len(set(looked)), looked
        taken: dict[str, list[Ready]] = {}
        for x in got:
            taken.setdefault(p.url(x.seed.fingerprint).queue, []).append(x)  # type: ignore[arg-type]
        assert set(taken) <= set(looked), (taken, looked)
        r._next_reap = math.inf  # (reaped once, as by one pop: not again between these)
        try:
            for key in looked:
                mine = taken.get(key, [])
                if mine:
                    theirs = r.pop_many(len(mine), queue=key, per_queue=per_queue,
                                        lease_time=kwargs["lease_time"],
                                        max_in_flight=kwargs["max_in_flight"],
                                        remote=kwargs["remote"])  # fmt: skip
                else:
                    theirs = r.pop_many(1, queue=key, per_queue=0)  # its upkeep only
                assert [ready(x) for x in mine] == [ready(x) for x in theirs], (key, mine, theirs)
                self.held += [Held(a.seed, b.seed) for a, b in zip(mine, theirs, strict=True)]
        finally:
            r._next_reap = -math.inf
        # as many as one partition hands out, within the limits ...
        assert len(got) <= limit and (queues is None or len(taken) <= queues), (got, queues)
        if queues is None:
            assert len(got) == len(own), (got, own)
        if len(got) < limit and (queues is None or len(taken) < queues):
            assert set(looked) == set(own_visits), (looked, own_visits)  # ... every due queue
        elif got:  # ... stopping at the take that reached a limit
            assert looked[-1] in taken, (looked, taken)
        # ... and each partition's queues in the reference's order (finding 2: not after a URL
        # moved to a queue of another partition)
        for part in range(4 if self.exact else 0):
            mine_p = [k for k in looked if self.partition(k) == part]
            own_p = [k for k in own_visits if self.partition(k) == part]
            n = min(len(mine_p), len(own_p))
            assert mine_p[:n] == own_p[:n], (part, looked, own_visits)
        del self.held[:-40]

    def do_report_many(self, picks: list[tuple[int, str, str]]) -> None:
        if not (self.held or self.ended):
            return
        now = self.now()
        pairs, chosen = [], []
        for i, kind, where in picks:
            pool = self.pool(where)
            held = pool[i % len(pool)]
            chosen.append(held)
            seeds = (held.p, held.r)
            if where == "no lease":
                seeds = (held.p.with_lease(None), held.r.with_lease(None))
            pairs.append(tuple(make_report(kind, seed, now) for seed in seeds))
        for held in chosen:
            if held in self.held:
                self.held.remove(held)
                self.ended.append(held)
        del self.ended[:-40]
        storage = self.p.storage
        assert isinstance(storage, PartitionedMemoryStorage)
        crawl = storage.crawl("c")
        tokens = [a.seed.lease.token if a.seed.lease is not None else None for a, _ in pairs]
        if crawl is None or None in tokens or len(set(tokens)) < len(tokens):
            # refused before any unit: nothing changes on either side
            if len(pairs) == 1:
                self.both(lambda f, i: f.report(pairs[0][i]))
            else:
                self.both(lambda f, i: f.report_many([pair[i] for pair in pairs]))
            return
        # atomic per partition: one report_many a partition of the leases, on the reference
        groups: dict[int | None, list[tuple[Any, Any]]] = {}
        for pair, token in zip(pairs, tokens, strict=True):
            assert token is not None
            groups.setdefault(storage.lease_partition(crawl, token), []).append(pair)
        errors = []
        for group in groups.values():
            try:
                self.r.report_many([b for _, b in group])
            except CrawlstoreError as exc:
                errors.append(type(exc).__name__)
        raised = None
        try:
            if len(pairs) == 1:
                self.p.report(pairs[0][0])
            else:
                self.p.report_many([a for a, _ in pairs])
        except CrawlstoreError as exc:
            raised = type(exc).__name__
        assert raised == (errors[0] if errors else None), (raised, errors)

    def do_pop(self, _: None) -> None:
        self.do_pop_many(None)

    def do_schedule(self, args: tuple[int, int, float, str]) -> None:
        u, k, offset, kind = args
        seed, at = self.claimed(self.seed(u, k)), self.now() + offset
        self.both(lambda f, _: f.schedule(seed, at, kind=kind))

    def do_overwrite_many(self, items: list[tuple[int, int, float | None]]) -> None:
        now = self.now()
        batch = [(self.seed(u, k), None if at is None else now + at) for u, k, at in items]
        # Finding 1 (test_partition_findings.py): a batch that names a URL twice is applied in
        # runs on the partitioned side, which place a queue again behind the queues of an
        # earlier run; both sides get the runs
        for run in unique_runs(batch):
            for seed, _ in run:  # Finding 2: a move to another partition's queue places the
                # old queue behind the ones the batch wrote in its partition: the order of that
                # partition's queues is not the reference's from now on
                old = self.p.url(seed.fingerprint).queue
                new = self.p.queue_for(seed)
                if old is not None and self.partition(old) != self.partition(new):
                    self.exact = False
            self.both(lambda f, _, run=run: f.overwrite_many(run))

    def do_block_queue(self, args: tuple[str, int]) -> None:
        key, seconds = args
        until = self.now() + seconds if seconds else 0
        self.both(lambda f, _: f.block_queue(key, until))

    def do_delete_queue(self, key: str) -> None:
        self.both(lambda f, _: f.delete_queue(key))

    def do_reap(self, _: None) -> None:
        self.both(lambda f, _: f.reap())

    def do_advance(self, seconds: float) -> None:
        for clock in self.clocks:
            clock.advance(seconds)

    def do_extend_lease(self, args: tuple[int, str, float | None]) -> None:
        i, where, seconds = args
        if self.held or self.ended:
            pool = self.pool(where)
            held = pool[i % len(pool)]
            self.both(lambda f, side: f.extend_lease(held.side(side), seconds).expires)

    def do_end_lease_of(self, u: int) -> None:
        fp = Seed.get(URLS[u]).fingerprint
        self.both(lambda f, _: f.end_lease_of(fp))

    def do_pause_queue(self, args: tuple[int, int, float]) -> None:
        u, k, seconds = args
        seed, until = self.seed(u, k), self.now() + seconds
        self.both(lambda f, _: f.pause_queue(seed, until))

    def do_set_queue(self, args: tuple[str, Any, Any, Any]) -> None:
        key, *values = args
        given = {name: value for name, value in zip(("delay", "max_in_flight", "limit"), values,
                                                     strict=True) if value != "-"}  # fmt: skip
        self.both(lambda f, _: f.set_queue(key, **given))

    def do_purge(self, args: tuple[float, str | None]) -> None:
        seconds, key = args
        before = self.now() + seconds
        self.both(lambda f, _: f.purge(before=before, queue=key))

    # -- rules --------------------------------------------------------------------------------

    @rule(op=steps)
    def step(self, op: tuple[str, Any]) -> None:
        name, args = op
        getattr(self, "do_" + name)(args)

    def do_delete_crawl(self, _: None) -> None:
        self.both(lambda f, _: f.delete_crawl())
        self.exact = True
        self.ended += self.held
        self.held = []

    def do_transaction(self, args: tuple[list[tuple[str, Any]], bool]) -> None:
        """The same steps in a transaction on each side, committed or rolled back."""
        steps, commit = args
        if self.inboxes:  # (a push in a transaction is seen by its other steps on one side
            # only: the sides differ by design there; each step is compared alone instead)
            for name, args in steps:
                getattr(self, "do_" + name)(args)
                self.check()
            return
        try:
            with self.p.transaction(), self.r.transaction():
                for name, args in steps:
                    getattr(self, "do_" + name)(args)
                    self.check()
                if not commit:
                    raise _Rollback
        except _Rollback:
            pass

    def do_export_and_load(self, crossed: bool) -> None:
        """Each side's export, the same but for sequence numbers, loaded into a fresh storage
        of its kind (``crossed``: of the other kind): seeds in flight come back queued, their
        leases end."""
        exports = [list(f.export()) for f in self.sides]
        assert canonical(exports[0]) == canonical(exports[1])
        self.open_views(PartitionedMemoryStorage(4, inboxes=self.inboxes), MemoryStorage())
        for f, records in zip(self.sides, exports[::-1] if crossed else exports, strict=True):
            if records:
                f.load(records)
        self.ended += self.held
        self.held = []

    def do_switch_view(self, _: None) -> None:
        """Another view of the partitioned storage goes on (its caches are its own)."""
        self.p = self.views[self.p is self.views[0]]

    def do_pop_dead(self, args: dict[str, Any]) -> None:
        """A pop by a holder that is gone: its leases are reaped by the next pop of another."""
        live, (self.p, self.r) = self.sides, self.dead
        try:
            self.do_pop_many(args)
        finally:
            self.p, self.r = live

    # -- what must agree after every step ------------------------------------------------------

    @invariant()
    def agree(self) -> None:
        self.check()

    def check(self) -> None:
        p, r = self.sides
        assert p.stats() == r.stats()
        assert len(p) == len(r)
        for state in (None, *STATES):
            assert p.count(state=state) == r.count(state=state), state
        assert p.urls(limit=1000) == r.urls(limit=1000)
        for url in URLS:
            assert p.url(url) == r.url(url)
        queues = p.queues(limit=1000)
        assert queues == r.queues(limit=1000)
        for key in {q.key for q in queues} | {QUEUE_KEYS[len(queues) % len(QUEUE_KEYS)]}:
            assert p.queue(key) == r.queue(key), key
            assert p.urls(queue=key) == r.urls(queue=key), key
            for state in (None, *STATES):
                assert p.count(queue=key, state=state) == r.count(queue=key, state=state)
        # (a time at or before now is "now": a queue ready now keeps its place in the index,
        # and the time it was placed at, as long as it stays ready)
        now = self.now()
        due_p, due_r = (f.next_due() for f in self.sides)
        assert due_p == due_r or (
            due_p is not None and due_r is not None and max(due_p, now) == max(due_r, now)
        ), (due_p, due_r)
        assert snapshot(p) == snapshot(r)
        assert peek(p) == peek(r)


def unique_runs(batch: list[tuple[Seed, float | None]]) -> list[list[tuple[Seed, float | None]]]:
    """The batch in runs that name each URL once, in order."""
    runs: list[list[tuple[Seed, float | None]]] = [[]]
    for item in batch:
        if any(seed.fingerprint == item[0].fingerprint for seed, _ in runs[-1]):
            runs.append([])
        runs[-1].append(item)
    return runs


def snapshot(f: CoreFrontier) -> tuple[Any, ...]:
    """The snapshot's seeds: each queue's queued ones in order; those in flight and scheduled
    as sets."""
    snap = f.snapshot()
    queued: dict[str | None, list[Seed]] = {}
    for seed in snap.queued:
        queued.setdefault(f.url(seed.fingerprint).queue, []).append(seed)
    return (snap.order, queued, Counter(snap.in_flight), Counter(snap.scheduled),
            Counter(snap.revisits))  # fmt: skip


def peek(f: CoreFrontier) -> dict[str, list[tuple[Seed, float | None, str]]]:
    """What ``peek`` says of each queue, in order."""
    out: dict[str, list[tuple[Seed, float | None, str]]] = {}
    up: Upcoming
    for up in f.peek(100):
        out.setdefault(up.queue, []).append((up.seed, up.at, up.why))
    return out


def canonical(records: list[dict[str, Any]]) -> list[str]:
    """An export's records, in an order of their own, without sequence numbers (each
    partition has its own)."""
    out = []
    for record in records:
        record = dict(record)
        if record.get("type") == "url":
            record.pop("seq", None)
            if "order" in record:
                record["order"] = record["order"][:2]  # rank and class
        out.append(repr(_sorted(record)))
    return sorted(out)


def _sorted(value: Any) -> Any:
    """``value`` with every mapping's items in key order."""
    if isinstance(value, dict):
        return sorted((k, _sorted(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_sorted(v) for v in value]
    return value


#: A few seconds by default; ``CRAWLSTORE_REVIEW=1``: a long hunt (``CRAWLSTORE_DIFF_EXAMPLES``
#: and ``CRAWLSTORE_DIFF_STEPS`` set each exactly).
REVIEW = bool(os.environ.get("CRAWLSTORE_REVIEW"))
EXAMPLES = int(os.environ.get("CRAWLSTORE_DIFF_EXAMPLES", 4000 if REVIEW else 50))
STEPS = int(os.environ.get("CRAWLSTORE_DIFF_STEPS", 60 if REVIEW else 40))

TestPartitionedDifferential = Differential.TestCase
if REVIEW:  # (longer than the suite's timeout per test)
    TestPartitionedDifferential = pytest.mark.timeout(0)(TestPartitionedDifferential)
TestPartitionedDifferential.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip


class InboxDifferential(Differential):
    inboxes = True


TestInboxDifferential = InboxDifferential.TestCase
if REVIEW:
    TestInboxDifferential = pytest.mark.timeout(0)(TestInboxDifferential)
TestInboxDifferential.settings = TestPartitionedDifferential.settings
