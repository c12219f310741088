"""A store's seen sets and validators, written once over the storage interface: a storage keeps
their records where its layout says (``StoreStorage``'s view primitives), these classes hold
what they mean.

A view never creates its crawl to read it: a read of a crawl that does not exist sees nothing,
and the first write creates it, its policy not settled yet (the frontier's first write settles
it). A deleted crawl made again starts empty.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from .errors import InvalidArgument, StoreError
from .frontier.policy import CrawlPolicy
from .frontier.spi import CrawlRecord
from .seen import bloom_positions, bloom_size
from .url import Fingerprint
from .validators import Validator

if TYPE_CHECKING:
    from .clock import Clock
    from .frontier.spi import StoreStorage

__all__ = ["StoreBloomSeen", "StoreSeen", "StoreValidators", "seen_kind"]

log = logging.getLogger("crawlstore.seen")
_T = TypeVar("_T")


def _is_fp(fp: object) -> TypeGuard[bytes]:
    return isinstance(fp, bytes) and len(fp) == 16


def _all_fps(fps: Sequence[object]) -> TypeGuard[Sequence[bytes]]:
    """Whether each is a fingerprint (one call for a batch of ``Fingerprint`` values)."""
    return {*map(type, fps)} <= _FINGERPRINT_TYPE or all(map(_is_fp, fps))


_FINGERPRINT_TYPE = {Fingerprint}


def _check(fp: object) -> bytes:
    if not _is_fp(fp):
        raise TypeError(f"a fingerprint is 16 bytes: {fp!r:.100}")
    return fp


class _CrawlView:
    """A view of one crawl of a store."""

    def __init__(self, storage: StoreStorage, crawl: str, clock: Clock) -> None:
        self._storage, self._name, self._clock = storage, crawl, clock

    def _read(self) -> Any:
        """In a unit: the storage's handle of the crawl, None when there is no such crawl."""
        return self._storage.view_data.crawl_ref(self._name)

    def _write(self) -> Any:
        """In a write unit: the crawl's handle, the crawl created when missing."""
        ref = self._storage.view_data.crawl_ref(self._name)
        if ref is None:
            crawl = CrawlRecord(self._name, CrawlPolicy(), self._clock(), settled=False)
            self._storage.save_crawl(crawl)
            ref = self._storage.view_data.crawl_ref(self._name)
        return ref

    def _reading(self, operation: Callable[[Any], _T], empty: _T) -> _T:
        """``operation(handle)`` in one read; ``empty`` when there is no such crawl."""

        def read() -> _T:
            ref = self._read()
            return empty if ref is None else operation(ref)

        return self._storage.view(read)

    def _counter(self, name: str) -> int:
        return self._reading(lambda ref: self._storage.view_data.view_count(ref, name), 0)


class _Seen(_CrawlView):
    """What both kinds of seen set share: one insert is a batch of one."""

    def insert(self, fp: bytes) -> bool:
        """Record ``fp``; True when it was not seen before (a Bloom filter's false positive
        says False)."""
        return self.insert_many([fp]) == 1

    def insert_many(self, fps: Sequence[bytes]) -> int:
        """Record each fingerprint, in one write; how many were not seen before."""
        if not _all_fps(fps):
            for fp in fps:
                _check(fp)  # raises, naming the first that is not a fingerprint
        return self._storage.run(lambda: self._insert(fps)) if fps else 0

    def _insert(self, fps: Sequence[bytes]) -> int:
        raise NotImplementedError

    def __len__(self) -> int:
        return self._counter("seen")


class StoreSeen(_Seen):
    """An exact seen set in the store: about 24 bytes of file a URL in a file, no memory held;
    on Redis, of ``kind`` ``"packed"`` (about 22 bytes of RAM a URL) or ``"set"`` (about 75),
    fixed by the crawl's first insert. Inside ``store.transaction()`` (as ``dedup_with`` uses
    it) its updates join the push."""

    def __init__(self, storage: StoreStorage, crawl: str, clock: Clock,
                 kind: str | None = None) -> None:  # fmt: skip
        kinds = storage.view_data.seen_kinds
        if kind is not None and kind not in kinds:
            raise InvalidArgument(f"an exact seen set is one of {kinds}: {kind!r:.100}")
        super().__init__(storage, crawl, clock)
        self.kind = kind or kinds[0]

    def _kind(self, ref: Any, *, write: bool) -> None:
        stored = self._storage.view_data.seen_mark(ref, self.kind, write=write)
        if stored is not None and stored != self.kind:
            raise StoreError(f"crawl {self._name!r} keeps its seen set as {stored!r}; open it "
                             f"with seen(kind={stored!r})")  # fmt: skip

    def _insert(self, fps: Sequence[bytes]) -> int:
        ref = self._write()
        self._kind(ref, write=True)
        new = self._storage.view_data.seen_add(ref, self.kind, fps)
        if new:
            self._storage.view_data.add_view_count(ref, "seen", new)
        return new

    def __contains__(self, fp: object) -> bool:
        return _is_fp(fp) and self.contains_many([fp])[0]

    def contains_many(self, fps: Sequence[object]) -> list[bool]:
        """Whether each fingerprint was seen, in one read."""

        def read(ref: Any) -> list[bool]:
            good = fps if _all_fps(fps) else [fp for fp in fps if _is_fp(fp)]
            if not good:
                return [False] * len(fps)
            self._kind(ref, write=False)
            if len(good) == len(fps):  # the usual case: every one a fingerprint
                return self._storage.view_data.seen_has(ref, self.kind, good)
            found = dict(
                zip(good, self._storage.view_data.seen_has(ref, self.kind, good), strict=True)
            )
            return [_is_fp(fp) and found[fp] for fp in fps]

        return self._reading(read, [False] * len(fps))

    def __iter__(self) -> Iterator[Fingerprint]:
        """Every fingerprint, in byte order (read in one unit)."""

        def read(ref: Any) -> list[Fingerprint]:
            self._kind(ref, write=False)
            return [Fingerprint(fp) for fp in self._storage.view_data.seen_all(ref, self.kind)]

        empty: list[Fingerprint] = []
        return iter(self._reading(read, empty))


class StoreBloomSeen(_Seen):
    """A Bloom filter kept in the store: about 1.2 bytes a URL at 1%, never a false negative.
    Its parameters are fixed by the crawl filter's first insert; opening it with others
    raises ``StoreError``."""

    def __init__(self, storage: StoreStorage, crawl: str, clock: Clock, expected: int,
                 fp_rate: float) -> None:  # fmt: skip
        super().__init__(storage, crawl, clock)
        self.bits, self.hashes = bloom_size(expected, fp_rate)
        self.expected, self.fp_rate = expected, fp_rate
        self._params = (expected, fp_rate, self.bits, self.hashes)
        #: Parts the storage splits the filter in, and the bits of each.
        self._parts = storage.view_data.bloom_parts(self.bits)
        self._part_bits = math.ceil(self.bits / self._parts)
        self._reading(self._meta, None)

    def _meta(self, ref: Any, *, write: bool = False) -> None:
        stored = self._storage.view_data.bloom_params(ref)
        if stored is None:
            if write:
                self._storage.view_data.bloom_create(
                    ref, self._params, self._parts, self._part_bits
                )
        elif tuple(stored) != self._params:
            raise StoreError(f"this crawl's Bloom filter was created with expected={stored[0]}, "
                             f"fp_rate={stored[1]}; open it with those")  # fmt: skip

    def _where(self, fps: Sequence[bytes]) -> list[tuple[int, list[int]]]:
        part_of = self._storage.view_data.bloom_part
        return [(part_of(fp, self._parts), bloom_positions(fp, self._part_bits, self.hashes))
                for fp in fps]  # fmt: skip

    def _bits(self, ref: Any, wanted: list[tuple[int, list[int]]]) -> dict[tuple[int, int], bool]:
        """The bits at these positions, read a part at a time."""
        by_part: dict[int, list[int]] = {}
        for part, positions in wanted:
            by_part.setdefault(part, []).extend(positions)
        found: dict[tuple[int, int], bool] = {}
        for part, positions in by_part.items():
            bits = self._storage.view_data.bloom_get(ref, part, positions)
            found.update(((part, p), b) for p, b in zip(positions, bits, strict=True))
        return found

    def _insert(self, fps: Sequence[bytes]) -> int:
        ref = self._write()
        self._meta(ref, write=True)  # another process may have created it since this opened
        wanted = self._where(list(dict.fromkeys(fps)))
        found = self._bits(ref, wanted)
        setting: dict[int, list[int]] = {}
        inserted = 0
        for part, positions in wanted:
            if not all(found[(part, p)] for p in positions):
                found.update(((part, p), True) for p in positions)
                setting.setdefault(part, []).extend(positions)
                inserted += 1
        for part, positions in setting.items():
            self._storage.view_data.bloom_set(ref, part, positions)
        if inserted:
            before = self._storage.view_data.add_view_count(ref, "bloom", inserted)
            if before <= self.expected < before + inserted:
                log.warning("the store's Bloom filter holds %d fingerprints, past its expected "
                            "%d: false positives will exceed %.3g", before + inserted,
                            self.expected, self.fp_rate)  # fmt: skip
        return inserted

    def __contains__(self, fp: object) -> bool:
        return self.contains_many([fp])[0]

    def contains_many(self, fps: Sequence[object]) -> list[bool]:
        """Whether each fingerprint may have been seen (no false negatives), in one read."""

        def read(ref: Any) -> list[bool]:
            self._meta(ref)
            good = fps if _all_fps(fps) else [fp for fp in fps if _is_fp(fp)]
            wanted = self._where(good)
            found = self._bits(ref, wanted)
            has = {fp: all(found[(part, p)] for p in positions)
                   for fp, (part, positions) in zip(good, wanted, strict=True)}  # fmt: skip
            return [_is_fp(fp) and has[fp] for fp in fps]

        return self._reading(read, [False] * len(fps))

    def __len__(self) -> int:
        return self._counter("bloom")


class StoreValidators(_CrawlView):
    """Validators (ETag, Last-Modified) keyed by request fingerprint; inside
    ``store.transaction()`` a ``put`` commits with the page's report."""

    def _record(self, fp: bytes) -> list[Any] | None:
        return self._reading(lambda ref: self._storage.view_data.validator(ref, fp), None)

    def get(self, fp: bytes) -> Validator | None:
        """The validators stored for ``fp``, or None."""
        record = self._record(_check(fp))
        if record is None:
            return None
        validator, _ = Validator.lenient(record[0], record[1])  # older stores kept anything
        return validator or None

    def stored_at(self, fp: bytes) -> float | None:
        """When the validators of ``fp`` were recorded."""
        record = self._record(_check(fp))
        return float(record[2]) if record is not None else None

    def _change(self, fp: bytes, record: list[Any] | None) -> None:
        ref = self._write() if record is not None else self._read()
        if ref is None:  # deleting from a crawl that does not exist
            return
        existed = self._storage.view_data.put_validator(ref, fp, record)
        delta = (record is not None) - existed
        if delta:
            self._storage.view_data.add_view_count(ref, "validators", delta)

    def put(self, fp: bytes, validator: Validator) -> None:
        """Store ``validator``; an empty one deletes what was stored."""
        _check(fp)
        if not isinstance(validator, Validator):
            raise TypeError(f"expected a Validator, not {type(validator).__name__}")
        record = [validator.etag, validator.last_modified, self._clock()] if validator else None
        self._storage.run(lambda: self._change(fp, record))

    def delete(self, fp: bytes) -> None:
        """Forget the validators of ``fp``."""
        _check(fp)
        self._storage.run(lambda: self._change(fp, None))

    def __len__(self) -> int:
        return self._counter("validators")


def seen_kind(storage: StoreStorage, crawl: str) -> tuple[str, tuple[int, float] | None]:
    """How the crawl keeps its seen set: (kind, None) for an exact one, ("bloom", (expected,
    fp_rate)) for a Bloom filter, ("", None) when it keeps none yet."""

    def read() -> tuple[str, tuple[int, float] | None]:
        ref = storage.view_data.crawl_ref(crawl)
        if ref is None:
            return "", None
        params = storage.view_data.bloom_params(ref)
        if params is not None:
            return "bloom", (params[0], params[1])
        return storage.view_data.seen_mark(
            ref, storage.view_data.seen_kinds[0], write=False
        ) or "", None

    return storage.view(read)
