"""A store on Redis has no file: what a file store offers says what to use instead."""

from __future__ import annotations

from pathlib import Path

from ...errors import StoreError

__all__ = ["NoFile"]


class NoFile:
    """The ``StoreFile`` of a store on a server: every member raises ``StoreError``."""

    def __init__(self, url: str) -> None:
        self._url = url

    @property
    def path(self) -> Path:
        raise StoreError(f"{self._url} is a store on Redis: it has no path (see .url)")

    def size(self) -> int:
        raise StoreError(f"{self._url} is a store on Redis: see used_memory in INFO memory")

    def records_size(self) -> int:
        return self.size()

    def backup(self, target: Path, *, compact: bool) -> None:
        raise StoreError(f"{self._url} is a store on Redis: back it up with the server's RDB or "
                         "AOF files, or copy crawls with export()")  # fmt: skip
