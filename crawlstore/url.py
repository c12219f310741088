"""Canonical URLs and request fingerprints: pure functions, no I/O.

The canonical form decides which requests are "the same page", so it is versioned: changing any
rule here changes fingerprints and must bump ``FINGERPRINT_VERSION``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from urllib.parse import quote_from_bytes, unquote_to_bytes

import can_ada
import mmh3

from .errors import InvalidSeed

__all__ = [
    "FINGERPRINT_VERSION",
    "TRACKING_PARAMS",
    "Fingerprint",
    "TrackingParams",
    "canonicalize",
    "fingerprint",
    "parse_http_url",
    "tracking",
]

#: Bumped whenever the canonical form or the hash changes; stores record it.
FINGERPRINT_VERSION = 1

#: Query keys removed by default (compared lower-cased), besides any key starting with ``utm_``.
TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        # the common click and campaign identifiers
        "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "igshid",
        "mc_cid", "mc_eid", "_ga", "_gl", "ref_src",
        # beyond it
        "gclsrc", "_hsenc", "_hsmi", "mkt_tok", "srsltid", "ttclid", "twclid", "li_fat_id",
    }
)  # fmt: skip

_TRACKING_PREFIXES = ("utm_",)


class TrackingParams:
    """The set of query keys that canonicalisation drops; case-insensitive.

    One process-wide instance, ``crawlstore.url.tracking``, is used by every fingerprint.
    Change it at start-up, before pushing seeds: a different set gives different fingerprints.
    """

    __slots__ = ("_names",)

    def __init__(self, names: Iterable[str] = TRACKING_PARAMS) -> None:
        self._names = frozenset(n.lower() for n in names)

    def add(self, *names: str) -> None:
        """Drop these keys too."""
        self._names = self._names | {n.lower() for n in names}

    def remove(self, *names: str) -> None:
        """Keep these keys again (a ``utm_`` key is always dropped)."""
        self._names = self._names - {n.lower() for n in names}

    def reset(self) -> None:
        """Back to the documented default list."""
        self._names = TRACKING_PARAMS

    @property
    def names(self) -> frozenset[str]:
        return self._names

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _is_tracking(key, self._names)


#: The tracking list used by ``canonicalize`` and therefore by every fingerprint.
tracking = TrackingParams()

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _normalise_escape(m: re.Match[str]) -> str:
    byte = int(m.group(1), 16)
    return chr(byte) if byte in _UNRESERVED else "%" + m.group(1).upper()


_HTTP = ("https://", "http://")
_PLAIN_QUERY = re.compile(r"[A-Za-z0-9\-._~=&]*")
#: The same, with ``+`` (a form-encoded space): decoding then encoding gives each part back
#: unchanged, and ``+`` sorts against the other characters as the space it stands for does.
_PLUS_QUERY = re.compile(r"[A-Za-z0-9\-._~=&+]*")


def _form_decode(part: str) -> bytes:
    if "%" not in part and "+" not in part:
        return part.encode("ascii")
    return unquote_to_bytes(part.replace("+", " "))


def _form_encode(raw: bytes) -> str:
    return quote_from_bytes(raw, safe=" ").replace(" ", "+")


def _is_tracking(key: str, names: frozenset[str]) -> bool:
    low = key.lower()
    return low.startswith(_TRACKING_PREFIXES) or low in names


def _canonical_query(query: str) -> str:
    """Form-decode, drop tracking keys, sort by key then value, form-encode (the forms of
    recent queries are kept: pagination and sorting repeat theirs across a site)."""
    return _query_form(query, tracking.names)


@functools.lru_cache(maxsize=8192)
def _query_form(query: str, names: frozenset[str]) -> str:
    if _PLAIN_QUERY.fullmatch(query):
        # Fast path: nothing to decode or encode, and ASCII str order is byte order.
        kept = []
        for part in query.split("&"):
            if part:
                key, _, value = part.partition("=")
                if not _is_tracking(key, names):
                    kept.append((key, value))
        kept.sort()
        return "?" + "&".join([k + "=" + v for k, v in kept]) if kept else ""
    if _PLUS_QUERY.fullmatch(query):
        plain = []
        for part in query.split("&"):
            if part:
                key, _, value = part.partition("=")
                if "=" in value:
                    break  # encoded as %3D by the general path below
                if not _is_tracking(key.replace("+", " "), names):
                    plain.append((key, value))
        else:
            plain.sort()
            return "?" + "&".join([k + "=" + v for k, v in plain]) if plain else ""
    pairs: list[tuple[bytes, bytes]] = []
    for part in query.split("&"):
        if part:
            key, _, value = part.partition("=")
            raw_key = _form_decode(key)
            if not _is_tracking(raw_key.decode("utf-8", "replace"), names):
                pairs.append((raw_key, _form_decode(value)))
    pairs.sort()
    encoded = [_form_encode(k) + "=" + _form_encode(v) for k, v in pairs]
    return "?" + "&".join(encoded) if encoded else ""


def parse_http_url(url: str) -> can_ada.URL:
    """Parse an absolute http(s) URL with a host (WHATWG rules), or raise ``InvalidSeed``."""
    if not isinstance(url, str):
        raise InvalidSeed(f"URL must be a str, not {type(url).__name__}: {url!r}")
    try:
        parsed = can_ada.parse(url)
    except ValueError:
        raise InvalidSeed(f"URL cannot be parsed: {url!r}") from None
    if parsed.protocol not in ("http:", "https:"):
        raise InvalidSeed(f"URL scheme must be http or https: {url!r}")
    if not parsed.hostname:
        raise InvalidSeed(f"URL has no host: {url!r}")
    return parsed


def _canonical(parsed: can_ada.URL) -> str:
    path = parsed.pathname
    if "%" in path:
        path = _ESCAPE.sub(_normalise_escape, path)
    search = parsed.search
    query = _canonical_query(search[1:]) if len(search) > 1 else ""
    userinfo = ""
    if parsed.username or parsed.password:
        userinfo = parsed.username + (":" + parsed.password if parsed.password else "") + "@"
    return f"{parsed.protocol}//{userinfo}{parsed.host}{path}{query}"


def get_fingerprint(url: str) -> tuple[str, Fingerprint]:
    """The parsed form (``href``) of a GET of ``url`` and its fingerprint: ``Seed.get``'s path.

    The canonical form is most often ``href`` itself (no escapes, no fragment) or ``href``
    with its query made canonical: those are read off ``href`` without asking the parser for
    each part. Anything else takes the general path; both give the same form.
    """
    if type(url) is not str:
        parse_http_url(url)  # raises, naming the type
    try:
        parsed = can_ada.parse(url)
    except ValueError:
        raise InvalidSeed(f"URL cannot be parsed: {url!r}") from None
    href: str = parsed.href
    if not href.startswith(_HTTP) or "%" in href or "#" in href:
        # another scheme, or escapes to normalise, or a fragment: the general path
        canonical = _canonical(parse_http_url(url))
    else:
        # http(s) always has a host (WHATWG refuses an empty one), and href is
        # scheme://[userinfo@]host[:port]path[?query] with the default port left out
        mark = href.find("?")
        canonical = href if mark < 0 else href[:mark] + _canonical_query(href[mark + 1 :])
    data = b"GET\x00" + canonical.encode("utf-8") + b"\x00"
    return href, bytes.__new__(Fingerprint, mmh3.mmh3_x64_128_digest(data))


def canonicalize(url: str) -> str:
    """The canonical form of an absolute http(s) URL, used for dedup.

    Lower-case scheme and host, IDNA to punycode, no default port, dot segments resolved, empty
    path as ``/``, percent escapes upper-cased and unreserved ones decoded, no fragment, no
    tracking parameters, the query sorted by key then value (duplicates kept), no empty query.
    Raises ``InvalidSeed`` for anything that is not such a URL: it is never fingerprinted raw.
    """
    return _canonical(parse_http_url(url))


class Fingerprint(bytes):
    """A request's 128-bit identity: mmh3 x64 over method, canonical URL and body."""

    __slots__ = ()

    def __new__(cls, digest: bytes) -> Fingerprint:
        if len(digest) != 16:
            raise ValueError(f"a fingerprint is 16 bytes, got {len(digest)}: {digest!r}")
        return super().__new__(cls, digest)

    @classmethod
    def from_hex(cls, text: str) -> Fingerprint:
        """The fingerprint of 32 hex digits (as ``str(fp)`` writes it)."""
        return cls(bytes.fromhex(text))

    def __repr__(self) -> str:
        return f"Fingerprint({self.hex()!r})"

    __str__ = bytes.hex


def fingerprint_canonical(method: str, canonical_url: str, body: bytes) -> Fingerprint:
    """The fingerprint of an already canonical request (method upper-case)."""
    # Method and canonical URL never contain NUL, so NUL separators are unambiguous.
    data = method.encode("ascii") + b"\x00" + canonical_url.encode("utf-8") + b"\x00" + body
    return Fingerprint(mmh3.mmh3_x64_128_digest(data))


def fingerprint(method: str, url: str, body: bytes | str = b"") -> Fingerprint:
    """The fingerprint of a request; tag, priority, depth and headers are not part of it."""
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return fingerprint_canonical(method.upper(), canonicalize(url), raw)
