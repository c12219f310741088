"""A dry run over LMDB: ``Overlay`` looks like a write transaction to ``LmdbStorage`` (get, put,
delete, cursors) over a read transaction. Reads see what the read transaction sees with the
overlay's own writes on top; the writes stay in this process's memory and are dropped with
the overlay. So the storage's own code runs unchanged, key for key, and nothing is written:
``LmdbStorage.scratch`` (the core's ``peek``) needs no write access and blocks no writer.

Only what the frontier's storage uses is offered: plain tables (no duplicate keys), and the
cursor moves ``set_range``, ``next``, ``delete`` and forward iteration.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Any

__all__ = ["Overlay"]


class Overlay:
    """Writes kept aside over ``base`` (an LMDB transaction, or another overlay)."""

    def __init__(self, base: Any) -> None:
        self._base = base
        #: Per table: key -> the value written, or None for a key deleted.
        self._changes: dict[Any, dict[bytes, bytes | None]] = {}
        #: Per table: the keys written with a value, sorted.
        self._written: dict[Any, list[bytes]] = {}
        #: Per table: for a key of the base the overlay changed, a key of the base past it
        #: such that the overlay changed every one in between: a cursor jumps there (the head
        #: of a queue that the dry run keeps taking from is a run of such keys).
        self._skip: dict[Any, dict[bytes, bytes]] = {}

    def id(self) -> int:
        return int(self._base.id())

    def _of(self, db: Any) -> tuple[dict[bytes, bytes | None], list[bytes]]:
        changes = self._changes.get(db)
        if changes is None:
            changes = self._changes[db] = {}
            self._written[db] = []
        return changes, self._written[db]

    def get(self, key: bytes, default: Any = None, db: Any = None) -> Any:
        changes = self._changes.get(db)
        if changes is not None:
            key = bytes(key)
            if key in changes:
                value = changes[key]
                return default if value is None else value
        raw = self._base.get(key, db=db)
        return default if raw is None else bytes(raw)

    def put(self, key: bytes, value: bytes, db: Any = None, **options: Any) -> bool:
        if options:
            raise NotImplementedError(f"a dry run does not offer put({sorted(options)})")
        changes, written = self._of(db)
        key = bytes(key)
        if changes.get(key) is None:
            bisect.insort(written, key)
        changes[key] = bytes(value)
        return True

    def delete(self, key: bytes, value: bytes = b"", db: Any = None) -> bool:
        if value:
            raise NotImplementedError("a dry run does not offer deleting one duplicate")
        key = bytes(key)
        existed = self.get(key, db=db) is not None
        changes, written = self._of(db)
        if changes.get(key) is not None:
            del written[bisect.bisect_left(written, key)]
        changes[key] = None
        return existed

    def cursor(self, db: Any = None) -> OverlayCursor:
        return OverlayCursor(self, db)


class OverlayCursor:
    """A cursor over a table of an overlay: the base's keys, less those the overlay deleted or
    rewrote, merged in key order with the keys the overlay wrote."""

    def __init__(self, overlay: Overlay, db: Any) -> None:
        self._overlay = overlay
        self._db = db
        self._base = overlay._base.cursor(db=db)
        self._key: bytes | None = None
        self._value = b""

    def _seek(self, key: bytes, after: bool) -> bool:
        """Move to the first key at ``key`` or past it (``after``: past it only)."""
        overlay = self._overlay
        changes = overlay._changes.get(self._db) or {}
        written = overlay._written.get(self._db) or []
        found: bytes | None = None
        value = b""
        base = self._base
        skip = overlay._skip.setdefault(self._db, {})
        passed: list[bytes] = []  # keys of the base the overlay changed, walked past
        if base.set_range(key):
            while True:
                candidate = bytes(base.key())
                if candidate not in changes:
                    if candidate != key or not after:
                        found, value = candidate, bytes(base.value())
                        break
                else:
                    passed.append(candidate)
                    jump = skip.get(candidate)
                    if jump is not None:
                        if not base.set_range(jump):
                            break
                        continue
                if not base.next():
                    break
        if found is not None:
            for changed in passed:
                skip[changed] = found
        at = (bisect.bisect_right if after else bisect.bisect_left)(written, key)
        if at < len(written) and (found is None or written[at] < found):
            found = written[at]
            value = changes[found] or b""
        self._key, self._value = found, value
        return found is not None

    def set_range(self, key: bytes) -> bool:
        return self._seek(bytes(key), after=False)

    def first(self) -> bool:
        return self._seek(b"", after=False)

    def next(self) -> bool:
        if self._key is None:
            return self.first()
        return self._seek(self._key, after=True)

    def key(self) -> bytes:
        return self._key if self._key is not None else b""

    def value(self) -> bytes:
        return self._value if self._key is not None else b""

    def delete(self) -> bool:
        """Delete the current key and move to the next one, as LMDB does."""
        if self._key is None:
            return False
        key = self._key
        self._overlay.delete(key, db=self._db)
        self._seek(key, after=True)
        return True

    def iternext(self, keys: bool = True, values: bool = True) -> Iterator[Any]:
        if self._key is None and not self.first():
            return
        while self._key is not None:
            if keys and values:
                yield self._key, self._value
            elif keys:
                yield self._key
            else:
                yield self._value
            if not self.next():
                return

    def __iter__(self) -> Iterator[Any]:
        return self.iternext()
