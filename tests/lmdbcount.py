"""Counting what a store reads: cursor moves (each positioning or step, each item an iterator
yields) and point reads, by table, through proxies around the engine's LMDB transactions."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

from crawlstore import Store

#: Cursor calls that move it, or read past where it is.
MOVES = {"first", "last", "next", "prev", "set_range", "set_key", "set_key_dup", "set_range_dup",
         "next_dup", "next_nodup", "prev_dup", "prev_nodup", "first_dup", "last_dup", "pop",
         "getmulti"}  # fmt: skip
ITERATORS = {"iternext", "iternext_dup", "iternext_nodup", "iterprev", "iterprev_dup",
             "iterprev_nodup", "__iter__"}  # fmt: skip


class _Cursor:
    def __init__(self, cursor: Any, table: str, counts: Counter[str]) -> None:
        self._cursor, self._table, self._counts = cursor, table, counts

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._cursor, name)
        if name in MOVES:

            def move(*args: Any, **kwargs: Any) -> Any:
                self._counts[self._table] += 1
                return attr(*args, **kwargs)

            return move
        if name in ITERATORS:

            def iterate(*args: Any, **kwargs: Any) -> Iterator[Any]:
                for item in attr(*args, **kwargs):
                    self._counts[self._table] += 1
                    yield item

            return iterate
        return attr

    def __iter__(self) -> Iterator[Any]:
        return self.__getattr__("__iter__")()  # type: ignore[no-any-return]


class _Txn:
    def __init__(self, txn: Any, names: dict[int, str], counts: Counter[str]) -> None:
        self._txn, self._names, self._counts = txn, names, counts

    def _table(self, db: Any) -> str:
        return self._names.get(id(db), "main")

    def cursor(self, db: Any = None) -> _Cursor:
        return _Cursor(self._txn.cursor(db=db), self._table(db), self._counts)

    def get(self, key: Any, default: Any = None, db: Any = None) -> Any:
        self._counts[self._table(db)] += 1
        return self._txn.get(key, default, db=db)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._txn, name)


@contextlib.contextmanager
def counting(store: Store) -> Iterator[Counter[str]]:
    """Count, by table, the cursor moves and point reads of every transaction begun inside."""
    engine = store._storage.engine
    counts: Counter[str] = Counter()
    names = {id(db): name for name, db in engine.dbs.items()}
    begin = engine.begin

    def counted(write: bool) -> Any:
        return _Txn(begin(write), names, counts)

    engine.begin = counted  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        del engine.begin
