"""``StoreStateMap``: a facade's key/value state, persisted in the store's ``state`` table."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import lmdb

from ..frontier.protocol import check_namespace
from . import keys
from .codec import pack, unpack
from .context import WriteContext

if TYPE_CHECKING:
    from .engine import Engine


_HASHED = keys.HASHED  # a long key is stored under a digest, with the key kept in the value


class StoreStateMap(MutableMapping[str, Any]):
    """A mapping of str to msgpack-able values under one crawl and namespace; keys of any
    length (long ones are stored under a digest)."""

    def __init__(self, engine: Engine, crawl_prefix: bytes, namespace: str) -> None:
        self._engine = engine
        check_namespace(namespace)
        self._prefix = crawl_prefix + namespace.encode("utf-8") + b"\x00"

    def _key(self, key: str) -> bytes:
        return keys.text_key(self._prefix, key, "a state key")

    def __getitem__(self, key: str) -> Any:
        k = self._key(key)
        raw = self._engine.read(lambda txn: txn.get(k, db=self._engine.dbs["state"]))
        if raw is None:
            raise KeyError(key)
        value = unpack("state", k, raw)
        return value[1] if k[len(self._prefix) :].startswith(_HASHED) else value

    def __setitem__(self, key: str, value: Any) -> None:
        k = self._key(key)
        v = pack([key, value] if k[len(self._prefix) :].startswith(_HASHED) else value)
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
            for k, v in cursor:
                if k[: len(self._prefix)] != self._prefix:
                    break
                rest = bytes(k[len(self._prefix) :])
                out.append(unpack("state", k, v)[0] if rest[:1] == _HASHED else rest.decode())
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self._engine.read(self._keys))

    def __len__(self) -> int:
        return len(self._engine.read(self._keys))
