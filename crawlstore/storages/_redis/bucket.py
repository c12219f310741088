"""Bucket units on Redis: units on one bucket that commit with a compare-and-set on the
bucket's version instead of taking a lock.

A bucket is one hash tag (``{ns:c:17}``): all its keys live in one slot. It keeps a version
key, a value that each commit replaces with a new one, never used twice (8 random bytes in
hex), absent until the first. A unit reads under a version and commits its writes with one
call (``cs_commit_v``) that writes them only if the bucket is still at that version, and sets
a new one; else nothing is written, the process's cache of the bucket is dropped, and the
unit raises ``Conflict``: the caller runs it again, on what the bucket holds now.

The cache of a bucket remembers the version it was read under, so a unit that begins on it
sends nothing: what it reads from the cache is checked by its commit. What it reads from the
server is followed, in the same round trip, by a read of the version: one that moved raises
``Conflict`` at once. So a unit's reads are all of one version, and a unit with writes is never
committed on stale reads. A unit without writes commits nothing and checks nothing more: it saw
a snapshot of its bucket that may be stale by what other processes committed there since this
process last committed, validated or read from the server there; ``validate`` checks it is
current in one round trip. A version is never used twice, so a commit lost in a failover cannot
make a cache look current.

A bucket unit reads and writes its bucket's keys only (one slot: one call commits them);
another key is refused with ``StoreError``. Bucket units do not take the store lock: units of
``unit.Unit`` on the same keys are not kept apart from them.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

from ...errors import StoreError, TransactionConflict
from .server import Call, Server
from .unit import CACHE_LIMIT, Cache, CachedUnit, Saved

__all__ = ["BucketUnit", "Conflict", "WideUnit", "commit_all", "commit_many", "hash_tag"]

#: The expected version of a unit that read nothing from the server: its writes hold whatever
#: the bucket's version (``library.lua``).
ANY = b"*"


class Conflict(TransactionConflict):
    """The bucket's version moved since the unit read it: nothing was written; run the unit
    again. A ``TransactionConflict``, so that code between a read inside a transaction and the
    transaction's end (a worker's group) tells it from a failure of its own."""

    def __init__(
        self, message: str, key: bytes = b"", expected: bytes = b"", found: bytes = b""
    ) -> None:
        super().__init__(message)
        #: The bucket's version key, the version the unit read under, the one found.
        self.key, self.expected, self.found = key, expected, found


def hash_tag(key: bytes) -> bytes | None:
    """The hash tag of ``key`` with its braces (``{ns:c:17}``), or None when it has none (its
    slot is that of the whole key)."""
    start = key.find(b"{")
    if start < 0:
        return None
    end = key.find(b"}", start + 1)
    if end <= start + 1:
        return None
    return key[start : end + 1]


class BucketUnit(CachedUnit):
    """One unit on the bucket of ``version_key`` (its hash tag), reading through ``cache``
    (that bucket's, kept by the caller from unit to unit); ``commit`` or ``abort`` ends it.

    Round trips: ``begin`` none; a read the cache answers none, another one (with the
    version's, before and after it when the cache knew no version); ``commit`` none without
    writes, one with (and a ``WAIT`` in strict mode); ``abort`` none; ``validate`` one.
    ``Conflict`` comes from a read or the commit (or ``validate``): the unit is over, the caller
    runs it again.
    """

    def __init__(self, server: Server, cache: Cache, version_key: bytes) -> None:
        super().__init__(server, cache)
        tag = hash_tag(version_key)
        if tag is None:
            raise ValueError(f"a bucket's version key has a hash tag: {version_key!r}")
        self.version_key = version_key
        self.tag = tag
        #: The version the unit reads under (b"": none yet; None: not read yet).
        self._version: bytes | None = None

    @property
    def version(self) -> bytes | None:
        """The bucket's version the unit reads under: b"" when the bucket has none yet, None
        while it is not known (a cache that knew none, before the unit's first read). After a
        commit, the version it set; after a ``Conflict``, the one found."""
        return self._version

    def begin(self) -> None:
        """Start on the cache as it is: no round trip. A cache that knows no version, or that
        the server's failovers since it was read (``Server.disturbed``) or its size make
        doubtful, starts empty; the unit's first read then reads the version too."""
        cache = self.cache
        if (cache.epoch is None or cache.size() > CACHE_LIMIT
                or cache.disturbed != self.server.disturbed):  # fmt: skip
            cache.clear()
            cache.disturbed = self.server.disturbed
        self._version = cache.epoch
        self._settle_cache()

    def read(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send reads of the bucket's keys in one round trip, followed by a read of the
        version: ``Conflict`` when it is no longer the unit's, so that everything a unit reads
        is of one version. When the unit does not know its version yet, it is read first too
        (what follows was written at it or after)."""
        for command in commands:
            if len(command) < 2:
                raise StoreError(f"{self.server.address}: a bucket unit reads keys of its bucket")
            self._own(command[1], "read")
        version = ("GET", self.version_key)
        if self._version is None:
            replies = self.server.read([version, *commands, version])
            self._version = self.cache.epoch = replies[0] or b""
        else:
            replies = [None, *self.server.read([*commands, version])]
        if (replies[-1] or b"") != self._version:
            self._conflict(replies[-1] or b"")
        return replies[1:-1]

    def _writing(self, key: bytes) -> None:
        if key == self.version_key:
            raise StoreError(f"{self.server.address}: a unit does not write its bucket's version")
        self._own(key, "write")

    def _own(self, key: bytes, what: str) -> None:
        if not key.startswith(self.tag) and hash_tag(key) != self.tag:
            raise StoreError(
                f"{self.server.address}: a bucket unit on {self.tag!r} cannot {what} {key!r}, "
                "a key of another hash tag (a bucket unit commits one slot only)"
            )

    def restore(self, saved: Saved) -> None:
        super().restore(saved)
        # what is read from now on was written at the unit's version or after, as before
        self.cache.epoch = self._version

    def call(self, new: bytes) -> Call:
        """The unit's commit as a ``cs_commit_v`` call setting the version ``new``."""
        data, args = self._flat(self._all_writes(), start=2)
        expected = ANY if self._version is None else self._version
        return "cs_commit_v", [self.version_key, *data], [expected, new, *args]

    def commit(self) -> None:
        """Write the unit's changes if the bucket is still at the version the unit read under
        (one round trip; none without writes), else ``Conflict`` (nothing written, the cache
        dropped). In strict mode, a replica has the commit when this returns."""
        if not self.writes:
            self._done()
            return
        new = os.urandom(8).hex().encode()
        try:
            reply = self.server.send([self.call(new)])[0]
        except BaseException:
            self._drop()  # the commit may or may not be written
            raise
        self.settle(reply, new)
        if self.server.address.strict:
            try:
                self.server.wait_replicas({self.node()})
            except BaseException:
                self.cache.clear()  # on the master only: a failover may lose it
                raise

    def settle(self, reply: Any, new: bytes) -> None:
        """End the unit on its ``cs_commit_v`` call's reply: on success the cache is at
        ``new``; on a conflict it is dropped, knowing the version found, and ``Conflict``."""
        if reply[0] == 1 or reply[1] == new:  # (a call sent again after its reply was lost)
            self._version = self.cache.epoch = new
            self._done()
            return
        self._conflict(reply[1])

    def _conflict(self, found: bytes) -> NoReturn:
        expected = self._version or b""
        self._drop()
        self._version = self.cache.epoch = found
        raise Conflict(
            f"{self.server.address}: the bucket {self.tag!r} moved from version {expected!r} to "
            f"{found!r} since the unit read it: nothing was written",
            self.version_key,
            expected,
            found,
        )

    def validate(self) -> None:
        """Check, in one round trip, that the bucket is still at the version the unit read
        under, else ``Conflict`` (the unit's writes and the cache dropped): a unit without
        writes that must not answer from stale reads calls it before it answers."""
        found = self.server.read([("GET", self.version_key)])[0] or b""
        if self._version is None:  # nothing read from the server yet: nothing to check
            self._version = self.cache.epoch = found
        else:
            self.check(found)

    def check(self, found: bytes) -> None:
        """``Conflict`` (as ``validate``) when ``found``, the bucket's version read just now,
        is not the one the unit read under."""
        if found != self._version:
            self._conflict(found)

    def abort(self) -> None:
        """Drop the unit's changes and what the cache learnt (no round trip)."""
        self._drop()
        self._version = None

    def node(self) -> Any:
        """The node of the bucket (None on one server)."""
        return self.server.node_of(self.version_key) if self.server.address.cluster else None

    def _done(self) -> None:
        self.writes.clear()
        self.deleted.clear()
        self._added.clear()
        self._removed.clear()


def commit_many(server: Server, units: list[BucketUnit]) -> list[bool]:
    """Commit bucket units of different buckets at once: one round trip per node (``send``).
    For each unit, True when it committed (or had no writes), False when it conflicted (its
    cache dropped, as ``commit`` does). A unit whose call failed otherwise has its cache
    dropped, and the first such failure is raised once every unit is settled. In strict mode,
    a replica of every node written to has the commits when this returns."""
    results = [True] * len(units)
    pending: list[tuple[int, BucketUnit, bytes]] = []
    for i, unit in enumerate(units):
        if unit.writes:
            pending.append((i, unit, os.urandom(8).hex().encode()))
        else:
            unit._done()
    try:
        replies = server.send([u.call(new) for _, u, new in pending], raise_on_error=False)
    except BaseException:
        for _, unit, _ in pending:
            unit._drop()
        raise
    failure: BaseException | None = None
    written = []
    for (i, unit, new), reply in zip(pending, replies, strict=True):
        if isinstance(reply, BaseException):
            unit._drop()
            failure = failure or reply
            results[i] = False
            continue
        try:
            unit.settle(reply, new)
            written.append(unit)
        except Conflict:
            results[i] = False
    if written and server.address.strict:
        try:
            server.wait_replicas({u.node() for u in written})
        except BaseException:
            for unit in written:
                unit.cache.clear()
            raise
    if failure is not None:
        raise failure
    return results


class WideUnit(BucketUnit):
    """A unit over keys of any hash tag, versioned by one key (the store's epoch): on one
    server only, where one call reaches every key (``commit_all``)."""

    def _own(self, key: bytes, what: str) -> None:
        if self.server.address.cluster:
            raise StoreError(f"{self.server.address}: a unit over several slots needs one server")


def commit_all(server: Server, units: list[BucketUnit]) -> None:
    """Commit these units (of different version keys) at once, or none of them: one call on
    one server (``cs_commit_all``). A unit that read from the server and wrote nothing is
    checked, not written. ``Conflict`` (every unit's writes and cache dropped) when a version
    moved since its unit read under it."""
    taking = [u for u in units if u.writes or u.version is not None]
    if not any(u.writes for u in taking):
        for unit in taking:
            unit._done()
        return
    news = [os.urandom(8).hex().encode() if u.writes else b"" for u in taking]
    ops = [op for u in taking for op in u._all_writes()]
    data, args = CachedUnit._flat(ops, start=len(taking) + 1)
    expected = [ANY if u.version is None else u.version for u in taking]
    keys = [u.version_key for u in taking]
    try:
        reply = server.send([("cs_commit_all", [*keys, *data],
                              [len(taking), *expected, *news, *args])])[0]  # fmt: skip
    except BaseException:
        for unit in taking:
            unit._drop()
        raise
    if reply[0] != 1:
        moved = taking[int(reply[1]) - 1]
        for unit in taking:
            if unit is not moved:
                unit._drop()
                unit._version = None
        moved._conflict(reply[2])
    for unit, new in zip(taking, news, strict=True):
        if new:
            unit._version = unit.cache.epoch = new
        unit._done()
    if server.address.strict:
        try:
            server.wait_replicas({None})
        except BaseException:
            for unit in taking:
                unit.cache.clear()
            raise
