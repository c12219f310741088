"""A facade's state under the core's crawl: a key/value mapping the storage keeps, written once
over the storage's state primitives (values are msgpack, as every storage keeps them)."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import msgpack

from ..errors import CorruptRecord
from .protocol import check_namespace

if TYPE_CHECKING:
    from .core import CoreFrontier
    from .spi import CrawlRecord, Storage

__all__ = ["CrawlState", "pack_state", "unpack_state"]

_PACK = msgpack.Packer(use_bin_type=True).pack


def pack_state(key: object, value: object) -> bytes:
    """``TypeError`` for a key that is not a str or a value msgpack cannot hold."""
    if not isinstance(key, str):
        raise TypeError(f"a state key is a str, not {type(key).__name__}: {key!r:.100}")
    try:
        return _PACK(value)  # type: ignore[no-any-return]
    except (TypeError, ValueError, OverflowError) as exc:
        raise TypeError(f"state values are msgpack-able: {value!r:.100} ({exc})") from None


def unpack_state(namespace: str, key: str, raw: bytes) -> Any:
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:
        raise CorruptRecord(f"state record {namespace!r}/{key!r:.100} does not decode: "
                            f"{exc!r}") from None  # fmt: skip


class CrawlState(MutableMapping[str, Any]):
    """A facade's state under the core's crawl, resolved at each use: reading it creates
    nothing, its first write creates the crawl. Each read is a copy; a value that cannot be
    stored is refused at the write (``TypeError``)."""

    def __init__(self, core: CoreFrontier, namespace: str) -> None:
        check_namespace(namespace)
        self._core, self._namespace = core, namespace

    @property
    def _storage(self) -> Storage:
        return self._core.storage

    def _crawl(self) -> CrawlRecord | None:
        return self._core.existing_crawl()

    def __getitem__(self, key: str) -> Any:
        def read() -> bytes | None:
            crawl = self._crawl()
            return None if crawl is None else self._storage.state_get(crawl, self._namespace, key)

        raw = self._storage.view(read)
        if raw is None:
            raise KeyError(key)
        return unpack_state(self._namespace, key, raw)

    def __setitem__(self, key: str, value: Any) -> None:
        packed = pack_state(key, value)

        def write() -> None:
            crawl = self._core.crawl_for_write()
            self._storage.state_put(crawl, self._namespace, key, packed)

        self._storage.run(write)

    def __delitem__(self, key: str) -> None:
        def write() -> bool:
            crawl = self._crawl()
            return crawl is not None and self._storage.state_delete(crawl, self._namespace, key)

        if not self._storage.run(write):
            raise KeyError(key)

    def _keys(self) -> list[str]:
        def read() -> list[str]:
            crawl = self._crawl()
            return [] if crawl is None else self._storage.state_keys(crawl, self._namespace)

        return self._storage.view(read)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())
