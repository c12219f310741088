"""``StoreValidators``: ETag and Last-Modified per fingerprint, persisted across runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..validators import Validator
from .engine import WriteContext, pack, unpack

if TYPE_CHECKING:
    from ..clock import Clock
    from .engine import Engine

__all__ = ["StoreValidators"]


class StoreValidators:
    """Validators keyed by request fingerprint; inside ``store.transaction()`` a ``put``
    commits with the page's report."""

    def __init__(self, engine: Engine, crawl_prefix: bytes, clock: Clock) -> None:
        self._engine = engine
        self._prefix = crawl_prefix
        self._clock = clock

    def _key(self, fp: object) -> bytes:
        if not isinstance(fp, bytes) or len(fp) != 16:
            raise TypeError(f"a fingerprint is 16 bytes: {fp!r:.100}")
        return self._prefix + fp

    def get(self, fp: bytes) -> Validator | None:
        key = self._key(fp)
        raw = self._engine.read(lambda txn: txn.get(key, db=self._engine.dbs["validators"]))
        if raw is None:
            return None
        etag, last_modified, _ = unpack("validators", key, raw)
        validator, _ = Validator.lenient(etag, last_modified)  # older files kept anything
        return validator or None

    def stored_at(self, fp: bytes) -> float | None:
        """When the validators of ``fp`` were recorded."""
        key = self._key(fp)
        raw = self._engine.read(lambda txn: txn.get(key, db=self._engine.dbs["validators"]))
        return float(unpack("validators", key, raw)[2]) if raw is not None else None

    def _change(self, ctx: WriteContext, key: bytes, value: bytes | None) -> None:
        db = ctx.dbs["validators"]
        existed = ctx.txn.get(key, db=db) is not None
        if value is None:
            ctx.txn.delete(key, db=db)
        else:
            ctx.txn.put(key, value, db=db)
        delta = (value is not None) - existed
        if delta:
            ctx.counters(self._prefix)["validators"] += delta

    def put(self, fp: bytes, validator: Validator) -> None:
        """Store ``validator``; an empty one deletes what was stored."""
        key = self._key(fp)
        if not isinstance(validator, Validator):
            raise TypeError(f"expected a Validator, not {type(validator).__name__}")
        value = (
            pack([validator.etag, validator.last_modified, self._clock()]) if validator else None
        )
        self._engine.run(lambda ctx: self._change(ctx, key, value))

    def delete(self, fp: bytes) -> None:
        key = self._key(fp)
        self._engine.run(lambda ctx: self._change(ctx, key, None))

    def __len__(self) -> int:
        return int(self._engine.read_counters(self._prefix).get("validators", 0))
