"""``PartitionedRedisStorage``: a store on Redis whose buckets commit alone (format 2).

A crawl's partitions are its buckets. A queue, its entries, leases and schedule, the records
of its URLs, and the totals, sequence and index of the bucket's queues all live in the bucket
of the queue's key, one slot: a unit on a bucket (``run_in``) reads it through a cache of its
own and commits with one compare-and-set on the bucket's version (``bucket.py``), so units on
two buckets never wait on each other, and a unit that read a bucket another one changed since
writes nothing and runs again. No lock is held while a unit runs: a paused client's commit
fails, it never overwrites.

What belongs to no bucket keeps today's store-wide unit (``run``): a crawl's record and policy,
the defaults, facades' state, refusal counts, and the views. The URL → queue claims live in
the bucket of the fingerprint (``CLAIMS``, written with ``HSETNX``: the first claim wins), and
a hint of each bucket's next event in the crawl's ``DUE``, in ``DUE_SHARDS`` shards (written
after each commit, swept whole every ``SWEEP`` seconds: a lost or late hint only delays).
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import itertools
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ... import journal
from ...errors import (
    CorruptRecord,
    PartitionError,
    ReadOnlyStore,
    StoreError,
    TransactionConflict,
)
from ...frontier.policy import DEFAULTS, Defaults
from ...frontier.spi import (
    CrawlRecord,
    Entry,
    Failure,
    LeaseRecord,
    Post,
    QueueRecord,
    Slot,
    UrlRecord,
    run_in_turn,
)
from ...url import FINGERPRINT_VERSION, Fingerprint
from .._records import failure_key, ms_up, pack, unpack
from . import indexes, points
from .bucket import BucketUnit, Conflict, WideUnit, commit_all, commit_many
from .keys import (
    CLAIMS,
    CRAWLS,
    DUE,
    ENTRIES,
    EPOCH,
    EVENTS,
    EXPIRIES,
    INBOX,
    LEASES,
    LOADS,
    MEMBERS,
    META,
    POSTED,
    QUEUE_KEYS,
    QUEUES,
    SCHEDULE,
    TOTALS,
    URLS,
    VERSION,
    WAKES,
    WIDE_LOCK,
)
from .routed import RoutedUnit
from .server import Server
from .storage import FORMAT_VERSION, RedisStorage, unpack_record
from .unit import Cache, CachedUnit, Unit

__all__ = ["INDEXLESS_FORMAT", "PARTITIONED_FORMAT", "PartitionedRedisStorage"]

_T = TypeVar("_T")
#: The format of a store whose buckets commit alone (with the crawls' bounded indexes; format
#: 2 had none, and migrates in place: ``migrate.py``).
PARTITIONED_FORMAT = 3
INDEXLESS_FORMAT = 2
#: Seconds between two sweeps of every bucket's next event into the hints.
SWEEP = 5.0
#: Seconds a bucket unit trusts the crawl record and the defaults it read.
RECORD_TTL = 1.0
#: Times a unit runs again after a conflict before it gives up.
RETRIES = 200
#: Shards of a crawl's index of due buckets (``DUE``), each a slot of its own: a bucket's hint
#: is in shard ``bucket % DUE_SHARDS``, so that no one slot takes every commit's hint.
DUE_SHARDS = 16
#: The score of a bucket with nothing due at any time.
_NEVER = 2**62


class PartitionedRedisStorage(RedisStorage):
    """The frontier storage of a store on Redis in format 2 (see the module)."""

    format_version = PARTITIONED_FORMAT

    def __init__(self, server: Server, *, readonly: bool = False,
                 fingerprint: int = FINGERPRINT_VERSION, moving: bool = False,
                 older: int | None = None) -> None:  # fmt: skip
        self._scope: bytes | None = None  # the tag of the bucket the unit runs on
        self._dry = False
        self._caches: dict[bytes, Cache] = {}
        self._records: dict[bytes, tuple[float, Any]] = {}
        self._hinted: dict[bytes, int] = {}
        #: Claims to write once the unit commits (a URL saved in a queue new to it), and
        #: those this process made or read (fingerprint -> queue key).
        self._claims_after: list[tuple[bytes, bytes, bytes]] = []
        self._known_claims: dict[bytes, str] = {}
        #: The bucket units a unit over every bucket runs, with their claims, by bucket.
        self._held: dict[bytes, BucketUnit] = {}
        self._routed: RoutedUnit | None = None  # the unit of the transaction over every bucket
        self._held_claims: dict[bytes, list[tuple[bytes, bytes, bytes]]] = {}
        self._swept: dict[int, float] = {}
        self._turns: dict[int, int] = {}  # the bucket each crawl's last pop started at
        #: Units committed with writes, and units that conflicted (each ran again, but a
        #: caller's transaction), since the store was opened: what the benchmarks report.
        self.commits = self.conflicts = 0
        #: The posts of the open transaction, written with its commit: (bucket, field, value).
        self._posting: list[tuple[bytes, bytes, bytes]] = []
        #: Inboxes read ahead (``prefetch``), by bucket: the version they were read at, and
        #: their fields; the refusal fields a unit's ``posted`` read, by bucket.
        self._inboxes: dict[bytes, tuple[bytes, dict[bytes, bytes]]] = {}
        self._refusals: dict[bytes, list[bytes]] = {}
        #: The inbox fields the open units folded, by bucket: not folded twice.
        self._folded: dict[bytes, set[bytes]] = {}
        #: The buckets a pop found due with no post marked (its unit reads no inbox there: a
        #: post it misses marks the bucket again, for the next pop).
        self._quiet: set[bytes] = set()
        self._last_ordinal = 0
        super().__init__(
            server, readonly=readonly, fingerprint=fingerprint, moving=moving, older=older
        )
        self.capabilities = replace(self.capabilities, partitions=self.buckets, inboxes=True)

    def __repr__(self) -> str:
        return f"PartitionedRedisStorage({str(self.server.address)!r})"

    # -- units ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self, *, discard: bool = False) -> Iterator[None]:
        """A unit over every bucket (a transaction). It reads bucket keys from the server, not
        from a cache kept across units. The units on buckets run inside it are held until it
        commits; meanwhile its reads of their buckets go through them (``RoutedUnit``). One
        that raises leaves no trace in any bucket.

        On one server it takes no lock: its reads of keys of no held bucket are checked
        against the store's epoch, and it commits with its held units in one call, all or
        nothing (``commit_all``), or raises ``TransactionConflict`` (``run`` runs it again).
        On a cluster it holds the store's lock, and its held units commit after it, each on
        its bucket (``_commit_held``)."""
        if journal.check_owner(self._owner, self):
            yield  # joined: the outer unit commits
            return
        wide = not self.server.address.cluster
        with self._lock:
            self._cache.clear()
            store: CachedUnit
            if wide:
                store = WideUnit(self.server, self._cache, self.tag + EPOCH)
                store.begin()
            else:
                store = Unit(self.server, self._cache, self.tag, WIDE_LOCK)
                store.begin()
            routed = self._routed = RoutedUnit(store, self._held)
            self._owner, self._unit = journal.owner(), routed
            dry, self._dry = self._dry, discard
            self._posting = []
            self._folded.clear()
            opened = journal.begin(self)  # in-memory state rolls back with the unit
            committed = False
            posted: list[bytes] = []
            try:
                yield
                if discard:
                    store.abort()
                elif self.readonly and (routed.has_writes() or self._posting):
                    raise ReadOnlyStore(f"{self.server.address} was opened read-only")
                else:
                    if store.writes:  # the crawls' records and the defaults may move
                        self._records.clear()
                    if isinstance(store, WideUnit):
                        posts = WideUnit(self.server, Cache(), self.tag + POSTED)
                        posts.begin()
                        posted = self._write_posts(posts)
                        self._commit_wide(store, posts)
                    else:
                        self._check_held()
                        posted = self._write_posts(store)
                        store.commit()
                    committed = True
            except Conflict as exc:
                self.conflicts += 1
                store.abort()
                raise TransactionConflict(
                    f"{exc}: the transaction wrote nothing; run it again"
                ) from exc
            except BaseException:
                if not committed:
                    store.abort()
                raise
            finally:
                self._owner = self._unit = self._routed = None
                self._dry = dry
                self._posting = []
                self._folded.clear()
                if not committed:
                    self._drop_held()
                journal.end(opened, commit=committed)
            self._noted_due(posted)
            self._commit_held()

    def _commit_wide(self, store: WideUnit, posts: WideUnit) -> None:
        """Commit a transaction on one server: its own writes, its posts and its held units',
        at once. The posts take no version (``POSTED`` is written, never read): a post never
        conflicts, and moves no version another unit reads."""
        held, claims = dict(self._held), dict(self._held_claims)
        heads = {tag: self._head_of(unit, tag) for tag, unit in held.items() if unit.writes}
        commit_all(self.server, [store, posts, *held.values()])
        self.commits += 1
        self._held.clear()
        self._held_claims.clear()
        self._hints({tag: (head, claims.get(tag, [])) for tag, head in heads.items()})

    def _write_posts(self, store: CachedUnit) -> list[bytes]:
        """The transaction's posts, into ``store``'s writes (committed before the buckets'
        units it holds: on one server in the same call, on a cluster just before); the
        buckets they reach."""
        tags = list(dict.fromkeys(tag for tag, _, _ in self._posting))
        for tag, field, value in self._posting:
            store.hset(tag + INBOX, field, value)
        for tag in tags:
            store.zadd(_due_key(tag), b"%d" % _tag_parts(tag)[1])
        return tags

    # -- inboxes (``spi.Inboxes``) -------------------------------------------------------------

    def look(self, crawl: CrawlRecord, fps: Sequence[bytes],
             keys: Sequence[str]) -> list[tuple[UrlRecord | None, bool]]:  # fmt: skip
        tags = [self._queue_bucket(crawl, key) for key in keys]
        commands: list[tuple[Any, ...]] = []
        for fp, tag in zip(fps, tags, strict=True):
            commands += [("HGET", tag + URLS, fp), ("HEXISTS", tag + INBOX, fp)]
        replies = self.server.read(commands) if commands else []
        own = {(tag, field) for tag, field, _ in self._posting  # (not those folded since)
               if field not in self._folded.get(tag, ())}  # fmt: skip
        out: list[tuple[UrlRecord | None, bool]] = []
        for i, (fp, tag) in enumerate(zip(fps, tags, strict=True)):
            held = self._held.get(tag)  # (the transaction's own writes there)
            raw = held.hget(tag + URLS, bytes(fp)) if held is not None else replies[2 * i]
            url = None if raw is None else self._url(Fingerprint(fp), raw, tag)
            out.append((url, bool(replies[2 * i + 1]) or (tag, bytes(fp)) in own))
        return out

    def post(self, crawl: CrawlRecord, posts: Sequence[Post], refused: Sequence[str] = ()) -> None:
        if self._scope is not None:
            raise PartitionError("a push posts outside a unit on a bucket")
        entries = [(self._queue_bucket(crawl, post.key), bytes(post.seed.fingerprint),
                    pack([self._ordinal(), post.to_record()])) for post in posts]  # fmt: skip
        for tag, n in Counter(self._queue_bucket(crawl, key) for key in refused).items():
            entries.append((tag, b"~r" + os.urandom(8), b"%d" % n))
        if not entries:
            return
        if self._unit is not None and journal.check_owner(self._owner, self):
            self._posting += entries  # with the transaction's commit
            for tag, field, value in entries:  # posted again after this transaction folded it:
                folded = self._folded.get(tag, set())  # the fold's delete gives way to it
                if field in folded and tag in self._held:
                    folded.discard(field)
                    self._held[tag].hset(tag + INBOX, field, value)
            return
        if self.readonly:
            raise ReadOnlyStore(f"{self.server.address} was opened read-only")
        fields: dict[bytes, list[bytes]] = {}
        for tag, field, value in entries:
            fields.setdefault(tag, []).extend((field, value))
        inboxes = [("HSET", tag + INBOX, *pairs) for tag, pairs in fields.items()]
        due = [_due_hint(tag, 0) for tag in fields]
        if self.server.address.cluster:  # each inbox written before its bucket is due
            self.server.read(inboxes)
            self.server.read(due)
        else:  # (one connection: in order)
            self.server.read(inboxes + due)
        self._replicated([tag + INBOX for tag in fields])
        points.reached(points.POSTED)
        self._noted_due(fields)

    def _replicated(self, keys: Sequence[bytes]) -> None:
        """Strict mode: these keys' writes outside a commit (claims, posts) are on a replica
        of their masters too, as a commit's are when it returns."""
        if keys and self.server.address.strict:
            cluster = self.server.address.cluster
            self.server.wait_replicas({self.server.node_of(k) for k in keys} if cluster else {None})

    def _noted_due(self, tags: Iterable[bytes]) -> None:
        """These buckets were hinted due now (posts there): their inboxes are read, anew."""
        tags = list(tags)
        for tag in tags:
            self._hinted[tag] = 0
        self._read_anew(tags)

    def _read_anew(self, tags: Iterable[bytes]) -> None:
        """The next units on these buckets read their inboxes from the server (posts there
        since the last pop's hints and read-ahead)."""
        for tag in tags:
            self._quiet.discard(tag)
            self._inboxes.pop(tag, None)

    def posted(self, crawl: CrawlRecord) -> tuple[list[Post], int]:
        tag = self._scope
        if tag is None:
            raise PartitionError("an inbox is a bucket's: read it in a unit on one")
        unit = self.unit()
        stash = self._inboxes.pop(tag, None)
        if stash is not None and isinstance(unit, BucketUnit) and stash[0] == unit.version:
            fields = stash[1]
        elif tag in self._quiet:
            self._quiet.discard(tag)
            fields = {}
        else:
            fields = unit.read([("HGETALL", tag + INBOX)])[0]
        folded = self._folded.get(tag, set())
        own = [(f, v) for t, f, v in self._posting if t == tag]  # the transaction's posts
        found = [(f, v) for f, v in [*fields.items(), *own] if f not in folded]
        posts: dict[bytes, tuple[int, Post]] = {}
        refusals: list[bytes] = []
        refused = 0
        for field, value in found:
            if field.startswith(b"~r"):
                refusals.append(field)
                refused += int(value)
            else:
                try:
                    ordinal, record = unpack("inbox", field, value)
                    posts[field] = (int(ordinal), Post.from_record(record))
                except (TypeError, ValueError) as exc:
                    raise CorruptRecord(f"inbox record {field.hex()} of {tag!r} is malformed: "
                                        f"{exc!r}") from None  # fmt: skip
        self._refusals[tag] = refusals
        if posts or refused:
            points.reached(points.FOLDING)
        return [post for _, post in sorted(posts.values(), key=lambda p: p[0])], refused

    def _ordinal(self) -> int:
        """A post's place in its inbox: this process's posts in order, others' by time."""
        self._last_ordinal = max(self._last_ordinal + 1, time.time_ns())
        return self._last_ordinal

    def unpost(self, crawl: CrawlRecord, fps: Sequence[bytes], refused: int) -> None:
        tag = self._scope
        if tag is None:
            raise PartitionError("an inbox is a bucket's: write it in a unit on one")
        unit = self.unit()
        folded = self._folded.setdefault(tag, set())
        for field in [*map(bytes, fps), *self._refusals.pop(tag, [])]:
            unit.hset(tag + INBOX, field, None)
            folded.add(field)

    def posted_partitions(self, crawl: CrawlRecord) -> list[int]:
        live = self._live(crawl)
        found = self.server.read([("EXISTS", self.bucket_tag(crawl, b) + INBOX) for b in live])
        base = int(crawl.ref[0]) * self.buckets
        posted = [b for b, n in zip(live, found, strict=True) if n]
        self._read_anew(self.bucket_tag(crawl, b) for b in posted)
        return [base + b for b in posted]

    def in_transaction(self) -> bool:
        return self._unit is not None and journal.check_owner(self._owner, self)

    def run(self, operation: Callable[[], _T]) -> _T:
        """``operation`` as one transaction, run again while it conflicts (when it is not
        part of an outer one, which conflicts as a whole)."""
        if journal.check_owner(self._owner, self):
            return super().run(operation)
        pause = 0.0005
        for _ in range(RETRIES):
            try:
                return super().run(operation)
            except TransactionConflict:
                time.sleep(random.uniform(0, pause))
                pause = min(pause * 2, 0.05)
        raise StoreError(f"{self.server.address}: a transaction conflicted with other clients' "
                         f"{RETRIES} times")  # fmt: skip

    view = run

    def scratch(self, operation: Callable[[], _T]) -> _T:
        dry, self._dry = self._dry, True
        try:
            return super().scratch(operation)
        finally:
            self._dry = dry

    def prefetch(self, crawl: CrawlRecord, fps: Sequence[bytes], queues: Sequence[str],
                 tokens: Sequence[bytes] = ()) -> None:  # fmt: skip
        """In a unit on a bucket, read ahead there. Outside one (the core, before it runs a
        batch's units on their buckets), warm the caches of every bucket the batch reaches in
        one pipeline: each bucket's version read before and after its keys, kept only when
        the two agree, so that the bucket's unit starts on them and its commit checks them."""
        if self._scope is not None:
            super().prefetch(crawl, fps, queues, tokens)
            return
        unknown = [fp for fp in fps if fp not in self._known_claims]
        for fp, key in zip(unknown, self.claimed(crawl, unknown) if unknown else [], strict=True):
            if key is not None:
                self._known_claims[fp] = key
        fields: dict[bytes, dict[bytes, list[bytes]]] = {}
        sets: dict[bytes, list[bytes]] = {}

        def want(tag: bytes, key: bytes, field: bytes) -> None:
            fields.setdefault(tag, {}).setdefault(key, []).append(field)

        claims = [self._known_claims.get(fp) for fp in fps]
        for key in dict.fromkeys([*queues, *(k for k in claims if k is not None)]):
            tag = self._queue_bucket(crawl, key)
            want(tag, tag + QUEUES, key.encode("utf-8", "surrogatepass"))
            sets.setdefault(tag, []).extend(
                self._qkey(crawl, key, kind) for kind in (ENTRIES, EXPIRIES, SCHEDULE)
            )
        for fp, key in zip(fps, claims, strict=True):
            if key is not None:
                tag = self._queue_bucket(crawl, key)
                want(tag, tag + URLS, bytes(fp))
        for token in tokens:
            bucket = self._token_bucket(token)
            if bucket is not None:
                tag = self.bucket_tag(crawl, bucket)
                want(tag, tag + LEASES, token)
        self._warm(fields, sets)

    def _warm(self, fields: dict[bytes, dict[bytes, list[bytes]]],
              sets: dict[bytes, list[bytes]]) -> None:  # fmt: skip
        """Read these hash fields and sorted sets (and each bucket's totals and index) into
        the buckets' caches, in one pipeline (buckets a transaction holds are left alone)."""
        self._inboxes = {}  # (a stash another read-ahead left: posts since may be missing)
        tags = [t for t in dict.fromkeys([*fields, *sets]) if t not in self._held]
        commands: list[tuple[Any, ...]] = []
        plans: list[tuple[bytes, list[tuple[str, bytes, list[bytes]]]]] = []
        for tag in tags:
            plan: list[tuple[str, bytes, list[bytes]]] = [("H", tag + TOTALS, [])]
            plan += [("F", key, names) for key, names in fields.get(tag, {}).items()]
            index = [tag + kind for kind in (EVENTS, LOADS, WAKES, QUEUE_KEYS)]
            plan += [("Z", key, []) for key in dict.fromkeys([*index, *sets.get(tag, [])])]
            commands.append(("GET", tag + VERSION))
            commands.append(("HGETALL", tag + INBOX))
            for kind, key, names in plan:
                if kind == "H":
                    commands.append(("HGETALL", key))
                elif kind == "F":
                    commands.append(("HMGET", key, *names))
                else:
                    commands.append(CachedUnit.whole_read(key))
            commands.append(("GET", tag + VERSION))
            plans.append((tag, plan))
        if not commands:
            return
        replies = iter(self.server.read(commands))
        for tag, plan in plans:
            before = next(replies) or b""
            inbox = next(replies)
            got = [next(replies) for _ in plan]
            if (next(replies) or b"") != before:
                continue  # a commit came between: the bucket's unit reads for itself
            self._inboxes[tag] = (before, inbox)
            cache = self._caches.get(tag)
            if cache is None:
                cache = self._caches[tag] = Cache()
            if cache.epoch != before or cache.disturbed != self.server.disturbed:
                cache.clear()
                cache.epoch, cache.disturbed = before, self.server.disturbed
            reader = CachedUnit(self.server, cache)
            for (kind, key, names), reply in zip(plan, got, strict=True):
                if kind == "H":
                    cache.fields[key] = dict(reply)
                    cache.whole.add(key)
                elif kind == "F":
                    cache.fields.setdefault(key, {}).update(zip(names, reply, strict=True))
                else:
                    reader.loaded(key, reply)

    def prefetch_fields(self, wanted: dict[bytes, list[bytes]], sets: Sequence[bytes] = ()) -> None:
        if self._scope is not None:  # (over every bucket: each key read when asked for)
            super().prefetch_fields(wanted, sets)

    def _drop_held(self) -> None:
        for unit in self._held.values():
            unit.abort()
        self._held.clear()
        self._held_claims.clear()

    def _check_held(self) -> None:
        """On a cluster, before a transaction commits anything: ``Conflict`` when a bucket it
        holds writes for has moved since it read it (one pipeline), so that such a
        transaction writes nothing and runs again; a move after this check still leaves its
        other buckets committed (``_commit_held``)."""
        units = [u for u in self._held.values() if u.writes and u.version is not None]
        if not units:
            return
        found = self.server.read([("GET", unit.version_key) for unit in units])
        for unit, version in zip(units, found, strict=True):
            unit.check(version or b"")

    def _commit_held(self) -> None:
        """Commit the bucket units a unit over every bucket held, each on its bucket."""
        held, claims = dict(self._held), dict(self._held_claims)
        self._held.clear()
        self._held_claims.clear()
        if not held:
            return
        heads = {tag: self._head_of(unit, tag) for tag, unit in held.items()}
        done = commit_many(self.server, list(held.values()))
        refused = [tag for tag, ok in zip(held, done, strict=True) if not ok]
        self._hints({tag: (heads[tag], claims.get(tag, []))
                     for tag, ok in zip(held, done, strict=True) if ok})  # fmt: skip
        if refused:
            raise StoreError(
                f"{self.server.address}: another client changed bucket(s) "
                f"{', '.join(t.decode() for t in refused)} while this transaction ran: their "
                "writes were not committed, the rest of the transaction was (a transaction on "
                "a store in partitions commits each bucket's share atomically, not the whole)"
            )

    def run_in(self, partition: int, operation: Callable[[], _T]) -> _T:
        tag = self._partition_tag(partition)
        with self._lock:
            if self._unit is not None and journal.check_owner(self._owner, self):
                if self._scope == tag or self._dry:
                    return operation()  # joined
                if self._scope is not None:
                    raise PartitionError(f"a unit on bucket {self._scope!r} cannot open a unit "
                                         f"on {tag!r}")  # fmt: skip
                return self._held_unit(tag, operation)
            return self._bucket_unit(tag, operation)

    def _held_unit(self, tag: bytes, operation: Callable[[], _T]) -> _T:
        """``operation`` on the bucket ``tag`` inside a unit over every bucket, which commits
        it when it commits (see ``_write``)."""
        unit = self._held.get(tag)
        if unit is None:
            cache = self._caches.get(tag)
            if cache is None:
                cache = self._caches[tag] = Cache()
            unit = self._held[tag] = BucketUnit(self.server, cache, tag + VERSION)
            unit.begin()
            self._held_claims[tag] = []
        saved = self._unit, self._scope, self._claims_after
        self._unit, self._scope, self._claims_after = unit, tag, self._held_claims[tag]
        try:
            return operation()
        finally:
            self._unit, self._scope, self._claims_after = saved

    def run_each(self, units: Sequence[tuple[int, Callable[[], _T]]]) -> list[_T]:
        """Each operation in a unit on its bucket, on what the caches hold (the core read
        ahead for them: ``prefetch``), and their commits in one round trip (``commit_many``):
        one that conflicted runs again alone (``run_in``). Inside a unit, or for one bucket
        named twice, one ``run_in`` after another."""
        tags = [self._partition_tag(p) for p, _ in units]
        nested = self._unit is not None and journal.check_owner(self._owner, self)
        if len(units) < 2 or nested or len(set(tags)) < len(tags):
            return run_in_turn(self, units)
        results: list[Any] = [None] * len(units)
        error: BaseException | None = None
        again: list[int] = []
        ran: list[tuple[int, BucketUnit, int, list[tuple[bytes, bytes, bytes]]]] = []
        with self._lock:
            for i, ((_, operation), tag) in enumerate(zip(units, tags, strict=True)):
                unit = self._begun(tag)
                self._folded.pop(tag, None)
                saved = self._owner, self._unit, self._scope, self._claims_after
                self._owner, self._unit, self._scope = journal.owner(), unit, tag
                claims = self._claims_after = []
                # (in-memory state a unit changed: kept once it returned, before its commit:
                # the units the core runs here change none)
                opened = journal.begin(self)
                ok = False
                try:
                    results[i] = operation()
                    if self.readonly and unit.writes:
                        raise ReadOnlyStore(f"{self.server.address} was opened read-only")
                    ran.append((i, unit, self._head(tag), claims))
                    ok = True
                except Conflict:
                    unit.abort()
                    again.append(i)
                except BaseException as exc:  # the others run all the same
                    unit.abort()
                    error = error or exc
                finally:
                    self._owner, self._unit, self._scope, self._claims_after = saved
                    journal.end(opened, commit=ok)
            wrote = [bool(unit.writes) for _, unit, _, _ in ran]
            done = commit_many(self.server, [unit for _, unit, _, _ in ran])
            self.commits += sum(w and ok for w, ok in zip(wrote, done, strict=True))
            hints: dict[bytes, tuple[int, list[tuple[bytes, bytes, bytes]]]] = {}
            for (i, _, head, claims), ok in zip(ran, done, strict=True):
                if ok:
                    hints[tags[i]] = (head, claims)
                else:
                    self.conflicts += 1
                    again.append(i)
            self._hints(hints)
        for i in sorted(again):
            try:
                results[i] = self.run_in(units[i][0], units[i][1])
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error
        return results

    def _begun(self, tag: bytes) -> BucketUnit:
        """A unit on the bucket ``tag``, begun on its cache."""
        cache = self._caches.get(tag)
        if cache is None:
            cache = self._caches[tag] = Cache()
        unit = BucketUnit(self.server, cache, tag + VERSION)
        unit.begin()
        return unit

    def _bucket_unit(self, tag: bytes, operation: Callable[[], _T]) -> _T:
        """``operation`` in a unit on the bucket ``tag``, run again while it conflicts."""
        pause = 0.0005
        for _ in range(RETRIES):
            unit = self._begun(tag)
            self._folded.pop(tag, None)
            saved = self._owner, self._unit, self._scope, self._claims_after
            self._owner, self._unit, self._scope = journal.owner(), unit, tag
            self._claims_after = []
            opened = journal.begin(self)
            committed = False
            try:
                result = operation()
                head = self._head(tag)
                if self.readonly and unit.writes:
                    raise ReadOnlyStore(f"{self.server.address} was opened read-only")
                wrote = bool(unit.writes)
                unit.commit()
                self.commits += wrote
                committed = True
            except Conflict:
                self.conflicts += 1
                self._records.clear()  # (the crawl may be gone: read its record again)
            except BaseException:
                unit.abort()
                raise
            finally:
                claims = self._claims_after
                self._owner, self._unit, self._scope, self._claims_after = saved
                journal.end(opened, commit=committed)
            if committed:
                self._hint(tag, head, claims)
                return result
            time.sleep(random.uniform(0, pause))
            pause = min(pause * 2, 0.05)
        raise StoreError(f"{self.server.address}: a unit on bucket {tag!r} conflicted with "
                         f"other clients' {RETRIES} times")  # fmt: skip

    def _partition_tag(self, partition: int) -> bytes:
        cid, bucket = divmod(partition, self.buckets)
        return b"{%s:%d:%d}" % (self.ns, cid, bucket)

    # -- partitions -----------------------------------------------------------------------------

    def partition_of(self, crawl: CrawlRecord, key: str) -> int:
        return int(crawl.ref[0]) * self.buckets + self._bucket_of(key)

    def partitions(self, crawl: CrawlRecord) -> list[int]:
        base = int(crawl.ref[0]) * self.buckets
        return [base + bucket for bucket in self._live(crawl)]

    def _live(self, crawl: CrawlRecord) -> list[int]:
        """The buckets that ever held a queue: those the hints name (a bucket's first hint is
        written after its first commit; one lost with its client is found by the next sweep)."""
        if time.monotonic() - self._swept.get(int(crawl.ref[0]), -SWEEP) >= SWEEP:
            self._sweep(crawl)
        shards = self.server.read([("ZRANGE", key, 0, -1) for key in self._due_keys(crawl)])
        live = {int(member) for members in shards for member in members}
        cid = int(crawl.ref[0])
        live.update(b for c, b in map(_tag_parts, self._held) if c == cid)  # (not hinted yet)
        return sorted(live)

    def lease_partition(self, crawl: CrawlRecord, token: bytes) -> int | None:
        bucket = self._token_bucket(token)
        return None if bucket is None else int(crawl.ref[0]) * self.buckets + bucket

    def claim_queues(self, crawl: CrawlRecord, fps: Sequence[bytes],
                     keys: Sequence[str]) -> list[str]:  # fmt: skip
        found: list[bytes | None] = [None] * len(fps)
        todo = list(range(len(fps)))
        for _ in range(RETRIES):  # (a claim gone between its HSETNX and HGET is made again:
            commands: list[tuple[Any, ...]] = []  # deleted meanwhile, or lost in a failover)
            for i in todo:
                claims = self.fp_bucket(crawl, fps[i]) + CLAIMS
                commands += [("HSETNX", claims, fps[i], keys[i].encode("utf-8", "surrogatepass")),
                             ("HGET", claims, fps[i])]  # fmt: skip
            replies = self.server.read(commands) if commands else []
            for i, raw in zip(todo, replies[1::2], strict=True):
                found[i] = raw
            todo = [i for i in todo if found[i] is None]
            if not todo:
                break
        else:
            raise StoreError(f"{self.server.address}: the queues of {len(todo)} URLs could "
                             f"not be claimed: their claims vanished {RETRIES} times")  # fmt: skip
        self._replicated([self.fp_bucket(crawl, fp) + CLAIMS for fp in fps])
        out = [raw.decode("utf-8", "surrogatepass") for raw in found if raw is not None]
        self._known_claims.update(zip(fps, out, strict=True))
        if len(self._known_claims) > 100_000:
            self._known_claims.clear()
        return out

    def claimed(self, crawl: CrawlRecord, fps: Sequence[bytes]) -> list[str | None]:
        commands = [("HGET", self.fp_bucket(crawl, fp) + CLAIMS, fp) for fp in fps]
        replies = self.server.read(commands) if commands else []
        return [None if raw is None else raw.decode("utf-8", "surrogatepass") for raw in replies]

    def prefetch_partitions(self, crawl: CrawlRecord, partitions: Sequence[int]) -> None:
        """Each bucket's totals, index and inbox, in one pipeline (``_warm``)."""
        if self._scope is None:
            self._warm({self._partition_tag(p): {} for p in partitions}, {})

    def due_partitions(self, crawl: CrawlRecord, now: float) -> list[int]:
        cid = int(crawl.ref[0])
        if time.monotonic() - self._swept.get(cid, -SWEEP) >= SWEEP:
            self._sweep(crawl)
        shards = self.server.read([("ZRANGE", key, "-inf", ms_up(now), "BYSCORE", "WITHSCORES")
                                   for key in self._due_keys(crawl)])  # fmt: skip
        pairs = [pair for due in shards for pair in _scored(due)]
        buckets = [int(member) for member, _ in pairs]
        # (a post marks its bucket 0: this pop reads those buckets' inboxes only)
        self._quiet = {self.bucket_tag(crawl, int(member)) for member, score in pairs if score}
        for tag, unit in self._held.items():  # this transaction's own, not hinted yet
            owner, bucket = _tag_parts(tag)
            if owner == cid and bucket not in buckets and self._head_of(unit, tag) <= ms_up(now):
                buckets.append(bucket)
        for tag in dict.fromkeys(tag for tag, _, _ in self._posting):  # its posts: due now
            owner, bucket = _tag_parts(tag)
            if owner == cid and bucket not in buckets:
                buckets.append(bucket)
        if not buckets:
            return []
        buckets.sort()  # in turns: from the one after where the last call started
        last = self._turns.get(cid)
        if last is None:
            last = random.randrange(self.buckets)  # (processes start apart)
        start = bisect.bisect_right(buckets, last) % len(buckets)
        self._turns[cid] = buckets[start]
        base = cid * self.buckets
        return [base + b for b in buckets[start:] + buckets[:start]]

    def _due_keys(self, crawl: CrawlRecord) -> list[bytes]:
        """The shards of the crawl's index of due buckets."""
        tag = self.crawl_tag(crawl)
        return [_due_shard(tag, shard) for shard in range(min(DUE_SHARDS, self.buckets))]

    def _sweep(self, crawl: CrawlRecord) -> None:
        """Every bucket's next event into the hints (they are written after each commit: one
        lost with its client, or overtaken, is put right here)."""
        self._swept[int(crawl.ref[0])] = time.monotonic()
        tags = [self.bucket_tag(crawl, b) for b in range(self.buckets)]
        heads = self.server.read([("ZRANGE", tag + EVENTS, "-", "+", "BYLEX", "LIMIT", 0, 1)
                                  for tag in tags])  # fmt: skip
        keys = self.server.read([("EXISTS", tag + QUEUE_KEYS) for tag in tags])
        inboxes = self.server.read([("EXISTS", tag + INBOX) for tag in tags])
        args: dict[bytes, list[Any]] = {}
        for bucket, (tag, head, live, posted) in enumerate(
            zip(tags, heads, keys, inboxes, strict=True)
        ):
            if head or live or posted:
                score = 0 if posted else _event_ms(head[0]) if head else _NEVER
                self._hinted[tag] = score
                args.setdefault(_due_key(tag), []).extend((score, bucket))
        if args:
            self.server.read([("ZADD", key, *pairs) for key, pairs in args.items()])

    def _head(self, tag: bytes) -> int:
        """The ms of the bucket's next event as this unit leaves it (``_NEVER``: none)."""
        return self._head_of(self.unit(), tag)

    @staticmethod
    def _head_of(unit: CachedUnit, tag: bytes) -> int:
        first = unit.zrange(tag + EVENTS, None, None, 1)
        return _event_ms(first[0]) if first else _NEVER

    def _hint(self, tag: bytes, head: int, claims: list[tuple[bytes, bytes, bytes]]) -> None:
        """After a commit: the bucket's hint, where it moved, and the claims of URLs that
        moved to the bucket's queues, in one round trip."""
        self._hints({tag: (head, claims)})

    def _hints(self, done: dict[bytes, tuple[int, list[tuple[bytes, bytes, bytes]]]]) -> None:
        """``_hint`` for several buckets, in one round trip (two on a cluster). A bucket
        whose inbox a post filled since the unit read it stays due now: a post writes its
        inbox, then marks the bucket due; here the hint is written, then the inbox read."""
        commands: list[tuple[Any, ...]] = []
        moved: list[bytes] = []
        for tag, (head, claims) in done.items():
            commands += [("HSET", *claim) for claim in claims]
            if self._hinted.get(tag) != head:
                self._hinted[tag] = head
                commands.append(_due_hint(tag, head))
                moved.append(tag)
        if not commands:
            return
        lengths = [("HLEN", tag + INBOX) for tag in moved]
        if self.server.address.cluster:
            self.server.read(commands)
            filled = self.server.read(lengths) if lengths else []
        else:
            filled = self.server.read(commands + lengths)[len(commands) :]
        self._replicated([claim[0] for _, claims in done.values() for claim in claims])
        due = [tag for tag, n in zip(moved, filled, strict=True) if n]
        if due:
            self.server.read([_due_hint(tag, 0) for tag in due])
            self._noted_due(due)

    # -- where things are ------------------------------------------------------------------------

    def _index_tag(self, crawl: CrawlRecord, key: str | None = None) -> bytes:
        if key is not None:
            return self._checked(self._queue_bucket(crawl, key), f"queue {key!r}")
        if self._scope is None:
            raise PartitionError("the index of due queues is each bucket's: read in a unit on one")
        return self._scope

    def _totals_key(self, crawl: CrawlRecord) -> bytes:
        return (self._scope or self.crawl_tag(crawl)) + TOTALS

    def _url_tag(self, crawl: CrawlRecord, fp: bytes, key: str | None = None) -> bytes:
        if key is not None:
            return self._checked(self._queue_bucket(crawl, key), f"URL {fp.hex()}")
        if self._scope is not None:
            return self._scope  # a unit on a bucket reads the records of its queues
        claimed = self.claimed(crawl, [fp])[0]
        return self._queue_bucket(crawl, claimed) if claimed is not None else self.fp_bucket(
            crawl, fp)  # fmt: skip

    def _checked(self, tag: bytes, what: str) -> bytes:
        if self._scope is not None and tag != self._scope and not self._dry:
            raise PartitionError(f"a unit on bucket {self._scope!r} reached {what}, of {tag!r}")
        return tag

    def _writes(self, crawl: CrawlRecord, key: str) -> None:
        """Refuse a write to the queue ``key``'s bucket outside a unit on it."""
        tag = self._queue_bucket(crawl, key)
        if self._dry:
            return
        if self._scope is None:
            raise PartitionError(f"a unit over every bucket wrote queue {key!r}, of {tag!r}: "
                                 "only a unit on that bucket writes it")  # fmt: skip
        self._checked(tag, f"queue {key!r}")

    # -- what a unit on a bucket reads of the store: kept a second ------------------------------

    def crawl(self, name: str) -> CrawlRecord | None:
        raw = self._store_field(CRAWLS, name.encode(), b"crawl:" + name.encode())
        return None if raw is None else self._crawl_record(name, raw)

    def defaults(self) -> Defaults:
        raw = self._store_field(META, b"defaults", b"defaults")
        return Defaults.from_record(unpack_record(raw)) if raw is not None else DEFAULTS

    def _store_field(self, suffix: bytes, field: bytes, name: bytes) -> bytes | None:
        """A field of the store's own keys: in a transaction over every bucket (a unit on a
        bucket inside one too), as its unit reads it (under the lock, with its writes); else
        as read from the server within the last ``RECORD_TTL`` seconds."""
        if self._routed is not None and journal.check_owner(self._owner, self):
            return self._routed.hget(self.tag + suffix, field)
        known = self._records.get(name)
        if known is None or time.monotonic() - known[0] > RECORD_TTL:
            raw = self.server.read([("HGET", self.tag + suffix, field)])[0]
            known = self._records[name] = (time.monotonic(), raw)
        return known[1]  # type: ignore[no-any-return]

    def save_crawl(self, crawl: CrawlRecord) -> None:
        if self._scope is not None:
            raise PartitionError(f"crawl {crawl.name!r}'s record needs a unit over every bucket")
        self._records.clear()
        super().save_crawl(crawl)

    def delete_crawl(self, crawl: CrawlRecord) -> int:
        self._records.clear()
        self._hinted.clear()
        return super().delete_crawl(crawl)

    # -- totals, sequences and listings over every bucket ----------------------------------------

    def _buckets_read(self, crawl: CrawlRecord, command: Callable[[bytes], tuple[Any, ...]]
                      ) -> list[Any]:  # fmt: skip
        """``command`` on each live bucket, in one pipeline."""
        commands = [command(self.bucket_tag(crawl, b)) for b in self._live(crawl)]
        return self._read(commands) if commands else []

    def _read(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Reads of any bucket: in a transaction over every bucket, through its unit (which
        shows its writes to the buckets it holds); else from the server."""
        if self._unit is not None and self._scope is None:
            return self.unit().read(commands)
        return self.server.read(commands)

    def totals(self, crawl: CrawlRecord) -> dict[str, int]:
        """The crawl's own totals and every bucket's, summed (those of the unit's bucket, or
        the crawl's, as the unit left them)."""
        own = self._scope or self.crawl_tag(crawl)
        tags = [self.crawl_tag(crawl)] + [self.bucket_tag(crawl, b) for b in self._live(crawl)]
        raws = self._read([("HGETALL", tag + TOTALS) for tag in tags if tag != own])
        raws.append(self.unit().hgetall(own + TOTALS))
        out: dict[str, int] = {}
        for raw in raws:
            for name, n in _counts(raw).items():
                out[name] = out.get(name, 0) + n
        return out

    def failures(self, crawl: CrawlRecord, limit: int) -> list[Failure]:
        if self._scope is not None:
            return super().failures(crawl, limit)
        found = self._buckets_read(crawl, lambda tag: indexes.newest(tag + indexes.FAILURES,
                                                                     limit))  # fmt: skip
        every = (indexes.decode(member) for members in found for member in members)
        return heapq.nlargest(limit, every, key=failure_key)

    def revisits_due(self, crawl: CrawlRecord, until: float) -> int:
        if self._scope is not None:
            return super().revisits_due(crawl, until)
        found = self._buckets_read(crawl, lambda tag: indexes.revisits_until(
            tag + indexes.REVISITS, until))  # fmt: skip
        return sum(int(n) for n in found)

    def last_seq(self, crawl: CrawlRecord) -> int:
        if self._scope is not None:
            return super().last_seq(crawl)
        raws = self._buckets_read(crawl, lambda tag: ("HGET", tag + TOTALS, b"~seq"))
        return max([int(raw) for raw in raws if raw is not None], default=0)

    def advance_seq(self, crawl: CrawlRecord, at_least: int) -> None:
        if self._scope is None:
            raise PartitionError("a sequence is a bucket's: advance it in a unit on one")
        super().advance_seq(crawl, at_least)

    def queues(self, crawl: CrawlRecord, after: str | None, limit: int) -> list[QueueRecord]:
        if self._scope is not None:
            return super().queues(crawl, after, limit)
        start = b"-" if after is None else b"(" + after.encode("utf-8", "surrogatepass")
        found = self._buckets_read(crawl, lambda tag: ("ZRANGE", tag + QUEUE_KEYS, start, "+",
                                                       "BYLEX", "LIMIT", 0, limit))  # fmt: skip
        keys = list(itertools.islice(heapq.merge(*found), limit))
        return self._queues_at(crawl, [k.decode("utf-8", "surrogatepass") for k in keys])

    def queue_count(self, crawl: CrawlRecord) -> int:
        return self.totals(crawl).get("queues", 0)

    def due_queues(
        self, crawl: CrawlRecord, now: float, limit: int, below: int | None = None
    ) -> list[QueueRecord]:
        if self._scope is not None:
            return super().due_queues(crawl, now, limit, below)
        found: list[QueueRecord] = []  # a dry run over every bucket: each bucket's, merged
        for b in self._live(crawl):
            self._scope = self.bucket_tag(crawl, b)
            try:
                found += super().due_queues(crawl, now, limit, below)
            finally:
                self._scope = None
        return heapq.nsmallest(limit, found, key=lambda q: q.ref[0])

    def next_event(self, crawl: CrawlRecord) -> float | None:
        if self._scope is not None:
            return super().next_event(crawl)
        heads = self._buckets_read(crawl, lambda tag: ("ZRANGE", tag + EVENTS, "-", "+", "BYLEX",
                                                       "LIMIT", 0, 1))  # fmt: skip
        events = [_event_ms(head[0]) for head in heads if head]
        return min(events) / 1000 if events else None

    def leases(self, crawl: CrawlRecord) -> Iterator[LeaseRecord]:
        if self._scope is None:
            yield from super().leases(crawl)
            return
        for token, raw in sorted(self.unit().hgetall(self._scope + LEASES).items()):
            yield self._lease(token, raw)

    def _walk(
        self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None
    ) -> Iterator[UrlRecord]:
        if queue is not None:
            yield from self._walk_queue(crawl, queue, after)
            return
        if self._scope is not None:
            yield from self._walk_bucket(after)
            return
        # every URL in fingerprint order: the claims, buckets in pipelines of 64, then the
        # records of each bucket's claimed URLs
        first = 0 if after is None else self.fp_index(after)
        for start in range(first, self.buckets, 64):
            buckets = range(start, min(start + 64, self.buckets))
            found = self.server.read([("HGETALL", self.bucket_tag(crawl, b) + CLAIMS)
                                      for b in buckets])  # fmt: skip
            for claims in found:
                yield from self._claimed_urls(crawl, claims, after)

    def _claimed_urls(self, crawl: CrawlRecord, claims: dict[bytes, bytes],
                      after: bytes | None) -> Iterator[UrlRecord]:  # fmt: skip
        """The records of these claimed URLs (of one bucket), in fingerprint order."""
        fps = sorted(fp for fp in claims if after is None or fp > after)
        if not fps:
            return
        tags = [self._queue_bucket(crawl, claims[fp].decode("utf-8", "surrogatepass"))
                for fp in fps]  # fmt: skip
        raws = self._read([("HGET", tag + URLS, fp) for tag, fp in zip(tags, fps, strict=True)])
        for fp, tag, raw in zip(fps, tags, raws, strict=True):
            if raw is not None:  # (a claim whose push was cut short has no record)
                yield self._url(Fingerprint(fp), raw, tag)

    def _walk_queue(self, crawl: CrawlRecord, queue: QueueRecord, after: bytes | None
                    ) -> Iterator[UrlRecord]:  # fmt: skip
        tag = self._queue_bucket(crawl, queue.key)
        members = self._qkey(crawl, queue.key, MEMBERS)
        while True:
            part = self.unit().zrange(members, after, None, 1000)
            self.prefetch_fields({tag + URLS: part})
            for fp in part:
                raw = self.unit().hget(tag + URLS, fp)
                if raw is None:
                    raise CorruptRecord(f"queue {queue.key!r} lists {fp.hex()}, which has no "
                                        "URL record")  # fmt: skip
                yield self._url(Fingerprint(fp), raw, tag)
            if len(part) < 1000:
                return
            after = part[-1]

    def _walk_bucket(self, after: bytes | None) -> Iterator[UrlRecord]:
        assert self._scope is not None
        records = self.unit().hgetall(self._scope + URLS)
        for fp in sorted(records):
            if after is None or fp > after:
                yield self._url(Fingerprint(fp), records[fp], self._scope)

    # -- writes: a bucket's, in a unit on it ----------------------------------------------------

    def save_queue(self, crawl: CrawlRecord, queue: QueueRecord, event: float | None,
                   rotate: bool = False) -> None:  # fmt: skip
        self._writes(crawl, queue.key)
        super().save_queue(crawl, queue, event, rotate)

    def delete_queue(self, crawl: CrawlRecord, queue: QueueRecord) -> int:
        self._writes(crawl, queue.key)
        return super().delete_queue(crawl, queue)

    def enqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry, fp: bytes) -> None:
        self._writes(crawl, queue.key)
        super().enqueue(crawl, queue, order, fp)

    def dequeue(self, crawl: CrawlRecord, queue: QueueRecord, n: int) -> list[bytes]:
        self._writes(crawl, queue.key)
        return super().dequeue(crawl, queue, n)

    def unqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry) -> None:
        self._writes(crawl, queue.key)
        super().unqueue(crawl, queue, order)

    def lease(self, crawl: CrawlRecord, queue: QueueRecord, lease: LeaseRecord) -> None:
        self._writes(crawl, queue.key)
        super().lease(crawl, queue, lease)
        self._known_claims[bytes(lease.fp)] = queue.key  # (its report reads ahead there)

    def extend_lease(self, crawl: CrawlRecord, lease: LeaseRecord, expires: float) -> None:
        self._writes(crawl, lease.queue)
        super().extend_lease(crawl, lease, expires)

    def end_lease(self, crawl: CrawlRecord, lease: LeaseRecord) -> None:
        self._writes(crawl, lease.queue)
        super().end_lease(crawl, lease)

    def schedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot, fp: bytes) -> None:
        self._writes(crawl, queue.key)
        super().schedule(crawl, queue, when, fp)

    def unschedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot) -> None:
        self._writes(crawl, queue.key)
        super().unschedule(crawl, queue, when)

    def due(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[bytes]:
        self._writes(crawl, queue.key)
        return super().due(crawl, queue, now)

    def save_url(self, crawl: CrawlRecord, queue: QueueRecord, url: UrlRecord) -> None:
        self._writes(crawl, queue.key)
        new = url.ref is None
        super().save_url(crawl, queue, url)
        if new and self._known_claims.get(url.fp) != queue.key:  # a URL moved here: claimed
            claim = (self.fp_bucket(crawl, url.fp) + CLAIMS, bytes(url.fp),
                     queue.key.encode("utf-8", "surrogatepass"))  # fmt: skip
            self._claims_after.append(claim)

    def delete_url(self, crawl: CrawlRecord, url: UrlRecord) -> None:
        self._writes(crawl, url.queue)
        super().delete_url(crawl, url)


def _scored(reply: list[Any]) -> list[tuple[bytes, float]]:
    """A ``ZRANGE ... WITHSCORES`` reply as (member, score) pairs (flat, or paired already)."""
    if reply and not isinstance(reply[0], (bytes, str)):
        return [(bytes(m), float(s)) for m, s in reply]
    return [(bytes(m), float(s)) for m, s in zip(reply[::2], reply[1::2], strict=True)]


def _due_hint(tag: bytes, head: int) -> tuple[Any, ...]:
    """The command that hints the bucket ``tag`` due at ``head`` (ms; 0: posts there)."""
    return ("ZADD", _due_key(tag), head, _tag_parts(tag)[1])


def _due_key(tag: bytes) -> bytes:
    """The shard of the crawl's index of due buckets that holds the bucket ``tag``'s hint."""
    return _due_shard(_crawl_tag(tag), _tag_parts(tag)[1] % DUE_SHARDS)


def _due_shard(crawl_tag: bytes, shard: int) -> bytes:
    """The key of a shard of a crawl's index of due buckets: its own hash tag, ``{ns:c:dN}``."""
    return crawl_tag[:-1] + b":d%d}" % shard + DUE


def _crawl_tag(tag: bytes) -> bytes:
    """The crawl's tag (``{ns:c}``) of one of its buckets' (``{ns:c:b}``)."""
    return tag[: tag.rindex(b":")] + b"}"


def _tag_parts(tag: bytes) -> tuple[int, int]:
    """The crawl and the bucket of a bucket's tag (``{ns:c:b}``)."""
    _, cid, bucket = tag[1:-1].rsplit(b":", 2)
    return int(cid), int(bucket)


def _event_ms(member: bytes) -> int:
    """The ms an ``EVENTS`` member begins with."""
    return int.from_bytes(member[:8], "big")


def _counts(raw: dict[bytes, bytes]) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in raw.items() if not k.startswith(b"~")}


assert FORMAT_VERSION < PARTITIONED_FORMAT
