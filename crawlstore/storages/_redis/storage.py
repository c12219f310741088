"""``RedisStorage``: the frontier's storage interface on Redis or a Redis Cluster.

Each crawl's data is spread over its buckets: a queue lives in the bucket its key hashes to, a
URL (its record, its validators, its seen entry) in the bucket of its fingerprint's first
bits. Every key of a bucket has the bucket's hash tag, so a bucket is one slot and moves
between masters whole. The names and layouts of every key are in ``keys.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import mmh3
import msgpack

from ... import journal
from ...errors import (
    CorruptRecord,
    IncompatibleStore,
    NotAStore,
    OlderFormat,
    ReadOnlyStore,
    StoreError,
)
from ...frontier.policy import DEFAULTS, CrawlPolicy, Defaults
from ...frontier.spi import (
    Capabilities,
    CrawlRecord,
    Durability,
    Entry,
    Failure,
    LeaseRecord,
    QueueRecord,
    Slot,
    UnitReader,
    UrlRecord,
    enqueue_each,
    tend_at,
)
from ...url import FINGERPRINT_VERSION, Fingerprint
from .._records import ORDER, decode_url, encode_url, ms_up, pack
from . import indexes
from .file import NoFile
from .keys import (
    CRAWLS,
    ENTRIES,
    ENTRY_FP,
    EVENT_QUEUE,
    EVENTS,
    EXPIRIES,
    EXPIRY_TOKEN,
    FENCE,
    LEASES,
    LOAD_PLACE,
    LOAD_QUEUE,
    LOADS,
    MEMBERS,
    META,
    NOT_A_TOTAL,
    QUEUE_KEYS,
    QUEUE_OWN,
    QUEUES,
    SCHEDULE,
    SCHEDULED_AT,
    SCHEDULED_FP,
    SEQ,
    STATE,
    STATE_NAMES,
    TOTALS,
    URLS,
    WAKE_QUEUE,
    WAKES,
)
from .server import Server
from .unit import Cache, CachedUnit, Unit
from .viewdata import RedisViewData

if TYPE_CHECKING:
    pass

__all__ = ["FORMAT_VERSION", "OtherFormat", "RedisStorage"]

_T = TypeVar("_T")
#: The layout of every key and record; bumped on any incompatible change.
FORMAT_VERSION = 1
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")


def _members(raw_key: bytes, queue: QueueRecord, placed: bytes) -> tuple[bytes, bytes, bytes]:
    """A queue's members of its crawl's ``EVENTS`` (``placed``), ``LOADS`` and ``WAKES`` (b"":
    none), as its record says."""
    if not placed:
        return b"", b"", b""
    at = tend_at(queue)
    wake = b"" if at is None else _U64.pack(ms_up(at)) + raw_key
    return placed, _U32.pack(queue.in_flight) + placed, wake


_AT = struct.Struct(">d")
_FIRST = b"\x00" * 8


def unpack_record(raw: bytes) -> Any:
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


#: The formats of a store on Redis: 1, every unit under one lock; 2, units bucket by bucket;
#: 3, as 2 with the crawls' bounded indexes (recent failures, revisits by the minute, trap
#: prefixes blocked apart).
KNOWN_FORMATS = (1, 2, 3)


#: The field of ``META`` that says a store of format 1 keeps the crawls' bounded indexes.
INDEXED = b"indexed"


class OtherFormat(IncompatibleStore):
    """The namespace holds a store of the other layout (``format``): open it with that one."""

    def __init__(self, message: str, format: int) -> None:
        super().__init__(message)
        self.format = format


class LayoutMove(OlderFormat):
    """A store to move with ``crawlstore migrate`` before it opens: one of format 1 whose URL
    does not ask for format 1 (``partitioned=0``), one of format 2 (no indexes yet), or one
    whose migration began and did not finish."""


class RedisStorage:
    """The frontier storage of a store on Redis: every write unit holds the store's lock and
    commits all its writes at once (see ``unit.py``); several processes on several machines
    may share it."""

    #: The layout this class reads and writes (``meta["format"]``).
    format_version = FORMAT_VERSION

    def __init__(self, server: Server, *, readonly: bool = False,
                 fingerprint: int = FINGERPRINT_VERSION, moving: bool = False,
                 older: int | None = None) -> None:  # fmt: skip
        #: The fingerprint version the store must hold (an older one, for its migration).
        self.fingerprint = fingerprint
        #: Opened by a migration (``migrate.py``), which may find it begun; of the format
        #: ``older`` (a migration in place, to this layout's format).
        self.moving, self.older = moving, older
        self.server = server
        self.readonly = readonly
        address = server.address
        self.ns = address.ns.encode()
        self.tag = b"{" + self.ns + b"}"
        self.capabilities = Capabilities(
            persistent=True,
            atomic_views=True,
            durability="replicated-wait" if address.strict else "replicated-async",
            shared=True,
            local_holders=False,
            snapshot=False,
            default_queues="host",
        )
        self._cache = Cache()
        self._lock = threading.RLock()
        self._owner: journal.Owner | None = None
        self._unit: CachedUnit | None = None
        self.meta = self._open_meta()
        self.buckets = int(self.meta["buckets"])
        self.shift = 16 - (self.buckets.bit_length() - 1)
        #: Each crawl's bucket tags, and the key names of the queues lately used.
        self._tags: dict[int, list[bytes]] = {}
        self._names: dict[tuple[int, str, bytes], bytes] = {}
        #: Leading bytes of a fingerprint its bucket decides.
        self.fp_skip = (self.buckets.bit_length() - 1) // 8
        self.location = str(address)
        self.durability = Durability.FULL if address.strict else Durability.SAFE
        self.file = NoFile(self.location)
        self.view_data = RedisViewData(self)

    def __repr__(self) -> str:
        return f"RedisStorage({str(self.server.address)!r})"

    # -- the store ------------------------------------------------------------------------------

    def close(self) -> None:
        self.server.close()

    def server_clock(self) -> Callable[[], float] | None:
        return self._server_time

    def _server_time(self) -> float:
        (seconds, micros) = self.server.read([("TIME",)])[0]
        return int(seconds) + int(micros) / 1e6

    # -- the store's record ---------------------------------------------------------------------

    def _open_meta(self) -> dict[str, Any]:
        def read() -> dict[str, Any]:
            u = self.unit()
            raw = u.hgetall(self.tag + META)
            if not raw:
                created = time.time()
                meta = {b"app": b"crawlstore", b"format": str(self.format_version).encode(),
                        b"fingerprint": str(FINGERPRINT_VERSION).encode(),
                        b"buckets": str(self.server.address.buckets).encode(),
                        b"created": repr(created).encode(), INDEXED: b"1"}  # fmt: skip
                for field, value in meta.items():
                    u.hset(self.tag + META, field, value)
                raw = meta
            return {k.decode(): v.decode() for k, v in raw.items() if k != b"defaults"}

        meta = self.run(read)
        name = f"{self.server.address}"
        if meta.get("app") != "crawlstore":
            raise NotAStore(f"{name}: the namespace holds keys that are not a crawlstore store")
        if "moving" in meta and not self.moving:
            raise LayoutMove(
                f"{name}: its migration began and has not finished ({meta['moving']}): run "
                f"crawlstore migrate '{name}' to finish it"
            )
        stored = int(meta["format"])
        if stored not in (self.format_version, self.older) and stored in KNOWN_FORMATS:
            raise OtherFormat(f"{name} is a store of format {stored}", stored)
        for field, mine in (("format", self.format_version), ("fingerprint", self.fingerprint)):
            if int(meta[field]) > mine:
                raise IncompatibleStore(
                    f"{name}: {field} version {meta[field]} is newer than this crawlstore's "
                    f"{mine}: upgrade crawlstore"
                )
        if int(meta["fingerprint"]) < self.fingerprint:
            raise OlderFormat(
                f"{name} holds fingerprint version {meta['fingerprint']}, older than this "
                f"crawlstore's {self.fingerprint}: open it for writing to migrate it"
            )
        return meta

    @property
    def indexed(self) -> bool:
        """Format 1 kept no indexes before this crawlstore: a store of it created since says
        so in ``META`` (format 3 keeps them, or refuses to open until migrated)."""
        return self.format_version != FORMAT_VERSION or self.meta.get(INDEXED.decode()) == "1"

    def set_indexed(self) -> None:
        self.run(lambda: self.unit().hset(self.tag + META, INDEXED, b"1"))
        self.meta[INDEXED.decode()] = "1"

    def set_fingerprint(self, version: int) -> None:
        """Record the fingerprint version the store's records now hold (a migration's end)."""
        self.run(lambda: self.unit().hset(self.tag + META, b"fingerprint", b"%d" % version))
        self.meta["fingerprint"] = str(version)
        self.fingerprint = version

    # -- units ----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self, *, discard: bool = False) -> Iterator[None]:
        if journal.check_owner(self._owner, self):
            yield  # joined: the outer unit commits
            return
        with self._lock:
            unit = self._store_unit()
            unit.begin()
            self._owner, self._unit = journal.owner(), unit
            opened = journal.begin(self)  # in-memory state rolls back with the unit
            committed = False
            try:
                yield
                if discard:
                    unit.abort()
                elif self.readonly and unit.writes:
                    raise ReadOnlyStore(f"{self.server.address} was opened read-only")
                else:
                    unit.commit()
                    committed = True
            except BaseException:
                if not committed:
                    unit.abort()
                raise
            finally:
                self._owner = self._unit = None
                journal.end(opened, commit=committed)

    def _store_unit(self) -> Unit:
        """A unit under the store's lock."""
        return Unit(self.server, self._cache, self.tag)

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        return self._write()

    def run(self, operation: Callable[[], _T]) -> _T:
        with self._write():
            return operation()

    view = run

    def scratch(self, operation: Callable[[], _T]) -> _T:
        if self._unit is not None and journal.check_owner(self._owner, self):
            unit = self._unit
            saved = unit.snapshot()
            try:
                return operation()
            finally:
                unit.restore(saved)
        with self._write(discard=True):
            return operation()

    def reader(self) -> UnitReader:
        return UnitReader(self)

    def unit(self) -> CachedUnit:
        """The unit under way (``StoreError`` outside one)."""
        unit = self._unit
        if unit is None:
            raise StoreError(f"{self.server.address}: a storage call outside a unit")
        return unit

    # -- keys -----------------------------------------------------------------------------------

    def crawl_tag(self, crawl: CrawlRecord) -> bytes:
        return crawl.ref[1]  # type: ignore[no-any-return]

    def bucket_tag(self, crawl: CrawlRecord, bucket: int) -> bytes:
        tags = self._tags.get(crawl.ref[0])
        if tags is None:
            cid = crawl.ref[0]
            tags = self._tags[cid] = [
                b"{%s:%d:%d}" % (self.ns, cid, b) for b in range(self.buckets)
            ]
        return tags[bucket]

    def fp_bucket(self, crawl: CrawlRecord, fp: bytes) -> bytes:
        """The tag of the bucket a fingerprint's URL, validators and seen entry live in (by its
        first bits, so the buckets in order hold the fingerprints in order)."""
        return self.bucket_tag(crawl, self.fp_index(fp))

    def fp_index(self, fp: bytes) -> int:
        return ((fp[0] << 8) | fp[1]) >> self.shift

    def _queue_bucket(self, crawl: CrawlRecord, key: str) -> bytes:
        return self._qkey(crawl, key, b"")

    def _qkey(self, crawl: CrawlRecord, key: str, kind: bytes) -> bytes:
        """The name of a queue's key of ``kind`` (b"": its bucket's tag)."""
        memo = self._names
        name = memo.get((crawl.ref[0], key, kind))
        if name is None:
            if len(memo) > 200_000:
                memo.clear()
            bucket = self._bucket_of(key)
            tag = self.bucket_tag(crawl, bucket)
            name = tag + kind + key.encode("utf-8", "surrogatepass") if kind else tag
            memo[(crawl.ref[0], key, kind)] = name
        return name

    def _bucket_of(self, key: str) -> int:
        return mmh3.hash(key, signed=False) % self.buckets

    # Where a crawl's index of queues, its totals and its URLs' records are: in this layout,
    # the index and totals in the crawl's own slot, a URL in the bucket of its fingerprint
    # (a layout by partition keeps all three in the bucket of the queue).

    def _index_tag(self, crawl: CrawlRecord, key: str | None = None) -> bytes:
        """The tag of the index of queues (``EVENTS``, ``LOADS``, ``WAKES``, ``QUEUE_KEYS``)
        that holds the queue ``key`` (None: the one the unit reads)."""
        return self.crawl_tag(crawl)

    def _totals_key(self, crawl: CrawlRecord) -> bytes:
        """The totals hash the unit adds to."""
        return self.crawl_tag(crawl) + TOTALS

    def _url_tag(self, crawl: CrawlRecord, fp: bytes, key: str | None = None) -> bytes:
        """The tag of the bucket of the URL ``fp``'s record, of the queue ``key`` (None: the
        queue it is in)."""
        return self.fp_bucket(crawl, fp)

    # -- crawls ---------------------------------------------------------------------------------

    def defaults(self) -> Defaults:
        raw = self.unit().hget(self.tag + META, b"defaults")
        return Defaults.from_record(unpack_record(raw)) if raw is not None else DEFAULTS

    def save_defaults(self, defaults: Defaults) -> None:
        self.unit().hset(self.tag + META, b"defaults", pack(defaults.to_record()))

    def crawl(self, name: str) -> CrawlRecord | None:
        raw = self.unit().hget(self.tag + CRAWLS, name.encode())
        return None if raw is None else self._crawl_record(name, raw)

    def _crawl_record(self, name: str, raw: bytes) -> CrawlRecord:
        try:
            cid, policy, created, settled = unpack_record(raw)
            record = CrawlRecord(name, CrawlPolicy.from_record(policy), created,
                                 settled=settled)  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise CorruptRecord(f"crawls record {name!r} is malformed: {exc!r}") from None
        record.ref = (cid, b"{" + self.ns + b":%d}" % cid)
        return record

    def save_crawl(self, crawl: CrawlRecord) -> None:
        u = self.unit()
        if crawl.ref is None:
            old = self.crawl(crawl.name)
            if old is not None:
                crawl.ref = old.ref
            else:
                meta = self.tag + META
                cid = int(u.hget(meta, b"crawl_ids") or 0) + 1
                u.hset(meta, b"crawl_ids", b"%d" % cid)
                crawl.ref = (cid, b"{" + self.ns + b":%d}" % cid)
        record = [crawl.ref[0], crawl.policy.to_record(), crawl.created, crawl.settled]
        u.hset(self.tag + CRAWLS, crawl.name.encode(), pack(record))

    def crawls(self) -> list[str]:
        return sorted(k.decode() for k in self.unit().hgetall(self.tag + CRAWLS))

    def delete_crawl(self, crawl: CrawlRecord) -> int:
        u = self.unit()
        cid = crawl.ref[0]
        found = set(self.server.scan_keys(b"{" + self.ns + b":%d:*" % cid))
        found.update(self.server.scan_keys(b"{" + self.ns + b":%d}*" % cid))
        found.update(k for k in u.cache.fields if k.startswith(crawl.ref[1][:-1]))
        found = {k for k in found if not k.endswith(b"}" + FENCE)}  # fences stay: they only grow
        urls = [k for k in found if k.endswith(b"}:u")]
        counts = self.unit().read([("HLEN", k) for k in urls]) if urls else []
        for key in sorted(found):
            u.delete(key)
        u.hset(self.tag + CRAWLS, crawl.name.encode(), None)
        return sum(int(n) for n in counts)

    def totals(self, crawl: CrawlRecord) -> dict[str, int]:
        raw = self.unit().hgetall(self._totals_key(crawl))
        return {k.decode(): int(v) for k, v in raw.items() if not k.startswith(NOT_A_TOTAL)}

    def _total(self, crawl: CrawlRecord, name: bytes) -> int:
        # the whole hash, read once a unit (a few fields: a field a round trip costs more)
        return int(self.unit().hgetall(self._totals_key(crawl)).get(name) or 0)

    def add_totals(self, crawl: CrawlRecord, deltas: dict[str, int]) -> None:
        u, key = self.unit(), self._totals_key(crawl)
        stored = u.hgetall(key)
        for name, n in deltas.items():
            if n:
                field = name.encode()
                u.hset(key, field, b"%d" % (int(stored.get(field) or 0) + n))

    def next_seq(self, crawl: CrawlRecord, n: int = 1) -> int:
        seq = self._total(crawl, SEQ) + n
        self.unit().hset(self._totals_key(crawl), SEQ, b"%d" % seq)
        return seq - n + 1

    def last_seq(self, crawl: CrawlRecord) -> int:
        return self._total(crawl, SEQ)

    def advance_seq(self, crawl: CrawlRecord, at_least: int) -> None:
        if self._total(crawl, SEQ) < at_least:
            self.unit().hset(self._totals_key(crawl), SEQ, b"%d" % at_least)

    # A facade's state: a hash of msgpack values a namespace (``:st:NAME``), the namespaces in
    # a hash of their own (``:sn``).

    def state_get(self, crawl: CrawlRecord, namespace: str, key: str) -> bytes | None:
        return self.unit().hget(self.crawl_tag(crawl) + STATE + namespace.encode(), key.encode())

    def state_put(self, crawl: CrawlRecord, namespace: str, key: str, value: bytes) -> None:
        u, tag, name = self.unit(), self.crawl_tag(crawl), namespace.encode()
        if u.hget(tag + STATE_NAMES, name) is None:
            u.hset(tag + STATE_NAMES, name, b"1")
        u.hset(tag + STATE + name, key.encode(), value)

    def state_delete(self, crawl: CrawlRecord, namespace: str, key: str) -> bool:
        u, hkey = self.unit(), self.crawl_tag(crawl) + STATE + namespace.encode()
        if u.hget(hkey, key.encode()) is None:
            return False
        u.hset(hkey, key.encode(), None)
        return True

    def state_keys(self, crawl: CrawlRecord, namespace: str) -> list[str]:
        hkey = self.crawl_tag(crawl) + STATE + namespace.encode()
        return sorted(k.decode() for k in self.unit().hgetall(hkey))

    def states(self, crawl: CrawlRecord) -> Iterator[tuple[str, str, bytes]]:
        u, tag = self.unit(), self.crawl_tag(crawl)
        for name in sorted(k.decode() for k in u.hgetall(tag + STATE_NAMES)):
            state = u.hgetall(tag + STATE + name.encode())
            for key in sorted(state):
                yield name, key.decode(), state[key]

    # -- queues ---------------------------------------------------------------------------------

    def _decode_queue(self, key: str, raw: bytes) -> QueueRecord:
        try:
            *fields, member = unpack_record(raw)  # the queue, then its member of the crawl's index
            q = QueueRecord.from_record(fields)
        except (TypeError, ValueError) as exc:
            raise CorruptRecord(f"queues record {key!r} is malformed: {exc!r}") from None
        # set: stored; its members of the index, by load and by tend_at (b"": none)
        q.ref = _members(key.encode("utf-8", "surrogatepass"), q, member or b"")
        return q

    def queue(self, crawl: CrawlRecord, key: str) -> QueueRecord | None:
        raw = self.unit().hget(self._queue_bucket(crawl, key) + QUEUES, key.encode("utf-8",
                            "surrogatepass"))  # fmt: skip
        return self._decode_queue(key, raw) if raw is not None else None

    def _queues_at(self, crawl: CrawlRecord, keys: list[str]) -> list[QueueRecord]:
        by_bucket: dict[bytes, list[bytes]] = {}
        for key in keys:
            by_bucket.setdefault(self._queue_bucket(crawl, key) + QUEUES, []).append(
                key.encode("utf-8", "surrogatepass"))  # fmt: skip
        if len(keys) > 1:
            self.prefetch_fields(by_bucket)
        out = []
        for key in keys:
            q = self.queue(crawl, key)
            if q is None:
                raise CorruptRecord(f"the index of crawl {crawl.name!r} names queue {key!r}, "
                                    "which has no record")  # fmt: skip
            out.append(q)
        return out

    def save_queue(
        self, crawl: CrawlRecord, queue: QueueRecord, event: float | None, rotate: bool = False
    ) -> None:
        u, tag = self.unit(), self._index_tag(crawl, queue.key)
        raw_key = queue.key.encode("utf-8", "surrogatepass")
        if queue.ref is None:
            stored = self.queue(crawl, queue.key)
            if stored is None:
                self.add_totals(crawl, {"queues": 1})
                u.zadd(tag + QUEUE_KEYS, raw_key)
                queue.ref = (b"", b"", b"")
            else:
                queue.ref = stored.ref
        placed: bytes = queue.ref[0]
        if event is None:
            member = b""
        elif placed and not rotate and _U64.unpack_from(placed)[0] == ms_up(event):
            member = placed
        else:
            member = _U64.pack(ms_up(event)) + _U64.pack(self.next_seq(crawl)) + raw_key
        queue.event = event
        members = _members(raw_key, queue, member)
        for index, old, new in zip((EVENTS, LOADS, WAKES), queue.ref, members, strict=True):
            if new != old:
                if old:
                    u.zrem(tag + index, old)
                if new:
                    u.zadd(tag + index, new)
        queue.ref = members
        u.hset(self._queue_bucket(crawl, queue.key) + QUEUES, raw_key,
               pack([*queue.to_record(), member]))  # fmt: skip

    def queues(self, crawl: CrawlRecord, after: str | None, limit: int) -> list[QueueRecord]:
        start = after.encode("utf-8", "surrogatepass") if after is not None else None
        keys = self.unit().zrange(self._index_tag(crawl) + QUEUE_KEYS, start, None, limit)
        return self._queues_at(crawl, [k.decode("utf-8", "surrogatepass") for k in keys])

    def queue_count(self, crawl: CrawlRecord) -> int:
        return self.totals(crawl).get("queues", 0)

    def due_queues(
        self, crawl: CrawlRecord, now: float, limit: int, below: int | None = None
    ) -> list[QueueRecord]:
        # index members start with the event rounded up to the millisecond, as on LMDB
        u, tag, now_ms = self.unit(), self._index_tag(crawl), ms_up(now)
        if below is None:
            members = u.zrange(tag + EVENTS, None, _U64.pack(now_ms + 1), limit)
            return self._queues_at(
                crawl, [m[EVENT_QUEUE].decode("utf-8", "surrogatepass") for m in members]
            )
        places: dict[bytes, bytes] = {}  # queue key -> place
        load = 0
        while load < below:  # a read for each in-flight count under ``below`` the queues have
            first = u.zrange(tag + LOADS, _U32.pack(load), None, 1, inclusive=True)
            if not first or _U32.unpack_from(first[0])[0] >= below:
                break
            start = first[0][:4]
            for m in u.zrange(tag + LOADS, start, start + _U64.pack(now_ms + 1), limit,
                              inclusive=True):  # fmt: skip
                places[m[LOAD_QUEUE]] = m[LOAD_PLACE]
            load = _U32.unpack_from(start)[0] + 1
        woken = [m[WAKE_QUEUE].decode("utf-8", "surrogatepass")
                 for m in u.zrange(tag + WAKES, None, _U64.pack(now_ms + 1), 2**31)]  # fmt: skip
        for q in self._queues_at(crawl, woken):  # one round trip for them all
            if not q.ref[0]:
                raise CorruptRecord(f"the index of crawl {crawl.name!r} by tend_at names queue "
                                    f"{q.key!r}, which is not in its index")  # fmt: skip
            places[q.key.encode("utf-8", "surrogatepass")] = q.ref[0][:16]
        chosen = sorted(places, key=places.__getitem__)[:limit]
        return self._queues_at(crawl, [k.decode("utf-8", "surrogatepass") for k in chosen])

    def next_event(self, crawl: CrawlRecord) -> float | None:
        first = self.unit().zrange(self._index_tag(crawl) + EVENTS, None, None, 1)
        return _U64.unpack_from(first[0])[0] / 1000 if first else None

    def delete_queue(self, crawl: CrawlRecord, queue: QueueRecord) -> int:
        u, tag = self.unit(), self._index_tag(crawl, queue.key)
        key = queue.key
        bucket = self._queue_bucket(crawl, key)
        fps = self._all(self._qkey(crawl, key, MEMBERS))
        for fp in fps:
            u.hset(self._url_tag(crawl, fp, key) + URLS, fp, None)
        for kind in QUEUE_OWN:
            u.delete(self._qkey(crawl, key, kind))
        for token, raw in u.hgetall(bucket + LEASES).items():
            if self._lease(token, raw).queue == key:
                u.hset(bucket + LEASES, token, None)
        for index, member in zip((EVENTS, LOADS, WAKES), queue.ref, strict=True):
            if member:
                u.zrem(tag + index, member)
        raw_key = key.encode("utf-8", "surrogatepass")
        u.zrem(tag + QUEUE_KEYS, raw_key)
        u.hset(bucket + QUEUES, raw_key, None)
        self.add_totals(crawl, {"queues": -1})
        return len(fps)

    def _all(self, key: bytes) -> list[bytes]:
        u, out = self.unit(), list[bytes]()
        while True:
            part = u.zrange(key, out[-1] if out else None, None, 10_000)
            out.extend(part)
            if len(part) < 10_000:
                return out

    # -- a queue's entries, leases and schedule -------------------------------------------------

    def enqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry,
                fp: bytes) -> None:  # fmt: skip
        self.unit().zadd(self._qkey(crawl, queue.key, ENTRIES), ORDER.pack(*order) + fp)

    def enqueue_many(self, crawl: CrawlRecord, queue: QueueRecord, urls: list[UrlRecord]) -> None:
        enqueue_each(self, crawl, queue, urls)

    def dequeue(self, crawl: CrawlRecord, queue: QueueRecord, n: int) -> list[bytes]:
        if n <= 0:
            return []
        u, key = self.unit(), self._qkey(crawl, queue.key, ENTRIES)
        members = u.zrange(key, None, None, n)
        for member in members:
            u.zrem(key, member)
        return [Fingerprint(m[ENTRY_FP]) for m in members]

    def unqueue(self, crawl: CrawlRecord, queue: QueueRecord, order: Entry) -> None:
        u, key = self.unit(), self._qkey(crawl, queue.key, ENTRIES)
        start = ORDER.pack(*order)
        for member in u.zrange(key, start, start + b"\xff", 1, inclusive=True):
            u.zrem(key, member)

    def lease(self, crawl: CrawlRecord, queue: QueueRecord, lease: LeaseRecord) -> None:
        u = self.unit()
        bucket = self._bucket_of(queue.key)
        lease.token = struct.pack(">I", bucket) + _U64.pack(self.next_seq(crawl)) + os.urandom(4)
        self._put_lease(crawl, lease)
        u.zadd(
            self._qkey(crawl, queue.key, EXPIRIES), _U64.pack(ms_up(lease.expires)) + lease.token
        )

    def _put_lease(self, crawl: CrawlRecord, lease: LeaseRecord) -> None:
        record = pack([lease.fp, lease.expires, *lease.owner, lease.queue])  # as _lease reads it
        self.unit().hset(self._queue_bucket(crawl, lease.queue) + LEASES, lease.token, record)

    def get_lease(self, crawl: CrawlRecord, token: bytes) -> LeaseRecord | None:
        bucket = self._token_bucket(token)
        if bucket is None:
            return None
        raw = self.unit().hget(self.bucket_tag(crawl, bucket) + LEASES, token)
        return self._lease(token, raw) if raw is not None else None

    def _token_bucket(self, token: bytes) -> int | None:
        """The bucket a lease token names (None: not one of this store's tokens)."""
        if not isinstance(token, bytes) or len(token) != 16:
            return None
        bucket: int = struct.unpack_from(">I", token)[0]
        return bucket if bucket < self.buckets else None

    @staticmethod
    def _lease(token: bytes, raw: bytes) -> LeaseRecord:
        try:
            fp, expires, pid, start, queue = unpack_record(raw)
            return LeaseRecord(token, Fingerprint(fp), queue, expires, (pid, start))
        except (TypeError, ValueError) as exc:
            raise CorruptRecord(f"leases record {token.hex()} is malformed: {exc!r}") from None

    def extend_lease(self, crawl: CrawlRecord, lease: LeaseRecord, expires: float) -> None:
        u, key = self.unit(), self._qkey(crawl, lease.queue, EXPIRIES)
        u.zrem(key, _U64.pack(ms_up(lease.expires)) + lease.token)
        lease.expires = expires
        self._put_lease(crawl, lease)
        u.zadd(key, _U64.pack(ms_up(expires)) + lease.token)

    def end_lease(self, crawl: CrawlRecord, lease: LeaseRecord) -> None:
        u = self.unit()
        u.hset(self._queue_bucket(crawl, lease.queue) + LEASES, lease.token, None)
        u.zrem(
            self._qkey(crawl, lease.queue, EXPIRIES), _U64.pack(ms_up(lease.expires)) + lease.token
        )

    def expired(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[LeaseRecord]:
        members = self.unit().zrange(self._qkey(crawl, queue.key, EXPIRIES), None,
                                  _U64.pack(ms_up(now) + 1), 1_000_000)  # fmt: skip
        out = []
        for member in members:
            lease = self.get_lease(crawl, member[EXPIRY_TOKEN])
            if lease is not None and lease.expires <= now:
                out.append(lease)
        return out

    def next_expiry(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        return self._earliest(self._qkey(crawl, queue.key, EXPIRIES))

    def _earliest(self, key: bytes) -> float | None:
        first = self.unit().zrange(key, None, None, 1)
        return _U64.unpack_from(first[0])[0] / 1000 if first else None

    def leases(self, crawl: CrawlRecord) -> Iterator[LeaseRecord]:
        keys = [self.bucket_tag(crawl, b) + LEASES for b in range(self.buckets)]
        replies = self.unit().read([("HGETALL", k) for k in keys])
        mine = self.unit()
        for key, reply in zip(keys, replies, strict=True):
            if key in mine.cache.fields:  # this unit's own changes
                reply = mine.hgetall(key)
            for token, raw in sorted(reply.items()):
                yield self._lease(token, raw)

    def schedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot,
                 fp: bytes) -> None:  # fmt: skip
        at, seq = when
        member = _U64.pack(ms_up(at)) + _U64.pack(seq) + fp + _AT.pack(at)
        self.unit().zadd(self._qkey(crawl, queue.key, SCHEDULE), member)

    def unschedule(self, crawl: CrawlRecord, queue: QueueRecord, when: Slot) -> None:
        u, key = self.unit(), self._qkey(crawl, queue.key, SCHEDULE)
        start = _U64.pack(ms_up(when.at)) + _U64.pack(when.seq)
        for member in u.zrange(key, start, start + b"\xff", 1, inclusive=True):
            u.zrem(key, member)

    def due(self, crawl: CrawlRecord, queue: QueueRecord, now: float) -> list[bytes]:
        u, key = self.unit(), self._qkey(crawl, queue.key, SCHEDULE)
        out: list[bytes] = []
        for member in u.zrange(key, None, _U64.pack(ms_up(now) + 1), 1_000_000):
            at = _AT.unpack_from(member, SCHEDULED_AT)[0]
            if at > now:  # due later in this millisecond
                continue
            u.zrem(key, member)
            out.append(Fingerprint(member[SCHEDULED_FP]))
        return out

    def next_due(self, crawl: CrawlRecord, queue: QueueRecord) -> float | None:
        return self._earliest(self._qkey(crawl, queue.key, SCHEDULE))

    # -- bounded indexes (``indexes.py``) -------------------------------------------------------

    def note_failure(self, crawl: CrawlRecord, queue: QueueRecord, failure: Failure,
                     keep: int) -> None:  # fmt: skip
        indexes.note(self.unit(), self._index_tag(crawl, queue.key), failure, keep)

    def failures(self, crawl: CrawlRecord, limit: int) -> list[Failure]:
        key = self._index_tag(crawl) + indexes.FAILURES
        found = self.unit().read([indexes.newest(key, limit)])[0]
        return [indexes.decode(member) for member in found]

    def count_revisit(self, crawl: CrawlRecord, queue: QueueRecord, fp: bytes, at: float,
                      n: int) -> None:  # fmt: skip
        key = self._index_tag(crawl, queue.key) + indexes.REVISITS
        (self.unit().zadd if n > 0 else self.unit().zrem)(key, indexes.revisit_member(fp, at))

    def revisits_due(self, crawl: CrawlRecord, until: float) -> int:
        key = self._index_tag(crawl) + indexes.REVISITS
        return int(self.unit().read([indexes.revisits_until(key, until)])[0])

    # -- URLs -----------------------------------------------------------------------------------

    def prefetch_fields(self, wanted: dict[bytes, list[bytes]], sets: Sequence[bytes] = ()) -> None:
        """Read these hash fields into the unit's cache, and these sorted sets, in one
        pipeline."""
        u = self.unit()
        fields = u.cache.fields
        pending = {}
        for key, names in wanted.items():
            if key not in u.cache.whole:
                known = fields.get(key, {})
                missing = [f for f in dict.fromkeys(names) if f not in known]
                if missing:
                    pending[key] = missing
        loads = u.unread(sets)
        if pending or loads:
            commands = [("HMGET", k, *v) for k, v in pending.items()]
            replies = self.unit().read(commands + [u.whole_read(key) for key in loads])
            for (key, names), values in zip(pending.items(), replies, strict=False):
                fields.setdefault(key, {}).update(zip(names, values, strict=True))
            for key, members in zip(loads, replies[len(commands) :], strict=True):
                u.loaded(key, members)

    def prefetch(self, crawl: CrawlRecord, fps: Sequence[bytes], queues: Sequence[str],
                 tokens: Sequence[bytes] = ()) -> None:  # fmt: skip
        """Read ahead in two pipelines: the URLs, the leases and the queues' records with
        their entries, leases and schedule; then the URLs at the head of those queues."""
        wanted = self._records_of(crawl, fps, queues)
        for token in tokens:
            bucket = self._token_bucket(token)
            if bucket is not None:
                wanted.setdefault(self.bucket_tag(crawl, bucket) + LEASES, []).append(token)
        u = self.unit()
        sets = [
            self._qkey(crawl, key, kind) for key in queues for kind in (ENTRIES, EXPIRIES, SCHEDULE)
        ]
        self.prefetch_fields(wanted, sets)
        if queues:
            heads = [m[ENTRY_FP] for key in queues
                     for m in u.zrange(self._qkey(crawl, key, ENTRIES), None, None, 4)]  # fmt: skip
            self.prefetch_urls(crawl, heads)

    def prefetch_urls(self, crawl: CrawlRecord, fps: list[bytes]) -> None:
        """Read these URLs' records ahead, in one pipeline."""
        by_bucket: dict[bytes, list[bytes]] = {}
        for fp in fps:
            by_bucket.setdefault(self._url_tag(crawl, fp) + URLS, []).append(fp)
        self.prefetch_fields(by_bucket)

    def _url(self, fp: bytes, raw: bytes, tag: bytes) -> UrlRecord:
        url = decode_url(fp, raw, tag + URLS + b":" + fp)
        url.ref = True
        return url

    def find_urls(self, crawl: CrawlRecord, fps: Sequence[bytes],
                  queues: Sequence[str]) -> list[UrlRecord | None]:  # fmt: skip
        if len(fps) > 1:  # the URLs and their queues' records (a push writes their entries
            # without reading them: not the whole sorted sets a pop reads)
            self.prefetch_fields(self._records_of(crawl, fps, queues))
        return [self.url(crawl, fp) for fp in fps]

    def _records_of(self, crawl: CrawlRecord, fps: Sequence[bytes],
                    queues: Sequence[str]) -> dict[bytes, list[bytes]]:  # fmt: skip
        """The hash fields of these URLs' and queues' records, by key."""
        wanted: dict[bytes, list[bytes]] = {}
        for key in dict.fromkeys(queues):
            wanted.setdefault(self._queue_bucket(crawl, key) + QUEUES, []).append(
                key.encode("utf-8", "surrogatepass"))  # fmt: skip
        for fp in fps:
            wanted.setdefault(self._url_tag(crawl, fp) + URLS, []).append(fp)
        return wanted

    def url(self, crawl: CrawlRecord, fp: bytes) -> UrlRecord | None:
        tag = self._url_tag(crawl, fp)
        raw = self.unit().hget(tag + URLS, fp)
        return self._url(fp, raw, tag) if raw is not None else None

    def save_url(self, crawl: CrawlRecord, queue: QueueRecord, url: UrlRecord) -> None:
        u = self.unit()
        u.hset(self._url_tag(crawl, url.fp, url.queue) + URLS, url.fp, encode_url(url))
        if url.ref is None:
            if queue.ref is None or queue.key != url.queue:
                raise StoreError(f"URL {url.fp.hex()} saved before its queue {url.queue!r}")
            u.zadd(self._qkey(crawl, queue.key, MEMBERS), url.fp)
            url.ref = True

    def delete_url(self, crawl: CrawlRecord, url: UrlRecord) -> None:
        u = self.unit()
        u.hset(self._url_tag(crawl, url.fp, url.queue) + URLS, url.fp, None)
        u.zrem(self._qkey(crawl, url.queue, MEMBERS), url.fp)

    def urls(self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None,
             limit: int) -> list[UrlRecord]:  # fmt: skip
        return list(itertools.islice(self._walk(crawl, queue, after), limit))

    def iter_urls(self, crawl: CrawlRecord, queue: QueueRecord | None) -> Iterator[UrlRecord]:
        return self._walk(crawl, queue, None)

    def _walk(
        self, crawl: CrawlRecord, queue: QueueRecord | None, after: bytes | None
    ) -> Iterator[UrlRecord]:
        # each step reads in the unit running then (an export's steps are units of their own)
        if queue is not None:
            key = self._qkey(crawl, queue.key, MEMBERS)
            while True:
                part = self.unit().zrange(key, after, None, 1000)
                self.prefetch_urls(crawl, part)
                for fp in part:
                    url = self.url(crawl, fp)
                    if url is None:
                        raise CorruptRecord(f"queue {queue.key!r} lists {fp.hex()}, which has "
                                            "no URL record")  # fmt: skip
                    yield url
                if len(part) < 1000:
                    return
                after = part[-1]
        first = 0 if after is None else ((after[0] << 8) | after[1]) >> self.shift
        for bucket in range(first, self.buckets):
            tag = self.bucket_tag(crawl, bucket)
            records = self.unit().hgetall(tag + URLS)
            for fp in sorted(records):
                if after is None or fp > after:
                    yield self._url(Fingerprint(fp), records[fp], tag)
