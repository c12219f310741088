"""``StoreStateMap``: a facade's key/value state, persisted in the store's ``state`` table."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import lmdb

from .engine import WriteContext, pack, unpack

if TYPE_CHECKING:
    from .engine import Engine


class StoreStateMap(MutableMapping[str, Any]):
    """A mapping of str to msgpack-able values under one crawl and namespace."""

    def __init__(self, engine: Engine, crawl_prefix: bytes, namespace: str) -> None:
        self._engine = engine
        self._prefix = crawl_prefix + namespace.encode("utf-8") + b"\x00"

    def _key(self, key: str) -> bytes:
        if not isinstance(key, str):
            raise TypeError(f"state keys are str, not {type(key).__name__}")
        return self._prefix + key.encode("utf-8")

    def __getitem__(self, key: str) -> Any:
        k = self._key(key)
        raw = self._engine.read(lambda txn: txn.get(k, db=self._engine.dbs["state"]))
        if raw is None:
            raise KeyError(key)
        return unpack("state", k, raw)

    def __setitem__(self, key: str, value: Any) -> None:
        k, v = self._key(key), pack(value)
        self._engine.run(lambda ctx: ctx.txn.put(k, v, db=ctx.dbs["state"]))

    def __delitem__(self, key: str) -> None:
        k = self._key(key)

        def op(ctx: WriteContext) -> bool:
            return bool(ctx.txn.delete(k, db=ctx.dbs["state"]))

        if not self._engine.run(op):
            raise KeyError(key)

    def _keys(self, txn: lmdb.Transaction) -> list[str]:
        out = []
        cursor = txn.cursor(db=self._engine.dbs["state"])
        if cursor.set_range(self._prefix):
            for k in cursor.iternext(values=False):
                if k[: len(self._prefix)] != self._prefix:
                    break
                out.append(bytes(k[len(self._prefix) :]).decode("utf-8"))
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self._engine.read(self._keys))

    def __len__(self) -> int:
        return len(self._engine.read(self._keys))
