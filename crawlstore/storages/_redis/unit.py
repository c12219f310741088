"""Write units on Redis: the store lock, reads through a cache, writes kept until the commit.

``CachedUnit`` is what every unit does whatever keeps units apart: it reads through the
process's cache, keeps its writes until the commit (the last one of each field or member),
and can go back to a snapshot of them. ``Unit`` keeps units apart with the store lock;
``bucket.py``'s ``BucketUnit`` with a compare-and-set on a bucket's version.

A unit takes the store's lock (``cs_acquire``: a key with a token and a ttl), reads what it
needs, and keeps its writes; the commit sends them all at once. On one server that is one
function call (``cs_commit``), which checks the lock, writes, and sets the store's epoch. On a
cluster the writes span slots: they are first written whole to a journal in the store's slot
(``cs_journal``), then slot by slot (``cs_apply``), and the journal is dropped as the lock is
released. A process killed half way leaves its journal: the next unit, of any process, applies
it again before it reads anything. Every write is a whole value, so applying twice is applying
once.

What this process read stays valid while nobody else commits: the epoch a unit finds when it
takes the lock tells whether it is the one this process's cache was left at.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from collections.abc import Callable, Iterable
from typing import Any

import msgpack

from ...errors import StoreError
from . import points
from .keys import (
    EPOCH,
    FENCES,
    JOURNAL,
    LOCK,
)
from .server import Server, key_slot

__all__ = ["Cache", "CachedUnit", "Unit"]

#: A write: its key, then its opcode and operands.
Write = tuple[bytes, tuple[Any, ...]]

#: Sorted sets of up to this many members are read whole and kept in the cache.
WHOLE = 256
#: The cache is dropped when it holds more entries than this.
CACHE_LIMIT = 200_000


class Cache:
    """What this process knows of the store as of ``epoch``: hash fields (None: absent), whole
    hashes, whole sorted sets."""

    def __init__(self) -> None:
        #: The store's epoch (``Unit``), or the bucket's version (``BucketUnit``), what is
        #: cached was read at or after (None: not known).
        self.epoch: bytes | None = None
        #: The server's ``disturbed`` count it was read at.
        self.disturbed = 0
        self.fields: dict[bytes, dict[bytes, bytes | None]] = {}
        self.whole: set[bytes] = set()
        self.zsets: dict[bytes, list[bytes]] = {}
        self.members: dict[bytes, dict[bytes, bool]] = {}
        #: Sorted sets known to be too large to keep whole, and those kept whole that grew so.
        self.big: set[bytes] = set()
        self.grown: set[bytes] = set()

    def clear(self) -> None:
        self.epoch = None
        self.fields.clear()
        self.whole.clear()
        self.zsets.clear()
        self.members.clear()
        self.big.clear()
        self.grown.clear()

    def size(self) -> int:
        return len(self.fields) + len(self.zsets) + len(self.members)


#: A unit's saved writes (``CachedUnit.snapshot``).
Saved = tuple[dict[bytes, dict[tuple[int, Any], tuple[Any, ...]]], set[bytes]]


class CachedUnit:
    """What a unit does however it is kept apart from the others: reads through ``cache``,
    writes kept until the commit, snapshots of them. A subclass begins, commits and aborts."""

    def __init__(self, server: Server, cache: Cache) -> None:
        self.server = server
        self.cache = cache
        #: The unit's writes by key, the last one of each field or member (a unit writes a
        #: queue's record and the totals many times over), and the keys it deleted first.
        self.writes: dict[bytes, dict[tuple[int, Any], tuple[Any, ...]]] = {}
        self.deleted: set[bytes] = set()
        #: Changes to sorted sets not held whole: members added and removed in this unit.
        self._added: dict[bytes, set[bytes]] = {}
        self._removed: dict[bytes, set[bytes]] = {}

    def read(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send reads (each names its key first) in one round trip; their replies."""
        return self.server.read(commands)

    def _writing(self, key: bytes) -> None:
        """Called before each write to ``key``: a subclass refuses the keys it cannot commit."""

    def _settle_cache(self) -> None:
        """At the unit's beginning: sorted sets kept whole that grew large are read from the
        server from now on."""
        cache = self.cache
        for key in cache.grown:
            if cache.zsets.pop(key, None) is not None:
                cache.big.add(key)
        cache.grown.clear()

    def _drop(self) -> None:
        """Forget the unit's writes, and what the cache learnt with them."""
        self.cache.clear()
        self.writes.clear()
        self.deleted.clear()
        self._added.clear()
        self._removed.clear()

    def _all_writes(self) -> list[Write]:
        out: list[Write] = []
        for key, writes in self.writes.items():
            if key in self.deleted:
                out.append((key, ("D",)))
            out.extend((key, op) for op in writes.values())
        return out

    def _write(self, key: bytes, target: tuple[int, Any], op: tuple[Any, ...]) -> None:
        self._writing(key)
        writes = self.writes.get(key)
        if writes is None:
            writes = self.writes[key] = {}
        writes[target] = op

    def snapshot(self) -> Saved:
        """The unit's writes so far, for ``restore``."""
        return {k: dict(v) for k, v in self.writes.items()}, set(self.deleted)

    def restore(self, saved: Saved) -> None:
        """Go back to the writes of ``snapshot``: what was written since is forgotten, by the
        cache too (it is read from the server again, under the unit's writes)."""
        writes, deleted = saved
        self.cache.clear()
        self.cache.epoch = None  # nothing cached is kept past this unit either
        self._added.clear()
        self._removed.clear()
        self.writes, self.deleted = {}, set()
        for key, ops in writes.items():
            if key in deleted:
                self.delete(key)
            for op in ops.values():
                code = op[0]
                if code in "Hh":
                    self.hset(key, op[1], op[2] if code == "H" else None)
                elif code == "Z":
                    self.zadd(key, op[1])
                elif code == "z":
                    self.zrem(key, op[1])
                elif code == "T":
                    self.ztrim(key, op[1])
                elif code == "S":
                    self.sadd(key, op[1])
                elif code == "L":
                    self.allocate(key, op[1])
                else:
                    self.setbits(key, list(op[2:]))

    @staticmethod
    def _flat(
        ops: list[tuple[bytes, tuple[Any, ...]]], start: int
    ) -> tuple[list[bytes], list[Any]]:
        """The writes as ``cs_apply`` takes them: keys, and each write naming its key's index
        (from ``start``)."""
        index: dict[bytes, int] = {}
        keys: list[bytes] = []
        args: list[Any] = []
        for key, op in ops:
            i = index.get(key)
            if i is None:
                i = index[key] = len(keys) + start
                keys.append(key)
            args.append(op[0])
            args.append(i)
            args.extend(op[1:])
        return keys, args

    # -- hashes ---------------------------------------------------------------------------------

    def hget(self, key: bytes, field: bytes) -> bytes | None:
        known = self.cache.fields.get(key)
        if known is not None and (field in known or key in self.cache.whole):
            return known.get(field)
        value = self.read([("HGET", key, field)])[0]
        self.cache.fields.setdefault(key, {})[field] = value
        return value  # type: ignore[no-any-return]

    def hgetall(self, key: bytes) -> dict[bytes, bytes]:
        cache = self.cache
        if key not in cache.whole:
            known = cache.fields.setdefault(key, {})
            mine = {f[1]: known[f[1]] for f in self.writes.get(key, ()) if f[0] == 0}
            known.clear()
            known.update(self.read([("HGETALL", key)])[0])
            known.update(mine)  # this unit's writes, not sent yet
            cache.whole.add(key)
        return {f: v for f, v in cache.fields[key].items() if v is not None}

    def hset(self, key: bytes, field: bytes, value: bytes | None) -> None:
        self._writing(key)
        self.cache.fields.setdefault(key, {})[field] = value
        writes = self.writes.get(key)
        if writes is None:
            writes = self.writes[key] = {}
        writes[(0, field)] = ("H", field, value) if value is not None else ("h", field)

    # -- sorted sets, all scores 0, in member (byte) order --------------------------------------

    def zrange(self, key: bytes, after: bytes | None, before: bytes | None, limit: int,
               *, inclusive: bool = False) -> list[bytes]:  # fmt: skip
        """Up to ``limit`` members after ``after`` (or from ``after`` with ``inclusive``) and
        before ``before``, in order."""
        cache = self.cache
        whole = cache.zsets.get(key)
        if whole is None:
            added, removed = self._added.get(key, set()), self._removed.get(key, set())
            if not added and not removed and key not in cache.big:
                members = self.read([self.whole_read(key)])[0]
                whole = self.loaded(key, members)
                if whole is None and after is None and before is None and limit < len(members):
                    return list(members[:limit])  # (a larger set: its first are all read)
        if whole is None:
            lo = b"-" if after is None else (b"[" if inclusive else b"(") + after
            hi = b"+" if before is None else b"(" + before
            members = self.read([("ZRANGE", key, lo, hi, "BYLEX", "LIMIT", 0,
                                         limit + len(removed))])[0]  # fmt: skip
            found = set(members) - removed
            found.update(m for m in added if _within(m, after, before, inclusive))
            return sorted(found)[:limit]
        start = 0
        if after is not None:
            start = (bisect.bisect_left if inclusive else bisect.bisect_right)(whole, after)
        end = len(whole) if before is None else bisect.bisect_left(whole, before)
        return whole[start : min(end, start + limit)]

    def unread(self, keys: Iterable[bytes]) -> list[bytes]:
        """Those of these sorted sets a read would load whole."""
        cache = self.cache
        return [k for k in dict.fromkeys(keys) if k not in cache.zsets and k not in cache.big
                and k not in self._added and k not in self._removed]  # fmt: skip

    @staticmethod
    def whole_read(key: bytes) -> tuple[Any, ...]:
        return ("ZRANGE", key, "-", "+", "BYLEX", "LIMIT", 0, WHOLE + 1)

    def loaded(self, key: bytes, members: list[bytes]) -> list[bytes] | None:
        """Keep a sorted set read with ``whole_read`` (None: too large to keep)."""
        if len(members) > WHOLE:
            self.cache.big.add(key)
            return None
        whole = self.cache.zsets[key] = list(members)
        return whole

    def zadd(self, key: bytes, member: bytes) -> None:
        whole = self.cache.zsets.get(key)
        if whole is not None:
            i = bisect.bisect_left(whole, member)
            if i == len(whole) or whole[i] != member:
                whole.insert(i, member)
                if len(whole) > 4 * WHOLE:
                    self.cache.grown.add(key)
        else:
            self._removed.get(key, set()).discard(member)
            self._added.setdefault(key, set()).add(member)
        self._write(key, (1, member), ("Z", member))

    def zrem(self, key: bytes, member: bytes) -> None:
        whole = self.cache.zsets.get(key)
        if whole is not None:
            i = bisect.bisect_left(whole, member)
            if i < len(whole) and whole[i] == member:
                del whole[i]
        else:
            self._added.get(key, set()).discard(member)
            self._removed.setdefault(key, set()).add(member)
        self._write(key, (1, member), ("z", member))

    def ztrim(self, key: bytes, keep: int) -> None:
        """Keep the ``keep`` greatest members of a sorted set (a ring), after every write of
        the unit to it so far: a write that reads nothing."""
        whole = self.cache.zsets.get(key)
        if whole is not None:
            del whole[: max(0, len(whole) - keep)]
        else:
            self.cache.big.add(key)  # (which members it leaves, only the server knows)
        writes = self.writes.get(key)
        if writes is not None:
            writes.pop((5, 0), None)  # after the writes since
        self._write(key, (5, 0), ("T", keep))

    # -- plain sets and bits (seen sets) --------------------------------------------------------

    def smembers_known(self, key: bytes, members: list[bytes]) -> list[bool]:
        known = self.cache.members.setdefault(key, {})
        missing = [m for m in dict.fromkeys(members) if m not in known]
        if missing:
            replies = self.read([("SMISMEMBER", key, *missing[i : i + 1000]) for i in
                                        range(0, len(missing), 1000)])  # fmt: skip
            flags = [bool(x) for reply in replies for x in reply]
            known.update(zip(missing, flags, strict=True))
        return [known[m] for m in members]

    def sadd(self, key: bytes, member: bytes) -> None:
        self.cache.members.setdefault(key, {})[member] = True
        self._write(key, (2, member), ("S", member))

    def getbits(self, key: bytes, positions: list[int]) -> list[int]:
        commands: list[tuple[Any, ...]] = []
        for i in range(0, len(positions), 500):
            part = positions[i : i + 500]
            commands.append(("BITFIELD_RO", key, *[a for p in part for a in ("GET", "u1", p)]))
        bits = [int(b) for reply in self.read(commands) for b in reply]
        for op in self.writes.get(key, {}).values():  # this unit's own bits, not written yet
            if op[0] == "B":
                mine = set(op[2:])
                bits = [1 if p in mine else b for p, b in zip(positions, bits, strict=True)]
        return bits

    def setbits(self, key: bytes, positions: list[int]) -> None:
        self._writing(key)
        writes = self.writes.setdefault(key, {})
        for i in range(0, len(positions), 500):  # a write's arguments are unpacked in Lua
            part = positions[i : i + 500]
            writes[(3, len(writes))] = ("B", len(part), *part)

    def allocate(self, key: bytes, size: int) -> None:
        """Make the string ``key`` ``size`` zero bytes long when it does not exist (a Bloom
        filter's bits, which would otherwise grow with room to spare)."""
        self._write(key, (4, 0), ("L", size))

    def delete(self, key: bytes) -> None:
        """Remove a whole key."""
        self._writing(key)
        cache = self.cache
        cache.fields[key] = {}
        cache.whole.add(key)
        cache.zsets[key] = []
        cache.big.discard(key)
        cache.members.pop(key, None)
        self._added.pop(key, None)
        self._removed.pop(key, None)
        self.writes[key] = {}
        self.deleted.add(key)


class Unit(CachedUnit):
    """One write unit (or read) over the store's keys, under the store lock; ``commit`` or
    ``abort`` ends it."""

    def __init__(self, server: Server, cache: Cache, store_tag: bytes, lock: bytes = LOCK) -> None:
        super().__init__(server, cache)
        self._lock = store_tag + lock
        self._epoch = store_tag + EPOCH
        self._journal = store_tag + JOURNAL
        self._fences = store_tag + FENCES
        #: What taking and releasing the lock touch.
        self._keys = [self._lock, self._epoch, self._journal]
        #: The fence drawn with the lock: it only grows, and a slot refuses writes older than
        #: the newest it applied (``library.lua``).
        self.fence = 0
        self.token = os.urandom(8).hex() + str(os.getpid())
        self._ttl_ms = max(100, int(server.address.lock_ttl * 1000))
        self.started = 0.0

    # -- the lock -------------------------------------------------------------------------------

    def read(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send reads; a unit that has run for a third of the lock's ttl extends it first."""
        if time.monotonic() - self.started > self.server.address.lock_ttl / 3:
            self.server.fcall("cs_extend", [self._lock], [self.token, self._ttl_ms])
            self.started = time.monotonic()
        return self.server.read(commands)

    def begin(self) -> None:
        ttl = self.server.address.lock_ttl
        deadline = time.monotonic() + 3 * ttl + 5
        pause = 0.0002
        while True:
            reply = self.server.fcall("cs_acquire", [*self._keys, self._fences],
                                      [self.token, self._ttl_ms])  # fmt: skip
            if reply[0] == 1:
                break
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{self.server.address}: the store lock stayed taken for {3 * ttl + 5:.0f} s"
                )
            time.sleep(min(pause, max(0.0001, reply[1] / 1000)))
            pause = min(pause * 2, 0.01)
        self.started = time.monotonic()
        epoch, self.fence = reply[1], int(reply[2])
        journal = reply[3] if len(reply) > 3 else None
        if journal:  # a commit left half done (its process died, or paused): finish it first
            try:  # under this unit's fence: the late writes of the paused one are refused
                self._apply([(list(k), list(a)) for k, a in msgpack.unpackb(journal)])
                epoch = self.server.fcall("cs_release", self._keys, [self.token, 1, 1])
            except BaseException:
                self.abort()  # the journal stays for the next unit
                raise
        cache = self.cache
        if (cache.epoch != epoch or cache.size() > CACHE_LIMIT
                or cache.disturbed != self.server.disturbed):  # fmt: skip
            cache.clear()
            cache.epoch = epoch
            cache.disturbed = self.server.disturbed
        self._settle_cache()

    def commit(self) -> None:
        """Write the unit's changes and release the lock."""
        keys = self._keys
        if not self.writes:
            self.server.fcall("cs_release", keys, [self.token, 0, 0])
            return
        try:
            if self.server.address.cluster:
                groups = self._groups()
                self.server.fcall("cs_journal", [self._lock, self._journal],
                                  [self.token, msgpack.packb(groups), self._ttl_ms])  # fmt: skip
                points.reached(points.FIRST_WRITE)
                self._apply(groups, between=lambda: points.reached(points.BETWEEN_SLOTS))
                epoch = self.server.fcall("cs_release", keys, [self.token, 1, 0])
            else:
                data, args = self._flat(self._all_writes(), start=4)
                epoch = self.server.fcall("cs_commit", [*keys, *data], [self.token, *args])
                points.reached(points.FIRST_WRITE)
                if self.server.address.strict:
                    self.server.wait_replicas({None})
        except BaseException:
            self.cache.clear()
            raise
        self.cache.epoch = epoch
        self._added.clear()
        self._removed.clear()

    def _apply(self, groups: list[tuple[list[bytes], list[Any]]],
               between: Callable[[], object] = lambda: None) -> None:  # fmt: skip
        """Write a commit slot by slot, as its journal says. In strict mode, only once a
        replica has the journal (one lost with its master was never applied anywhere), and
        until a replica of each master written to has the writes (before the release drops
        the journal that covers them)."""
        strict = self.server.address.strict
        if strict:
            self.server.wait_replicas({self.server.node_of(self._journal)})
        written = self.server.apply(groups, self.fence, between)
        if strict:
            self.server.wait_replicas(written)

    def abort(self) -> None:
        """Drop the unit's changes (and what the cache learnt with them); release the lock."""
        self._drop()
        with contextlib.suppress(StoreError):  # else it expires
            self.server.fcall("cs_release", self._keys, [self.token, 0, 0])

    def _groups(self) -> list[tuple[list[bytes], list[Any]]]:
        by_slot: dict[int, list[tuple[bytes, tuple[Any, ...]]]] = {}
        for entry in self._all_writes():
            by_slot.setdefault(key_slot(entry[0]), []).append(entry)
        return [self._flat(ops, start=1) for ops in by_slot.values()]


def _within(member: bytes, after: bytes | None, before: bytes | None, inclusive: bool) -> bool:
    if after is not None and (member < after or (member == after and not inclusive)):
        return False
    return before is None or member < before
