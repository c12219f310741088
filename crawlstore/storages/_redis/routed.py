"""The unit of a transaction over every bucket of a store in partitions (format 2).

Such a transaction runs units on buckets inside it (a page's reports and links, a pop), which
commit when it commits, each on its bucket (``partitioned.py``). What it reads of a bucket it
holds a unit on must show its own writes there: ``RoutedUnit`` sends each key's reads and
writes to the bucket unit of the key's hash tag when the transaction holds one, and to the
store's unit (under the store lock) otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...errors import StoreError
from .bucket import BucketUnit, hash_tag
from .unit import CachedUnit, Saved

__all__ = ["RoutedUnit"]


class RoutedUnit(CachedUnit):
    """The store's unit, and the bucket units ``held`` (by hash tag, filled as the
    transaction goes: the dict is read at each call). A ``CachedUnit`` in type only: every
    call goes to one of them."""

    def __init__(self, store: CachedUnit, held: dict[bytes, BucketUnit]) -> None:
        super().__init__(store.server, store.cache)
        self.store = store
        self.held = held

    def _of(self, key: bytes) -> CachedUnit:
        if self.held:
            unit = self.held.get(hash_tag(key) or b"")
            if unit is not None:
                return unit
        return self.store

    def has_writes(self) -> bool:
        return bool(self.store.writes) or any(unit.writes for unit in self.held.values())

    def read(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Reads in one round trip, but those of keys the transaction wrote (those of a held
        bucket, or written by the store's unit): those as their unit answers them, with its
        writes: ``HGET``, ``HGETALL`` and a sorted set's first members (``ZRANGE key - +
        BYLEX LIMIT 0 n``)."""
        replies: list[Any] = [None] * len(commands)
        plain: list[int] = []
        for i, command in enumerate(commands):
            unit = self._of(command[1]) if len(command) > 1 else self.store
            if unit is self.store and (len(command) < 2 or command[1] not in unit.writes):
                plain.append(i)  # (nothing of this unit's own to show)
            elif command[0] == "HGET":
                replies[i] = unit.hget(command[1], command[2])
            elif command[0] == "HGETALL":
                replies[i] = unit.hgetall(command[1])
            elif command[0] == "ZRANGE" and command[2:7] == ("-", "+", "BYLEX", "LIMIT", 0):
                replies[i] = unit.zrange(command[1], None, None, command[7])
            else:
                raise StoreError(f"a transaction reads {command[0]} of a bucket it writes")
        if plain:
            for i, reply in zip(plain, self.store.read([commands[i] for i in plain]), strict=True):
                replies[i] = reply
        return replies

    def hget(self, key: bytes, field: bytes) -> bytes | None:
        return self._of(key).hget(key, field)

    def hgetall(self, key: bytes) -> dict[bytes, bytes]:
        return self._of(key).hgetall(key)

    def hset(self, key: bytes, field: bytes, value: bytes | None) -> None:
        self._of(key).hset(key, field, value)

    def zrange(self, key: bytes, after: bytes | None, before: bytes | None, limit: int,
               *, inclusive: bool = False) -> list[bytes]:  # fmt: skip
        return self._of(key).zrange(key, after, before, limit, inclusive=inclusive)

    def zadd(self, key: bytes, member: bytes) -> None:
        self._of(key).zadd(key, member)

    def zrem(self, key: bytes, member: bytes) -> None:
        self._of(key).zrem(key, member)

    def smembers_known(self, key: bytes, members: list[bytes]) -> list[bool]:
        return self._of(key).smembers_known(key, members)

    def sadd(self, key: bytes, member: bytes) -> None:
        self._of(key).sadd(key, member)

    def getbits(self, key: bytes, positions: list[int]) -> list[int]:
        return self._of(key).getbits(key, positions)

    def setbits(self, key: bytes, positions: list[int]) -> None:
        self._of(key).setbits(key, positions)

    def allocate(self, key: bytes, size: int) -> None:
        self._of(key).allocate(key, size)

    def delete(self, key: bytes) -> None:
        self._of(key).delete(key)

    def unread(self, keys: Iterable[bytes]) -> list[bytes]:
        return self.store.unread(keys)

    def loaded(self, key: bytes, members: list[bytes]) -> list[bytes] | None:
        return self.store.loaded(key, members)

    def snapshot(self) -> Saved:
        """(The held units' writes are kept aside here, by tag: ``restore`` takes them.)"""
        self._saved = {tag: unit.snapshot() for tag, unit in self.held.items()}
        return self.store.snapshot()

    def restore(self, saved: Saved) -> None:
        self.store.restore(saved)
        for tag, unit in self.held.items():
            unit.restore(self._saved.get(tag, ({}, set())))
