"""A facade's state under the core's crawl: a key/value mapping the storage keeps."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = ["CrawlState"]


class CrawlState(MutableMapping[str, Any]):
    """A facade's state under the core's crawl, resolved at each use: reading it creates
    nothing, its first write creates the crawl."""

    def __init__(self, core: CoreFrontier, namespace: str) -> None:
        from .protocol import check_namespace

        check_namespace(namespace)
        self._core, self._namespace = core, namespace

    def _read(self) -> MutableMapping[str, Any] | None:
        crawl = self._core._existing()
        return self._core.storage.state(crawl, self._namespace) if crawl is not None else None

    def __getitem__(self, key: str) -> Any:
        def _read() -> Any:
            state = self._read()
            if state is None:
                raise KeyError(key)
            return state[key]

        return self._core.storage.view(_read)

    def __setitem__(self, key: str, value: Any) -> None:
        def _write() -> None:
            crawl = self._core._crawl_for_write()
            self._core.storage.state(crawl, self._namespace)[key] = value

        self._core.storage.run(_write)

    def __delitem__(self, key: str) -> None:
        def _write() -> None:
            state = self._read()
            if state is None:
                raise KeyError(key)
            del state[key]

        self._core.storage.run(_write)

    def __iter__(self) -> Iterator[str]:
        def _read() -> Iterator[str]:
            state = self._read()
            return iter(list(state) if state is not None else [])

        return self._core.storage.view(_read)

    def __len__(self) -> int:
        def _read() -> int:
            state = self._read()
            return len(state) if state is not None else 0

        return self._core.storage.view(_read)
