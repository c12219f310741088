"""Write units on Redis: the store lock, reads through a cache, writes kept until the commit.

A unit takes the store's lock (``cs_acquire``: a key with a token and a ttl), reads what it
needs, and keeps its writes; the commit sends them all at once. On one server that is one
function call (``cs_commit``), which checks the lock, writes, and bumps the store's epoch. On a
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
from typing import Any

import msgpack

from ..errors import StoreError
from .server import Server, key_slot

__all__ = ["Cache", "Unit"]

#: Sorted sets of up to this many members are read whole and kept in the cache.
WHOLE = 256
#: The cache is dropped when it holds more entries than this.
CACHE_LIMIT = 200_000


class Cache:
    """What this process knows of the store as of ``epoch``: hash fields (None: absent), whole
    hashes, whole sorted sets."""

    def __init__(self) -> None:
        self.epoch: bytes | None = None
        self.fields: dict[bytes, dict[bytes, bytes | None]] = {}
        self.whole: set[bytes] = set()
        self.zsets: dict[bytes, list[bytes]] = {}
        self.members: dict[bytes, dict[bytes, bool]] = {}
        #: Sorted sets known to be too large to keep whole.
        self.big: set[bytes] = set()

    def clear(self) -> None:
        self.epoch = None
        self.fields.clear()
        self.whole.clear()
        self.zsets.clear()
        self.members.clear()
        self.big.clear()

    def size(self) -> int:
        return len(self.fields) + len(self.zsets) + len(self.members)


class Unit:
    """One write unit (or read) over the store's keys; ``commit`` or ``abort`` ends it."""

    def __init__(self, server: Server, cache: Cache, store_tag: bytes) -> None:
        self.server = server
        self.cache = cache
        self._lock = store_tag + b":lock"
        self._epoch = store_tag + b":epoch"
        self._journal = store_tag + b":journal"
        self.ops: list[tuple[bytes, tuple[Any, ...]]] = []
        #: Changes to sorted sets not held whole: members added and removed in this unit.
        self._added: dict[bytes, set[bytes]] = {}
        self._removed: dict[bytes, set[bytes]] = {}
        #: Hash fields this unit wrote.
        self._dirty: dict[bytes, set[bytes]] = {}
        self.token = os.urandom(8).hex() + str(os.getpid())
        self.started = 0.0

    # -- the lock -------------------------------------------------------------------------------

    def begin(self) -> None:
        ttl = self.server.address.lock_ttl
        ttl_ms = max(100, int(ttl * 1000))
        deadline = time.monotonic() + 3 * ttl + 5
        pause = 0.0002
        while True:
            reply = self.server.fcall("cs_acquire", [self._lock, self._epoch, self._journal],
                                      [self.token, ttl_ms])  # fmt: skip
            if reply[0] == 1:
                break
            if time.monotonic() > deadline:
                raise StoreError(
                    f"{self.server.address}: the store lock stayed taken for {3 * ttl + 5:.0f} s"
                )
            time.sleep(min(pause, max(0.0001, reply[1] / 1000)))
            pause = min(pause * 2, 0.01)
        self.started = time.monotonic()
        epoch, journal = reply[1], reply[2] if len(reply) > 2 else None
        if journal:  # a commit left half done by a process that died: finish it first
            try:
                self._apply([(list(k), list(a)) for k, a in msgpack.unpackb(journal)])
                epoch = self.server.fcall("cs_release", [self._lock, self._epoch,
                                          self._journal], [self.token, 1, 1])  # fmt: skip
            except BaseException:
                self.abort()  # the journal stays for the next unit
                raise
            epoch = str(epoch).encode() if isinstance(epoch, int) else epoch
        cache = self.cache
        if cache.epoch != epoch or cache.size() > CACHE_LIMIT:
            cache.clear()
            cache.epoch = epoch
        for key in [k for k, members in cache.zsets.items() if len(members) > 4 * WHOLE]:
            del cache.zsets[key]  # grew large: read from the server from now on
            cache.big.add(key)

    def commit(self) -> None:
        """Write the unit's changes and release the lock."""
        keys = [self._lock, self._epoch, self._journal]
        if not self.ops:
            self.server.fcall("cs_release", keys, [self.token, 0, 0])
            return
        try:
            if self.server.address.cluster:
                groups = self._groups()
                self.server.fcall("cs_journal", [self._lock, self._journal],
                                  [self.token, msgpack.packb(groups)])  # fmt: skip
                if time.monotonic() - self.started > self.server.address.lock_ttl / 2:
                    # the lock may be gone before all is written: leave it to the journal
                    raise StoreError(f"{self.server.address}: a unit outlived half its lock ttl")
                self._apply(groups)
                epoch = self.server.fcall("cs_release", keys, [self.token, 1, 0])
            else:
                data, args = self._flat(start=4)
                epoch = self.server.fcall("cs_commit", keys + data, [self.token, *args])
                if self.server.address.strict:
                    self.server.wait_replicas({None})
        except BaseException:
            self.cache.clear()
            raise
        self.cache.epoch = str(epoch).encode() if isinstance(epoch, int) else epoch
        self._added.clear()
        self._removed.clear()

    def _apply(self, groups: list[tuple[list[bytes], list[Any]]]) -> None:
        """Write a commit slot by slot, as its journal says. In strict mode, only once a
        replica has the journal (one lost with its master was never applied anywhere), and
        until a replica of each master written to has the writes (before the release drops
        the journal that covers them)."""
        strict = self.server.address.strict
        if strict:
            self.server.wait_replicas({self.server.node_of(self._journal)})
        written = self.server.apply(groups)
        if strict:
            self.server.wait_replicas(written)

    def abort(self) -> None:
        """Drop the unit's changes (and what the cache learnt with them); release the lock."""
        self.cache.clear()
        self.ops.clear()
        with contextlib.suppress(StoreError):  # else it expires
            self.server.fcall("cs_release", [self._lock, self._epoch, self._journal],
                              [self.token, 0, 0])  # fmt: skip

    def _flat(self, start: int) -> tuple[list[bytes], list[Any]]:
        index: dict[bytes, int] = {}
        keys: list[bytes] = []
        args: list[Any] = []
        for key, op in self.ops:
            i = index.get(key)
            if i is None:
                i = index[key] = len(keys) + start
                keys.append(key)
            args.append(op[0])
            args.append(i)
            args.extend(op[1:])
        return keys, args

    def _groups(self) -> list[tuple[list[bytes], list[Any]]]:
        by_slot: dict[int, list[tuple[bytes, tuple[Any, ...]]]] = {}
        for entry in self.ops:
            by_slot.setdefault(key_slot(entry[0]), []).append(entry)
        groups = []
        for ops in by_slot.values():
            saved, self.ops = self.ops, ops
            try:
                groups.append(self._flat(start=1))
            finally:
                self.ops = saved
        return groups

    # -- hashes ---------------------------------------------------------------------------------

    def hget(self, key: bytes, field: bytes) -> bytes | None:
        known = self.cache.fields.get(key)
        if known is not None and (field in known or key in self.cache.whole):
            return known.get(field)
        value = self.server.read([("HGET", key, field)])[0]
        self.cache.fields.setdefault(key, {})[field] = value
        return value  # type: ignore[no-any-return]

    def hgetall(self, key: bytes) -> dict[bytes, bytes]:
        cache = self.cache
        if key not in cache.whole:
            known = cache.fields.setdefault(key, {})
            mine = {f: known[f] for f in self._dirty.get(key, ())}
            known.clear()
            known.update(self.server.read([("HGETALL", key)])[0])
            known.update(mine)  # this unit's writes, not sent yet
            cache.whole.add(key)
        return {f: v for f, v in cache.fields[key].items() if v is not None}

    def hset(self, key: bytes, field: bytes, value: bytes | None) -> None:
        self.cache.fields.setdefault(key, {})[field] = value
        self._dirty.setdefault(key, set()).add(field)
        self.ops.append((key, ("H", field, value) if value is not None else ("h", field)))

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
                members = self.server.read([("ZRANGE", key, "-", "+", "BYLEX", "LIMIT", 0,
                                             WHOLE + 1)])[0]  # fmt: skip
                if len(members) <= WHOLE:  # small: kept whole from now on
                    whole = cache.zsets[key] = list(members)
                else:
                    cache.big.add(key)
                    if after is None and before is None:
                        return list(members[:limit])
        if whole is None:
            lo = b"-" if after is None else (b"[" if inclusive else b"(") + after
            hi = b"+" if before is None else b"(" + before
            members = self.server.read([("ZRANGE", key, lo, hi, "BYLEX", "LIMIT", 0,
                                         limit + len(removed))])[0]  # fmt: skip
            found = set(members) - removed
            found.update(m for m in added if _within(m, after, before, inclusive))
            return sorted(found)[:limit]
        start = 0
        if after is not None:
            start = (bisect.bisect_left if inclusive else bisect.bisect_right)(whole, after)
        end = len(whole) if before is None else bisect.bisect_left(whole, before)
        return whole[start : min(end, start + limit)]

    def zadd(self, key: bytes, member: bytes) -> None:
        whole = self.cache.zsets.get(key)
        if whole is not None:
            i = bisect.bisect_left(whole, member)
            if i == len(whole) or whole[i] != member:
                whole.insert(i, member)
        else:
            self._removed.get(key, set()).discard(member)
            self._added.setdefault(key, set()).add(member)
        self.ops.append((key, ("Z", member)))

    def zrem(self, key: bytes, member: bytes) -> None:
        whole = self.cache.zsets.get(key)
        if whole is not None:
            i = bisect.bisect_left(whole, member)
            if i < len(whole) and whole[i] == member:
                del whole[i]
        else:
            self._added.get(key, set()).discard(member)
            self._removed.setdefault(key, set()).add(member)
        self.ops.append((key, ("z", member)))

    # -- plain sets and bits (seen sets) --------------------------------------------------------

    def smembers_known(self, key: bytes, members: list[bytes]) -> list[bool]:
        known = self.cache.members.setdefault(key, {})
        missing = [m for m in dict.fromkeys(members) if m not in known]
        if missing:
            replies = self.server.read([("SMISMEMBER", key, *missing[i : i + 1000]) for i in
                                        range(0, len(missing), 1000)])  # fmt: skip
            flags = [bool(x) for reply in replies for x in reply]
            known.update(zip(missing, flags, strict=True))
        return [known[m] for m in members]

    def sadd(self, key: bytes, member: bytes) -> None:
        self.cache.members.setdefault(key, {})[member] = True
        self.ops.append((key, ("S", member)))

    def getbits(self, key: bytes, positions: list[int]) -> list[int]:
        commands: list[tuple[Any, ...]] = []
        for i in range(0, len(positions), 500):
            part = positions[i : i + 500]
            commands.append(("BITFIELD_RO", key, *[a for p in part for a in ("GET", "u1", p)]))
        bits = [int(b) for reply in self.server.read(commands) for b in reply]
        for key_, op in self.ops:  # this unit's own bits, not written yet
            if key_ == key and op[0] == "B":
                mine = set(op[2:])
                bits = [1 if p in mine else b for p, b in zip(positions, bits, strict=True)]
        return bits

    def setbits(self, key: bytes, positions: list[int]) -> None:
        self.ops.append((key, ("B", len(positions), *positions)))

    def delete(self, key: bytes) -> None:
        """Remove a whole key."""
        cache = self.cache
        cache.fields[key] = {}
        cache.whole.add(key)
        cache.zsets[key] = []
        cache.big.discard(key)
        cache.members.pop(key, None)
        self._added.pop(key, None)
        self._removed.pop(key, None)
        self.ops.append((key, ("D",)))


def _within(member: bytes, after: bytes | None, before: bytes | None, inclusive: bool) -> bool:
    if after is not None and (member < after or (member == after and not inclusive)):
        return False
    return before is None or member < before
