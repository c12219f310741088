"""What the partitioned memory storage keeps for the store's views (``crawlstore.views``),
beside its partitions, as a store on a server keeps them by fingerprint: an exact seen set,
a Bloom filter's parameters and bits, validators and their counts, a crawl's each. Written in
a unit over every partition; every change is undone with the unit."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import InvalidSnapshot

if TYPE_CHECKING:
    from ._partitioned import PartitionedMemoryStorage

__all__ = ["MemoryViews", "ViewsOf"]

#: A Bloom filter's bits in chunks of this many bytes (as an export carries them).
_CHUNK = 4096


class ViewsOf:
    """One crawl's views."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.seen: set[bytes] = set()
        self.kind: str | None = None
        self.bloom: tuple[Any, ...] | None = None
        self.bits = bytearray()
        self.validators: dict[bytes, list[Any]] = {}


class MemoryViews:
    """The ``ViewData`` of ``PartitionedMemoryStorage``; a crawl's handle is its ``ViewsOf``."""

    seen_kinds: tuple[str, ...] = ("exact",)

    def __init__(self, storage: PartitionedMemoryStorage, undo: Callable[[Any], None]) -> None:
        self._s = storage
        self._undo = undo

    def crawl_ref(self, name: str) -> ViewsOf | None:
        return self._s.views_of(name)

    def view_count(self, ref: ViewsOf, name: str) -> int:
        return ref.counts.get(name, 0)

    def add_view_count(self, ref: ViewsOf, name: str, n: int) -> int:
        before = ref.counts.get(name, 0)
        ref.counts[name] = before + n
        self._undo(lambda: ref.counts.__setitem__(name, before))
        return before

    def seen_mark(self, ref: ViewsOf, kind: str, *, write: bool) -> str | None:
        if ref.kind is None and write:
            ref.kind = kind
            self._undo(lambda: setattr(ref, "kind", None))
        return ref.kind

    def seen_has(self, ref: ViewsOf, kind: str, fps: Sequence[bytes]) -> list[bool]:
        return [fp in ref.seen for fp in fps]

    def seen_add(self, ref: ViewsOf, kind: str, fps: Sequence[bytes]) -> int:
        new = {fp for fp in fps if fp not in ref.seen}
        ref.seen |= new
        self._undo(lambda: ref.seen.difference_update(new))
        return len(new)

    def seen_all(self, ref: ViewsOf, kind: str) -> Iterator[bytes]:
        yield from sorted(ref.seen)

    # -- the Bloom filter: one part, its bits in one bytearray ----------------------------------

    def bloom_parts(self, bits: int) -> int:
        return 1

    def bloom_part(self, fp: bytes, parts: int) -> int:
        return 0

    def bloom_params(self, ref: ViewsOf) -> tuple[Any, ...] | None:
        return ref.bloom

    def bloom_create(self, ref: ViewsOf, params: tuple[Any, ...], parts: int,
                     part_bits: int) -> None:  # fmt: skip
        ref.bloom, ref.bits = tuple(params), bytearray((int(params[2]) + 7) // 8)

        def undo() -> None:
            ref.bloom, ref.bits = None, bytearray()

        self._undo(undo)

    def bloom_get(self, ref: ViewsOf, part: int, positions: Sequence[int]) -> list[bool]:
        return [bool(ref.bits[p >> 3] & (0x80 >> (p & 7))) for p in positions]

    def bloom_set(self, ref: ViewsOf, part: int, positions: Sequence[int]) -> None:
        bits, before = ref.bits, bytes(ref.bits)
        for p in positions:
            bits[p >> 3] |= 0x80 >> (p & 7)
        self._undo(lambda: bits.__setitem__(slice(None), before))

    def bloom_chunks(self, ref: ViewsOf) -> Iterator[tuple[int, bytes]]:
        for start in range(0, len(ref.bits), _CHUNK):
            yield start // _CHUNK, bytes(ref.bits[start : start + _CHUNK])

    def load_bloom(self, ref: ViewsOf, params: tuple[Any, ...], count: int) -> None:
        self.bloom_create(ref, params, 1, int(params[2]))
        self.add_view_count(ref, "bloom", count)

    def put_bloom_chunk(self, ref: ViewsOf, chunk: int, bits: bytes) -> None:
        start = chunk * _CHUNK
        if start + len(bits) > len(ref.bits):
            raise InvalidSnapshot(f"a Bloom chunk past the filter's bits: chunk {chunk}")
        before = bytes(ref.bits)
        ref.bits[start : start + len(bits)] = bits
        self._undo(lambda: ref.bits.__setitem__(slice(None), before))

    # -- validators -----------------------------------------------------------------------------

    def validator(self, ref: ViewsOf, fp: bytes) -> list[Any] | None:
        record = ref.validators.get(fp)
        return list(record) if record is not None else None

    def put_validator(self, ref: ViewsOf, fp: bytes, record: list[Any] | None) -> bool:
        old = ref.validators.get(fp)
        if record is None:
            ref.validators.pop(fp, None)
        else:
            ref.validators[fp] = list(record)
        self._undo(lambda: ref.validators.pop(fp, None) if old is None
                   else ref.validators.__setitem__(fp, old))  # fmt: skip
        return old is not None

    def validators_all(self, ref: ViewsOf) -> Iterator[tuple[bytes, list[Any]]]:
        for fp in sorted(ref.validators):
            yield fp, list(ref.validators[fp])
