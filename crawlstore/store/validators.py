"""``StoreValidators``: ETag and Last-Modified per fingerprint, persisted across runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..validators import Validator
from .codec import pack, unpack
from .context import WriteContext
from .seen import _Crawl

if TYPE_CHECKING:
    from ..clock import Clock
    from .storage import LmdbStorage

__all__ = ["StoreValidators"]


class StoreValidators:
    """Validators keyed by request fingerprint; inside ``store.transaction()`` a ``put``
    commits with the page's report."""

    def __init__(self, storage: LmdbStorage, crawl: str, clock: Clock) -> None:
        self._storage = storage
        self._crawl = _Crawl(storage, crawl, clock)
        self._clock = clock

    @staticmethod
    def _check(fp: object) -> bytes:
        if not isinstance(fp, bytes) or len(fp) != 16:
            raise TypeError(f"a fingerprint is 16 bytes: {fp!r:.100}")
        return fp

    def _read(self, fp: bytes) -> tuple[bytes, Any] | None:
        def read() -> tuple[bytes, Any] | None:
            prefix = self._crawl.read()
            raw = self._storage.get("validators", prefix + fp) if prefix is not None else None
            return (prefix + fp, raw) if prefix is not None and raw is not None else None

        return self._storage.view(read)

    def get(self, fp: bytes) -> Validator | None:
        """The validators stored for ``fp``, or None."""
        found = self._read(self._check(fp))
        if found is None:
            return None
        etag, last_modified, _ = unpack("validators", *found)
        validator, _ = Validator.lenient(etag, last_modified)  # older files kept anything
        return validator or None

    def stored_at(self, fp: bytes) -> float | None:
        """When the validators of ``fp`` were recorded."""
        found = self._read(self._check(fp))
        return float(unpack("validators", *found)[2]) if found is not None else None

    def _change(self, ctx: WriteContext, fp: bytes, value: bytes | None) -> None:
        prefix = self._crawl.write() if value is not None else self._crawl.read()
        if prefix is None:  # deleting from a crawl that does not exist
            return
        db, key = ctx.dbs["validators"], prefix + fp
        existed = ctx.txn.get(key, db=db) is not None
        if value is None:
            ctx.txn.delete(key, db=db)
        else:
            ctx.txn.put(key, value, db=db)
        delta = (value is not None) - existed
        if delta:
            ctx.counters(prefix)["validators"] += delta

    def put(self, fp: bytes, validator: Validator) -> None:
        """Store ``validator``; an empty one deletes what was stored."""
        self._check(fp)
        if not isinstance(validator, Validator):
            raise TypeError(f"expected a Validator, not {type(validator).__name__}")
        value = (
            pack([validator.etag, validator.last_modified, self._clock()]) if validator else None
        )
        self._storage.run_ctx(lambda ctx: self._change(ctx, fp, value))

    def delete(self, fp: bytes) -> None:
        """Forget the validators of ``fp``."""
        self._check(fp)
        self._storage.run_ctx(lambda ctx: self._change(ctx, fp, None))

    def __len__(self) -> int:
        return self._crawl.counter("validators")
