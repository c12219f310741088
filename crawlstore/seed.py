"""``Seed``: an immutable request waiting to be crawled, and its msgpack record form."""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import msgpack

from .errors import InvalidSeed
from .url import (
    Fingerprint,
    canonical_of,
    fingerprint_canonical,
    get_fingerprint,
    parse_http_url,
)

__all__ = ["MAX_META", "PRIORITY_MAX", "PRIORITY_MIN", "Lease", "Seed", "Tag"]

PRIORITY_MIN = -(2**31)
PRIORITY_MAX = 2**31 - 1
DEPTH_MAX = 2**32 - 1
#: The largest ``meta`` a seed carries, in msgpack bytes.
MAX_META = 64 * 1024
_NO_META: Mapping[str, Any] = MappingProxyType({})

#: What ``with_tag`` takes: a tag name or an enum member (stored by its name).
Tag = str | enum.Enum

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_HEADER_VALUE = re.compile(r"[\r\n\x00]")
_HEADERS_KEY = tuple[tuple[str, str], ...]


def tag_name(tag: Tag | None) -> str | None:
    if tag is None:
        return None
    name = tag.name if isinstance(tag, enum.Enum) else tag
    if not isinstance(name, str) or not name:
        raise InvalidSeed(f"a tag must be a non-empty str or an enum member: {tag!r}")
    return name


def _check_int(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidSeed(f"{name} must be an int in [{low}, {high}]: {value!r}")
    return value


def _check_method(method: object) -> str:
    if not isinstance(method, str) or not _TOKEN.fullmatch(method):
        raise InvalidSeed(f"method must be an HTTP token: {method!r}")
    return method.upper()


def _check_header(name: object, value: object) -> tuple[str, str]:
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise InvalidSeed(f"header name must be an HTTP token: {name!r}")
    if not isinstance(value, str) or _BAD_HEADER_VALUE.search(value):
        raise InvalidSeed(f"header {name} has an invalid value (CR, LF or NUL): {value!r}")
    return name, value


def _check_meta(meta: object) -> Mapping[str, Any]:
    if not isinstance(meta, Mapping):
        raise InvalidSeed(f"meta must be a mapping of str to msgpack-able values: {meta!r:.100}")
    if not meta:
        return _NO_META
    if not all(isinstance(k, str) for k in meta):
        raise InvalidSeed(f"meta keys must be str: {list(meta)!r:.100}")
    try:
        packed = msgpack.packb(dict(meta), use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidSeed(f"meta must be msgpack-able: {exc}") from None
    if len(packed) > MAX_META:
        raise InvalidSeed(f"meta is {len(packed)} bytes packed, more than {MAX_META}")
    return MappingProxyType(msgpack.unpackb(packed, raw=False))  # a copy nobody else holds


@dataclass(frozen=True, slots=True)
class Lease:
    """A seed handed out: ``token`` names the lease in its storage (a report ends exactly it),
    and ``expires`` is when the seed goes back to its queue if no report comes."""

    token: bytes
    expires: float


def _check_body(body: object) -> bytes:
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise InvalidSeed(f"body must be bytes or str: {type(body).__name__}")


class Seed:
    """A request waiting to be crawled: method, URL, headers, body, tag, priority, depth, attempt,
    meta.

    Immutable: every ``with_*`` builder returns a new seed. Its ``fingerprint`` (method,
    canonical URL, body) identifies the page; tag, priority, depth, headers and meta are not
    part of it. ``attempt`` counts tries: 1 is the first attempt, each retry adds one. ``meta``
    is a small mapping of str to msgpack-able values, stored with the seed and handed back on
    pop (a Scrapy callback's name, a URL Frontier's metadata).
    """

    __slots__ = (
        "attempt", "body", "depth", "fingerprint", "headers", "lease", "meta", "method",
        "priority", "tag", "url",
    )  # fmt: skip

    method: str
    url: str
    headers: _HEADERS_KEY
    body: bytes
    tag: str | None
    priority: int
    depth: int
    attempt: int
    meta: Mapping[str, Any]
    #: The page's identity for dedup, leases and validators.
    fingerprint: Fingerprint
    #: The lease this seed was handed out under (None for a seed never popped, or copied from a
    #: record); not part of the value. A report ends exactly that lease, never another
    #: worker's after this one expired.
    lease: Lease | None

    def __init__(
        self,
        method: str,
        url: str,
        *,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes | str = b"",
        tag: Tag | None = None,
        priority: int = 0,
        depth: int = 0,
        attempt: int = 1,
        meta: Mapping[str, Any] = _NO_META,
    ) -> None:
        method = _check_method(method)
        parsed = parse_http_url(url)
        body_bytes = _check_body(body)
        self._init(
            method,
            parsed.href,
            tuple(_check_header(n, v) for n, v in headers),
            body_bytes,
            tag_name(tag),
            _check_int("priority", priority, PRIORITY_MIN, PRIORITY_MAX),
            _check_int("depth", depth, 0, DEPTH_MAX),
            _check_int("attempt", attempt, 1, DEPTH_MAX),
            _check_meta(meta),
            fingerprint_canonical(method, canonical_of(parsed), body_bytes),
        )

    def _init(
        self,
        method: str,
        url: str,
        headers: _HEADERS_KEY,
        body: bytes,
        tag: str | None,
        priority: int,
        depth: int,
        attempt: int,
        meta: Mapping[str, Any],
        fp: Fingerprint | None,
    ) -> None:
        # The slots' own setters (Seed blocks __setattr__): the fastest way to fill them.
        _set_method(self, method)
        _set_url(self, url)
        _set_headers(self, headers)
        _set_body(self, body)
        _set_tag(self, tag)
        _set_priority(self, priority)
        _set_depth(self, depth)
        _set_attempt(self, attempt)
        _set_meta(self, meta)
        if fp is None:  # a body changed: the fingerprint anew
            fp = fingerprint_canonical(method, canonical_of(parse_http_url(url)), body)
        _set_fp(self, fp)
        _set_lease(self, None)

    @classmethod
    def get(cls, url: str) -> Seed:
        """A GET request for ``url``."""
        href, fp = get_fingerprint(url)  # every other field is a default: nothing to check
        new = object.__new__(cls)
        new._init("GET", href, (), b"", None, 0, 0, 1, _NO_META, fp)
        return new

    @classmethod
    def _trusted(cls, record: Any, fp: bytes | None = None, lease: Lease | None = None) -> Seed:
        """Rebuild a seed that this library stored itself: no URL parsing (``ValueError`` or
        ``TypeError`` on a malformed record; callers name the record), under ``lease``."""
        method, url, headers, body, tag, priority, depth, attempt, *rest = record
        if not (isinstance(url, str) and isinstance(body, bytes) and isinstance(priority, int)):
            raise TypeError(f"malformed seed record: {record!r}")
        meta = MappingProxyType(rest[0]) if rest and rest[0] else _NO_META
        new = object.__new__(cls)
        new._init(
            method,
            url,
            tuple((n, v) for n, v in headers) if headers else (),
            body,
            tag,
            priority,
            depth,
            attempt,
            meta,
            fp if fp is None or type(fp) is Fingerprint else _fingerprint(fp),
        )
        if lease is not None:
            _set_lease(new, lease)
        return new

    # -- builders -------------------------------------------------------------------------------

    def _replace(self, **changes: Any) -> Seed:
        new = object.__new__(Seed)
        fields = {name: getattr(self, name) for name in _FIELDS}
        fields.update(changes)
        new._init(**fields, fp=self.fingerprint if "body" not in changes else None)
        _set_lease(new, self.lease)  # the same request, the same lease
        return new

    def with_tag(self, tag: Tag | None) -> Seed:
        """The seed under ``tag`` (an enum member is kept by its name; None: untagged)."""
        return self._replace(tag=tag_name(tag))

    def with_priority(self, priority: int) -> Seed:
        """The seed at ``priority`` (signed 32-bit; higher pops first in priority order)."""
        return self._replace(priority=_check_int("priority", priority, PRIORITY_MIN, PRIORITY_MAX))

    def with_depth(self, depth: int) -> Seed:
        """The seed at link depth ``depth`` (0 for a start page)."""
        return self._replace(depth=_check_int("depth", depth, 0, DEPTH_MAX))

    def with_attempt(self, attempt: int) -> Seed:
        """The seed at try number ``attempt`` (1 is the first)."""
        return self._replace(attempt=_check_int("attempt", attempt, 1, DEPTH_MAX))

    def with_header(self, name: str, value: str) -> Seed:
        """Add a header (a repeated name adds another value, as HTTP allows)."""
        return self._replace(headers=(*self.headers, _check_header(name, value)))

    def with_body(self, body: bytes | str) -> Seed:
        """The seed with ``body`` (a str is encoded as UTF-8); part of the fingerprint."""
        return self._replace(body=_check_body(body))

    def with_meta(self, meta: Mapping[str, Any]) -> Seed:
        """Replace the seed's metadata (a mapping of str to msgpack-able values)."""
        return self._replace(meta=_check_meta(meta))

    def with_lease(self, lease: Lease | None) -> Seed:
        """The seed under ``lease``: for a seed that crossed a process boundary (its record and
        the lease token travelled), so that a report ends exactly that lease."""
        if lease is not None and not isinstance(lease, Lease):
            raise TypeError(f"expected a Lease, not {type(lease).__name__}")
        new = object.__new__(Seed)  # the same fields: copied as they are, not checked again
        new._init(self.method, self.url, self.headers, self.body, self.tag, self.priority,
                  self.depth, self.attempt, self.meta, self.fingerprint)  # fmt: skip
        _set_lease(new, lease)
        return new

    # -- identity -------------------------------------------------------------------------------

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Seed):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key()[:-1])  # meta is a mapping: equal seeds still hash alike

    def __copy__(self) -> Seed:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Seed:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        """Seeds cross process boundaries (multiprocessing) as their record."""
        return (Seed._trusted, (self.to_record(), self.fingerprint))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Seed is immutable; use with_{name}()")

    def __repr__(self) -> str:
        parts = [repr(self.method), repr(self.url)]
        for name, default in _DEFAULTS.items():
            value = getattr(self, name)
            if value != default:
                parts.append(f"{name}={dict(value) if name == 'meta' else value!r}")
        return f"Seed({', '.join(parts)})"

    # -- records --------------------------------------------------------------------------------

    def to_record(self) -> list[Any]:
        """A msgpack-ready list; ``from_record`` reads it back (stores version the layout)."""
        return [
            self.method,
            self.url,
            [list(h) for h in self.headers] if self.headers else [],
            self.body,
            self.tag,
            self.priority,
            self.depth,
            self.attempt,
            dict(self.meta),
        ]

    @classmethod
    def from_record(cls, record: Any) -> Seed:
        """Rebuild a seed from ``to_record`` output, validating every field (``InvalidSeed``).
        A record of 8 fields (before ``meta``) is read too."""
        if not isinstance(record, (list, tuple)) or len(record) not in (8, len(_FIELDS)):
            raise InvalidSeed(f"a seed record is a list of {len(_FIELDS)} fields: {record!r:.200}")
        method, url, headers, body, tag, priority, depth, attempt, *rest = record
        if not isinstance(headers, (list, tuple)) or not all(
            isinstance(h, (list, tuple)) and len(h) == 2 for h in headers
        ):
            raise InvalidSeed(f"seed headers must be name/value pairs: {headers!r}")
        if tag is not None and not isinstance(tag, str):
            raise InvalidSeed(f"a stored tag must be a str: {tag!r}")
        return cls(
            method,
            url,
            headers=[(n, v) for n, v in headers],
            body=body,
            tag=tag,
            priority=priority,
            depth=depth,
            attempt=attempt,
            meta=rest[0] if rest else _NO_META,
        )


_FIELDS = ("method", "url", "headers", "body", "tag", "priority", "depth", "attempt", "meta")
_set_method, _set_url, _set_headers, _set_body, _set_tag = (
    Seed.__dict__[name].__set__ for name in _FIELDS[:5]
)
_set_priority, _set_depth, _set_attempt, _set_meta, _set_fp, _set_lease = (
    Seed.__dict__[name].__set__ for name in (*_FIELDS[5:], "fingerprint", "lease")
)


def _fingerprint(raw: bytes) -> Fingerprint:
    """A stored fingerprint's bytes as a ``Fingerprint`` (``ValueError`` unless 16 bytes)."""
    if len(raw) != 16:
        raise ValueError(f"a fingerprint is 16 bytes, got {len(raw)}")
    return bytes.__new__(Fingerprint, raw)


_DEFAULTS: dict[str, object] = {
    "headers": (),
    "body": b"",
    "tag": None,
    "priority": 0,
    "depth": 0,
    "attempt": 1,
    "meta": _NO_META,
}
