"""``StoreFrontier``: the persistent frontier storage, with queues, politeness and leases."""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import can_ada
import lmdb

from ..clock import Clock
from ..errors import CorruptRecord, InvalidArgument, NotInFlight
from ..frontier.base import Frontier, StateMap
from ..frontier.protocol import (
    ACCEPTED,
    Admission,
    Backoff,
    Cancelled,
    Empty,
    Pop,
    Ready,
    Reason,
    Report,
    Reschedule,
    Stats,
    Wait,
    check_limit,
    check_reason,
    check_report,
    check_seed,
    check_seeds,
    check_time,
    final_counters,
)
from ..frontier.snapshot import Snapshot
from ..seed import Seed, _set_lease
from . import keys
from .engine import WriteContext, pack, process_alive, unpack
from .records import (
    LEASE,
    new_queue,
    pack_entry,
    read_lease,
    scan,
    unpack_entry,
    unpack_seed,
)
from .state import StoreStateMap

if TYPE_CHECKING:
    from . import Store

__all__ = ["QueueInfo", "StoreFrontier"]

QueueKey = Callable[[Seed], str]
#: How many queues placed by another view's defaults one pop re-places before it gives up.
_REPLACEMENTS = 64
_UNSET: Any = object()


def _check_cap(cap: object) -> int | None:
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise InvalidArgument(f"max_in_flight must be None or an int of at least 1: {cap!r}")
    return cap


def host_key(seed: Seed) -> str:
    """One queue per host (and port, when it is not the default)."""
    host: str = can_ada.parse(seed.url).host
    return host


@dataclass(frozen=True)
class QueueInfo:
    """A queue's persisted state: what it holds and its politeness settings."""

    key: str
    queued: int
    in_flight: int
    last_pop: float
    blocked_until: float
    delay: float | None
    max_in_flight: int | None


class StoreFrontier(Frontier):
    """The frontier of one crawl in a store. Every operation is one write transaction (or
    joins ``store.transaction()``); every facade works on it as on ``InMemFrontier``.

    Seeds are grouped into queues (one by default, per host, or by a key function). Within a
    queue, the crawl's order; across queues, round-robin over the queues that are ready. A
    queue is ready when it holds seeds, is not blocked, its last pop is ``delay`` seconds ago,
    and fewer than ``max_in_flight`` of its seeds are in flight.
    """

    def __init__(
        self,
        store: Store,
        *,
        crawl: str,
        order: str | None,
        queues: str | QueueKey | None,
        delay: float,
        max_in_flight: int | Literal["auto"] | None,
        lease_time: float,
        reap_interval: float,
    ) -> None:
        self._store = store
        self._engine = store._engine
        self._clock = store.clock
        self._one_queue = queues is None or queues == "single"
        if self._one_queue:
            self._queue_key: QueueKey = lambda seed: ""
        elif queues == "host":
            self._queue_key = host_key
            if max_in_flight == "auto":
                max_in_flight = 1
        elif callable(queues):
            self._queue_key = queues
        else:
            raise InvalidArgument(f"queues must be None, 'host' or a function: {queues!r}")
        if max_in_flight == "auto":
            max_in_flight = None
        self.delay = check_time("delay", delay, minimum=0)
        self.max_in_flight = _check_cap(max_in_flight)
        self.lease_time = check_time("lease_time", lease_time, minimum=0)
        self.reap_interval = check_time("reap_interval", reap_interval, minimum=0)
        self._cid, record = store._crawl(crawl, order, frontier=True)  # checked: now create it
        self.crawl = crawl
        self._crawl_key = crawl.encode("utf-8")
        self.order: str = record["order"] or "priority"
        self._prefix = keys.u32(self._cid)
        self._kinds = (self._prefix + b"\x00", self._prefix + b"\x01")
        self._ready_hint = (self._prefix, "ready")  # keys of the transaction's hints
        self._due_hint = (self._prefix, "due")
        self._qids: dict[str, int] = {}
        self._qkeys: dict[int, bytes] = {}
        self._next_check = -math.inf  # when to look over the leases again (see _check_leases)
        self._next_repair = -math.inf  # when to look for queues left out of the ready index
        if not self._engine.readonly:
            self.reap()

    def __repr__(self) -> str:
        return f"StoreFrontier({self.crawl!r}, order={self.order!r})"

    @property
    def clock(self) -> Clock:
        return self._clock

    # -- queues ---------------------------------------------------------------------------------

    def _qid(self, ctx: WriteContext, key: str) -> int:
        qid = self._qids.get(key)
        if qid is not None:
            return qid
        name_key = keys.text_key(self._prefix, key, "a queue key")
        raw = ctx.txn.get(name_key, db=ctx.dbs["qnames"])
        if raw is not None:
            qid = keys.read_u32(raw)
        else:
            crawl = ctx.record("crawls", self._crawl_key)
            qid = crawl["queues"] = crawl.get("queues", 0) + 1
            ctx.touch("crawls", self._crawl_key)
            ctx.txn.put(name_key, keys.u32(qid), db=ctx.dbs["qnames"])
            ctx.put_record("queues", self._qkey(qid), new_queue(key))
        ctx.after_commit(lambda: self._qids.__setitem__(key, qid))
        return qid

    def _qkey(self, qid: int) -> bytes:
        """The queue's key: its record's in the queue table, its seeds' prefix in pending."""
        key = self._qkeys.get(qid)
        if key is None:
            key = self._qkeys[qid] = self._prefix + keys.u32(qid)
        return key

    def _queue(self, ctx: WriteContext, qid: int) -> dict[str, Any]:
        q = ctx.record("queues", self._qkey(qid))
        if not isinstance(q, dict):
            raise CorruptRecord(f"queue {qid} of crawl {self.crawl!r} is missing or malformed")
        return q

    def _ready_at(self, q: dict[str, Any]) -> float | None:
        """When the queue may be popped next; None when it is empty or at its cap."""
        cap = q["cap"] if q["cap"] is not None else self.max_in_flight
        if q["n"] <= 0 or (cap is not None and q["f"] >= cap):
            return None
        delay = q["d"] if q["d"] is not None else self.delay
        return float(max(q["blk"], q["last"] + delay))

    def _place(
        self, ctx: WriteContext, qid: int, q: dict[str, Any], now: float, rotate: bool = False
    ) -> None:
        """Keep the queue's entry in the ready index in line with its state."""
        ctx.touch("queues", self._qkey(qid))
        at = self._ready_at(q)
        old = q["rk"]
        if old is not None and at is not None and not rotate:
            placed = q["ra"]
            if placed == at or (at <= now and placed <= now):
                return  # still right: ready now, or at the same time
        ctx.hints.pop(self._ready_hint, None)  # the index changes
        if old is not None:
            ctx.txn.delete(old, db=ctx.dbs["ready"])
        if at is None:
            q["rk"] = q["ra"] = None
            return
        new = self._prefix + keys.ms_seq(at, ctx.next_seq(self._prefix))
        ctx.txn.put(new, keys.u32(qid), db=ctx.dbs["ready"])
        q["rk"], q["ra"] = new, at

    def _put_pending(
        self, ctx: WriteContext, seed: Seed, cls: int, qid: int | None, entry: bytes | None
    ) -> int:
        """Write ``seed`` (its stored ``entry`` bytes when known) into its queue; the queue id.
        The caller updates the queue record."""
        if qid is None:
            qid = self._qid(ctx, self._queue_key(seed))
        key = self._qkey(qid) + keys.order_key(
            self.order, seed.priority, cls, ctx.next_seq(self._prefix)
        )
        ctx.txn.put(key, entry or pack_entry(seed), db=ctx.dbs["pending"])
        return qid

    def _enqueue(
        self, ctx: WriteContext, seed: Seed, cls: int, qid: int | None = None,
        entry: bytes | None = None,
    ) -> None:  # fmt: skip
        """Queue ``seed`` as class ``cls`` (0: coming back, 1: pushed)."""
        qid = self._put_pending(ctx, seed, cls, qid, entry)
        q = self._queue(ctx, qid)
        q["n"] += 1
        self._place(ctx, qid, q, self._clock())

    # -- the protocol ---------------------------------------------------------------------------

    def push(self, seed: Seed) -> Admission:
        check_seed(seed)

        def op(ctx: WriteContext) -> Admission:
            self._enqueue(ctx, seed, 1)
            counters = ctx.counters(self._prefix)
            counters["admitted"] += 1
            counters["queued"] += 1
            return ACCEPTED

        return self._engine.run(op)

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        seeds = check_seeds(seeds)

        def op(ctx: WriteContext) -> list[Admission]:
            added: Counter[int] = Counter()
            for seed in seeds:
                added[self._put_pending(ctx, seed, 1, None, None)] += 1
            now = self._clock()
            for qid, count in added.items():
                q = self._queue(ctx, qid)
                q["n"] += count
                self._place(ctx, qid, q, now)
            counters = ctx.counters(self._prefix)
            counters["admitted"] += len(seeds)
            counters["queued"] += len(seeds)
            return [ACCEPTED] * len(seeds)

        return self._engine.run(op)

    def refuse(self, seed: Seed, reason: Reason) -> Admission:
        name = "refused:" + check_reason(reason).value

        def op(ctx: WriteContext) -> None:
            ctx.counters(self._prefix)[name] += 1

        self._engine.run(op)
        return Admission(reason)

    def schedule(self, seed: Seed, at: float, *, revisit: bool = False) -> None:
        check_seed(seed)
        check_time("at", at)
        self._engine.run(lambda ctx: self._schedule(ctx, seed, at, revisit))

    def _due_key(self, kind: int, at: float, seq: int) -> bytes:
        """Due entries by kind (0: retries and parked seeds, 1: revisits), then time."""
        return self._kinds[kind] + keys.ms_seq(at, seq)

    def _schedule(self, ctx: WriteContext, seed: Seed, at: float, revisit: bool = False) -> None:
        fp = seed.fingerprint
        skey = self._prefix + fp
        raw = ctx.txn.get(skey, db=ctx.dbs["schedule"])
        counters = ctx.counters(self._prefix)
        if raw is not None:
            old_at, old_seq, _, old_kind = unpack("schedule", skey, raw)
            ctx.txn.delete(self._due_key(old_kind, old_at, old_seq), db=ctx.dbs["due"])
            counters["revisits"] -= old_kind
        else:
            counters["scheduled"] += 1
        counters["revisits"] += revisit
        seq = ctx.next_seq(self._prefix)
        ctx.txn.put(skey, pack([at, seq, seed.to_record(), int(revisit)]), db=ctx.dbs["schedule"])
        ctx.txn.put(self._due_key(revisit, at, seq), fp, db=ctx.dbs["due"])
        if at < ctx.hints.get(self._due_hint, -math.inf):
            ctx.hints[self._due_hint] = at  # a due time earlier than the transaction knew of

    def next_revisit(self) -> float | None:
        def read(txn: lmdb.Transaction) -> float | None:
            return self._next_due(txn, kinds=(1,))

        ctx = self._engine.current
        return read(ctx.txn) if ctx is not None else self._engine.read(read)

    def pop(self) -> Pop:
        return self._engine.run(self._pop)

    def _pop(self, ctx: WriteContext) -> Pop:
        now = self._clock()
        self._maintain(ctx, now)
        ready = ctx.hints.get(self._ready_hint)
        if ready is not None:  # this transaction found the only ready queue, still so?
            qid, q, until = ready
            if now < until and q["rk"] is not None and q["ra"] <= now:
                return Ready(self._take(ctx, qid, q, now, False))
        cursor = ctx.cursor("ready")
        for _ in range(_REPLACEMENTS):
            if not (cursor.set_range(self._prefix) and cursor.key()[:4] == self._prefix):
                break
            qid = keys.read_u32(cursor.value())
            q = self._queue(ctx, qid)
            at = self._ready_at(q)
            if at is None or (at > now and keys.read_u64(cursor.key(), 4) <= keys.ms(now)):
                # placed by a view with other defaults (delay, cap): place it by ours, go on
                self._place(ctx, qid, q, now, rotate=True)
                continue
            if at <= now:
                other = math.inf  # when the next queue in the index is ready
                if cursor.next() and cursor.key()[:4] == self._prefix:
                    other = keys.read_u64(cursor.key(), 4) / 1000
                rotate = other <= now
                seed = self._take(ctx, qid, q, now, rotate)
                if not rotate:
                    ctx.hints[self._ready_hint] = (qid, q, other)
                return Ready(seed)
            return Wait(min(at, self._next_due(ctx.txn) or at))
        else:
            return Wait(now)  # many queues placed by other defaults: look again at once
        counters = ctx.counters(self._prefix)
        if counters["scheduled"] > counters["revisits"]:  # retries or parked seeds to wait for
            return Wait(self._next_due(ctx.txn) or now)
        if counters["queued"] > 0:  # every queue with seeds is at its cap...
            if now >= self._next_repair and self._repair(ctx, now):
                return self._pop(ctx)  # ...or was left out by a view with other defaults
            return Wait(self._earliest_expiry(ctx) or now + self.lease_time)
        return Empty  # nothing, or only revisits: revisit() waits for those

    def _repair(self, ctx: WriteContext, now: float) -> int:
        """Put back in the ready index the queues this view's defaults find ready (a view with
        other defaults, such as a lower cap, may have taken them out); at most once every
        ``reap_interval``. How many it put back."""
        self._next_repair = now + self.reap_interval
        placed = 0
        for key, _ in scan(ctx.txn, ctx.dbs["queues"], self._prefix):
            if len(key) == 8:
                qid = keys.read_u32(key, 4)
                q = self._queue(ctx, qid)
                if q["rk"] is None and self._ready_at(q) is not None:
                    self._place(ctx, qid, q, now)
                    placed += 1
        return placed

    def _take(
        self, ctx: WriteContext, qid: int, q: dict[str, Any], now: float, rotate: bool
    ) -> Seed:
        cursor = ctx.cursor("pending")
        qprefix = self._qkey(qid)
        if not (cursor.set_range(qprefix) and cursor.key()[:8] == qprefix):
            raise CorruptRecord(f"queue {q['k']!r} counts {q['n']} seeds but holds none")
        key, entry = cursor.item()
        seed = unpack_entry(key, entry)
        cursor.delete()
        q["n"] -= 1
        q["f"] += 1
        q["last"] = now
        self._place(ctx, qid, q, now, rotate=rotate)
        expires = now + self.lease_time
        lease_key = self._prefix + seed.fingerprint + keys.u64(ctx.next_seq(self._prefix))
        lease = LEASE.pack(qid, expires, *self._engine.owner) + entry
        ctx.txn.put(lease_key, lease, db=ctx.dbs["leases"])
        _set_lease(seed, lease_key)  # a popped seed carries its lease's key
        if expires < self._next_check:
            self._next_check = expires
        counters = ctx.counters(self._prefix)
        counters["popped"] += 1
        counters["queued"] -= 1
        counters["in_flight"] += 1
        return seed

    def pop_many(self, limit: int) -> list[Seed]:
        check_limit(limit)
        return self._engine.run(lambda ctx: self._pop_many(ctx, limit))

    def _pop_many(self, ctx: WriteContext, limit: int) -> list[Seed]:
        """Pops; when one queue is the only ready one, many seeds in one sweep of it."""
        seeds: list[Seed] = []
        while len(seeds) < limit:
            popped = self._pop(ctx)
            if not isinstance(popped, Ready):
                break
            seeds.append(popped.seed)
            ready = ctx.hints.get(self._ready_hint)
            if ready is not None and len(seeds) < limit:
                qid, q, until = ready
                seeds.extend(self._sweep(ctx, qid, q, until, limit - len(seeds)))
        return seeds

    def _sweep(
        self, ctx: WriteContext, qid: int, q: dict[str, Any], until: float, limit: int
    ) -> list[Seed]:
        """Take up to ``limit`` seeds of the only ready queue, in order, in one cursor pass."""
        now = self._clock()
        if not (now < until and q["rk"] is not None and q["ra"] <= now):
            return []
        cap = q["cap"] if q["cap"] is not None else self.max_in_flight
        delay = q["d"] if q["d"] is not None else self.delay
        room = min(limit, q["n"], (cap - q["f"]) if cap is not None else limit)
        if delay > 0 or room <= 0:
            return []
        cursor = ctx.cursor("pending")
        qprefix = self._qkey(qid)
        if not (cursor.set_range(qprefix) and cursor.key()[:8] == qprefix):
            raise CorruptRecord(f"queue {q['k']!r} counts {q['n']} seeds but holds none")
        expires = now + self.lease_time
        header = LEASE.pack(qid, expires, *self._engine.owner)
        put, leases, item, delete = ctx.txn.put, ctx.dbs["leases"], cursor.item, cursor.delete
        prefix, counters = self._prefix, ctx.counters(self._prefix)
        seq = counters["seq"]
        seeds: list[Seed] = []
        try:
            for _ in range(room):
                key, entry = item()
                seed = unpack_entry(key, entry)
                delete()  # moves to the next entry
                seq += 1
                lease_key = prefix + seed.fingerprint + keys.u64(seq)
                put(lease_key, header + entry, db=leases)
                _set_lease(seed, lease_key)
                seeds.append(seed)
        finally:  # the books match what was taken, even when a record proved corrupt
            taken = len(seeds)
            counters["seq"] = seq
            q["n"] -= taken
            q["f"] += taken
            q["last"] = now
            self._place(ctx, qid, q, now)
            self._next_check = min(self._next_check, expires)
            counters["popped"] += taken
            counters["queued"] -= taken
            counters["in_flight"] += taken
        return seeds

    def report(self, report: Report) -> None:
        check_report(report)
        if isinstance(report, Backoff):
            return  # pauses need tag_backoff()
        self._engine.run(lambda ctx: self._report(ctx, report))

    def report_many(self, reports: Iterable[Report]) -> None:
        batch = list(reports)  # a retried transaction (the map grew) reads it again
        for report in batch:
            check_report(report)
        self._engine.run(lambda ctx: self._report_many(ctx, batch))

    def _report_many(self, ctx: WriteContext, reports: Iterable[Report]) -> None:
        """Final reports end their leases one by one (counts always match the leases); the
        queues they touched are put back in the ready index once, even if a report fails."""
        touched: dict[int, dict[str, Any]] = {}
        counters = ctx.counters(self._prefix)
        delete, leases = ctx.txn.delete, ctx.dbs["leases"]
        try:
            for report in reports:
                if isinstance(report, Backoff):
                    continue
                names = final_counters(report)
                if not names:  # Cancelled, Reschedule: one at a time
                    self._report(ctx, report)
                    continue
                found = self._find_lease(ctx, report.seed)
                if found is None:
                    raise NotInFlight(f"seed is not in flight in crawl {self.crawl!r}: {report!r}")
                qid = read_lease(*found)[0]
                delete(found[0], db=leases)
                q = touched.get(qid) or touched.setdefault(qid, self._queue(ctx, qid))
                q["f"] -= 1
                counters["in_flight"] -= 1
                for name in names:
                    counters[name] += 1
        finally:
            now = self._clock()
            for qid, q in touched.items():
                self._place(ctx, qid, q, now)

    def _report(self, ctx: WriteContext, report: Report) -> None:
        assert not isinstance(report, Backoff)
        seed = report.seed
        qid, _ = self._end_lease(ctx, seed)
        counters = ctx.counters(self._prefix)
        names = final_counters(report)
        if names:  # Done, Failed, Skipped (and a Retry nobody took): the seed leaves
            for name in names:
                counters[name] += 1
        elif isinstance(report, Cancelled):
            self._enqueue(ctx, seed, 0, qid)
            counters["cancelled"] += 1
            counters["queued"] += 1
        elif isinstance(report, Reschedule):
            self._schedule(ctx, seed, report.at)
            if report.retried:
                counters["retried"] += 1

    def _find_lease(self, ctx: WriteContext, seed: Seed) -> tuple[bytes, bytes] | None:
        """The seed's lease: the very one it was handed out under when it carries it (a seed
        that crossed a process boundary does not), else one of its fingerprint's."""
        token = seed._lease
        if token is not None and token[:4] == self._prefix:
            raw = ctx.txn.get(token, db=ctx.dbs["leases"])
            return (token, bytes(raw)) if raw is not None else None
        cursor = ctx.cursor("leases")
        prefix = self._prefix + seed.fingerprint
        if cursor.set_range(prefix) and cursor.key()[:20] == prefix:
            return bytes(cursor.key()), bytes(cursor.value())
        return None

    def _end_lease(self, ctx: WriteContext, seed: Seed) -> tuple[int, bytes]:
        """Remove the seed's lease (one of them, when the same page is out twice)."""
        found = self._find_lease(ctx, seed)
        if found is None:
            raise NotInFlight(f"seed is not in flight in crawl {self.crawl!r}: {seed!r}")
        return self._drop_lease(ctx, *found)

    def _drop_lease(self, ctx: WriteContext, key: bytes, lease: bytes) -> tuple[int, bytes]:
        """Delete a lease; its queue id and its stored entry."""
        qid = read_lease(key, lease)[0]
        ctx.txn.delete(key, db=ctx.dbs["leases"])
        q = self._queue(ctx, qid)
        q["f"] -= 1
        self._place(ctx, qid, q, self._clock())
        ctx.counters(self._prefix)["in_flight"] -= 1
        return qid, lease[LEASE.size :]

    def _requeue(self, ctx: WriteContext, key: bytes, lease: bytes) -> None:
        """A lease that ended without a report: its seed goes back to the front of its queue."""
        qid, entry = self._drop_lease(ctx, key, lease)
        self._enqueue(ctx, unpack_entry(key, entry), 0, qid, entry)
        counters = ctx.counters(self._prefix)
        counters["queued"] += 1
        counters["requeued"] += 1

    def extend_lease(self, seed: Seed, seconds: float | None = None) -> None:
        """Keep a slow seed leased ``seconds`` (default ``lease_time``) from now."""
        check_seed(seed)
        if seconds is not None:
            check_time("seconds", seconds, minimum=0)

        def op(ctx: WriteContext) -> None:
            found = self._find_lease(ctx, seed)
            if found is None:
                raise NotInFlight(f"seed is not in flight in crawl {self.crawl!r}: {seed!r}")
            key, lease = found
            qid, _, pid, start = read_lease(key, lease)
            expires = self._clock() + (self.lease_time if seconds is None else seconds)
            header = LEASE.pack(qid, expires, pid, start)
            ctx.txn.put(key, header + lease[LEASE.size :], db=ctx.dbs["leases"])
            self._next_check = min(self._next_check, expires)

        self._engine.run(op)

    # -- upkeep ---------------------------------------------------------------------------------

    def _maintain(self, ctx: WriteContext, now: float) -> None:
        """Release due schedules; when it is time, leases that expired or whose process is gone.

        The earliest due time is cached for the transaction, so a grouped transaction of pops
        looks at the schedule only when something may be due.
        """
        hints = ctx.hints
        if hints.get(self._due_hint, now) <= now:
            hints[self._due_hint] = self._release_due(ctx, now)
        if now >= self._next_check:
            self._check_leases(ctx, now)

    def _release_due(self, ctx: WriteContext, now: float) -> float:
        """Queue the scheduled seeds that are due; the next due time (a lower bound)."""
        cursor = ctx.cursor("due")
        now_ms = keys.ms(now)
        earliest = math.inf
        for kind in self._kinds:
            while cursor.set_range(kind) and cursor.key()[:5] == kind:
                due_ms = keys.read_u64(cursor.key(), 5)
                if due_ms > now_ms:
                    earliest = min(earliest, due_ms / 1000)
                    break
                fp = bytes(cursor.value())
                cursor.delete()
                skey = self._prefix + fp
                raw = ctx.txn.pop(skey, db=ctx.dbs["schedule"])
                if raw is None:
                    raise CorruptRecord(f"due entry without a schedule: {skey.hex()}")
                _, _, record, revisit = unpack("schedule", skey, raw)
                self._enqueue(ctx, unpack_seed("schedule", skey, record, fp), 0)
                counters = ctx.counters(self._prefix)
                counters["scheduled"] -= 1
                counters["revisits"] -= revisit
                counters["queued"] += 1
        return earliest

    def reap(self) -> int:
        """Queue again every seed whose lease expired or whose process is gone; how many."""
        return self._engine.run(lambda ctx: self._check_leases(ctx, self._clock()))

    def _check_leases(self, ctx: WriteContext, now: float) -> int:
        """Look over the crawl's leases (seeds in flight: a small table) and queue again those
        that expired or whose process is gone. Runs every ``reap_interval`` seconds, and
        sooner when a lease this process knows of expires."""
        alive: dict[tuple[int, int], bool] = {}
        ended = []
        earliest = math.inf
        for key, raw in scan(ctx.txn, ctx.dbs["leases"], self._prefix):
            _, expires, pid, start = read_lease(key, raw)
            owner = (pid, start)
            if owner not in alive:
                alive[owner] = owner == self._engine.owner or process_alive(*owner)
            if expires <= now or not alive[owner]:
                ended.append((key, raw))
            else:
                earliest = min(earliest, expires)
        for key, raw in ended:
            self._requeue(ctx, key, raw)
        self._next_check = min(now + self.reap_interval, earliest)
        return len(ended)

    def _earliest_expiry(self, ctx: WriteContext) -> float | None:
        times = [read_lease(k, v)[1] for k, v in scan(ctx.txn, ctx.dbs["leases"], self._prefix)]
        return min(times, default=None)

    def _next_due(self, txn: lmdb.Transaction, kinds: tuple[int, ...] = (0, 1)) -> float | None:
        """The earliest due time among schedules of these kinds."""
        cursor = txn.cursor(db=self._engine.dbs["due"])
        times = []
        for kind in kinds:
            prefix = self._kinds[kind]
            if cursor.set_range(prefix) and cursor.key()[:5] == prefix:
                skey = self._prefix + bytes(cursor.value())
                times.append(
                    float(
                        unpack("schedule", skey, txn.get(skey, db=self._engine.dbs["schedule"]))[0]
                    )
                )
        return min(times, default=None)

    # -- politeness -----------------------------------------------------------------------------

    def set_queue(
        self, key: str, *, delay: float | None = _UNSET, max_in_flight: int | None = _UNSET
    ) -> None:
        """Override the default delay or in-flight cap of one queue (None: the default again)."""
        if delay is not _UNSET and delay is not None:
            check_time("delay", delay, minimum=0)
        if max_in_flight is not _UNSET:
            _check_cap(max_in_flight)

        def op(ctx: WriteContext) -> None:
            qid = self._qid(ctx, key)
            q = self._queue(ctx, qid)
            if delay is not _UNSET:
                q["d"] = delay
            if max_in_flight is not _UNSET:
                q["cap"] = max_in_flight
            self._place(ctx, qid, q, self._clock(), rotate=True)

        self._engine.run(op)

    def block_queue(self, key: str, until: float) -> None:
        """Pop nothing from this queue before ``until`` (epoch seconds)."""
        check_time("until", until)

        def op(ctx: WriteContext) -> None:
            qid = self._qid(ctx, key)
            q = self._queue(ctx, qid)
            q["blk"] = until
            self._place(ctx, qid, q, self._clock(), rotate=True)

        self._engine.run(op)

    def pause_queue(self, seed: Seed, until: float) -> bool:
        """Block the queue of ``seed`` until ``until`` (a block already longer stays); False,
        and nothing paused, when the crawl's seeds are in one queue."""
        check_seed(seed)
        check_time("until", until)
        if self._one_queue:
            return False
        key = self._queue_key(seed)

        def op(ctx: WriteContext) -> None:
            qid = self._qid(ctx, key)
            q = self._queue(ctx, qid)
            if until > q["blk"]:
                q["blk"] = until
                self._place(ctx, qid, q, self._clock(), rotate=True)

        self._engine.run(op)
        return True

    def queue(self, key: str) -> QueueInfo | None:
        """The state of the queue named ``key``; None when there is none."""

        def read(txn: lmdb.Transaction) -> QueueInfo | None:
            raw = txn.get(
                keys.text_key(self._prefix, key, "a queue key"), db=self._engine.dbs["qnames"]
            )
            if raw is None:
                return None
            qkey = self._prefix + bytes(raw)
            q = unpack("queues", qkey, txn.get(qkey, db=self._engine.dbs["queues"]))
            return QueueInfo(q["k"], q["n"], q["f"], q["last"], q["blk"], q["d"], q["cap"])

        return self._engine.read(read)

    def queue_for(self, seed: Seed) -> str:
        """The key of the queue ``seed`` goes to."""
        return self._queue_key(seed)

    # -- views ----------------------------------------------------------------------------------

    def state(self, namespace: str) -> StateMap:
        return StoreStateMap(self._engine, self._prefix, namespace)

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        return self._store.transaction()

    def stats(self) -> Stats:
        c = self._engine.read_counters(self._prefix)
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
        c = self._engine.read_counters(self._prefix)
        return c.get("queued", 0) + c.get("in_flight", 0) + c.get("scheduled", 0)

    def snapshot(self) -> Snapshot:
        def read(txn: lmdb.Transaction) -> Snapshot:
            dbs = self._engine.dbs
            queued = sorted(
                (key[8:], unpack_entry(key, raw))
                for key, raw in scan(txn, dbs["pending"], self._prefix)
            )
            in_flight = [
                unpack_entry(key, raw[LEASE.size :])
                for key, raw in scan(txn, dbs["leases"], self._prefix)
            ]
            scheduled = []
            for key, raw in scan(txn, dbs["schedule"], self._prefix):
                at, seq, record, revisit = unpack("schedule", key, raw)
                seed = unpack_seed("schedule", key, record, key[4:20])
                scheduled.append((at, seq, seed, revisit))
            scheduled.sort(key=lambda e: (e[0], e[1]))
            return Snapshot(
                self.order,
                queued=tuple(seed for _, seed in queued),
                in_flight=tuple(in_flight),
                scheduled=tuple((at, seed) for at, _, seed, r in scheduled if not r),
                revisits=tuple((at, seed) for at, _, seed, r in scheduled if r),
            )

        return self._engine.read(read)
