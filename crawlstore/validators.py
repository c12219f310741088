"""Validators: a page's ETag and Last-Modified, keyed by request fingerprint."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from . import journal
from .url import Fingerprint

__all__ = ["Headers", "InMemValidators", "Validator", "Validators"]


@dataclass(frozen=True, slots=True)
class Validator:
    """What a server said identifies a page's version; at least one field is set."""

    etag: str | None = None
    last_modified: str | None = None

    def __post_init__(self) -> None:
        for name in ("etag", "last_modified"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(f"Validator.{name} must be a str or None: {value!r}")

    def __bool__(self) -> bool:
        return self.etag is not None or self.last_modified is not None

    @classmethod
    def from_headers(cls, headers: Headers) -> Validator:
        """``ETag`` and ``Last-Modified`` of a response (names case-insensitive); empty when
        the response has neither."""
        lowered = _lowered(headers)
        return cls(lowered.get("etag"), lowered.get("last-modified"))

    def merged(self, newer: Validator) -> Validator:
        """These validators with the fields ``newer`` has replaced (a 304 may update them)."""
        return Validator(newer.etag or self.etag, newer.last_modified or self.last_modified)


#: Response headers: a mapping (httpx.Headers, a dict) or name/value pairs.
Headers = Mapping[str, str] | Iterable[tuple[str, str]]


def _lowered(headers: Headers) -> dict[str, str]:
    items = headers.items() if isinstance(headers, Mapping) else headers
    return {name.lower(): value for name, value in items}


@runtime_checkable
class Validators(Protocol):
    """Where validators are kept: in memory for one run, or in a store across runs."""

    def get(self, fp: Fingerprint) -> Validator | None: ...

    def put(self, fp: Fingerprint, validator: Validator) -> None: ...

    def delete(self, fp: Fingerprint) -> None: ...

    def __len__(self) -> int: ...


class InMemValidators:
    """Validators in a dict, for one run; changes inside a transaction are undone when it
    rolls back."""

    def __init__(self) -> None:
        self._map: dict[Fingerprint, Validator] = {}
        self._lock = threading.Lock()

    def get(self, fp: Fingerprint) -> Validator | None:
        return self._map.get(fp)

    def put(self, fp: Fingerprint, validator: Validator) -> None:
        """Store ``validator``; an empty one deletes what was stored."""
        if not isinstance(validator, Validator):
            raise TypeError(f"expected a Validator, not {type(validator).__name__}")
        self._set(fp, validator or None)

    def delete(self, fp: Fingerprint) -> None:
        self._set(fp, None)

    def _set(self, fp: Fingerprint, validator: Validator | None) -> None:
        with self._lock:
            old = self._map.pop(fp, None)
            if validator is not None:
                self._map[fp] = validator
        undos = journal.active()
        if undos is not None and old is not validator:
            undos.append(lambda: self._set(fp, old))

    def __len__(self) -> int:
        return len(self._map)
