"""Canonical URLs and request fingerprints: pure functions, no I/O.

The canonical form decides which requests are "the same page", so it is versioned: changing any
rule here changes fingerprints and must bump ``FINGERPRINT_VERSION``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote_from_bytes, unquote_to_bytes

import can_ada
import mmh3

from .errors import InvalidSeed

__all__ = [
    "FINGERPRINT_VERSION",
    "TRACKING_PARAMS",
    "Explanation",
    "Fingerprint",
    "Step",
    "TrackingParams",
    "canonicalize",
    "explain",
    "fingerprint",
    "parse_http_url",
    "tracking",
]

#: Bumped whenever the canonical form or the hash changes; stores record it. Version 2: a
#: ``=`` inside a query value stays literal on every path (version 1 wrote ``%3D`` where the
#: query had another escape).
FINGERPRINT_VERSION = 2

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


def _form_encode(raw: bytes, safe: str = " ") -> str:
    return quote_from_bytes(raw, safe=safe).replace(" ", "+")


def _form_encode_value(raw: bytes) -> str:
    """A query value: ``=`` stays literal (only a key's first ``=`` ends it), as the URL
    standard leaves a query and as the fast paths keep it."""
    return _form_encode(raw, " =")


def _is_tracking(key: str, names: frozenset[str]) -> bool:
    low = key.lower()
    return low.startswith(_TRACKING_PREFIXES) or low in names


def _canonical_query(query: str) -> str:
    """Form-decode, drop tracking keys, sort by key then value, form-encode (the forms of
    recent queries are kept: pagination and sorting repeat theirs across a site)."""
    return _query_form(query, tracking.names)


@functools.lru_cache(maxsize=8192)
def _query_form(query: str, names: frozenset[str]) -> str:
    return _query_steps(query, names, None)


def _query_steps(query: str, names: frozenset[str], trace: list[Step] | None) -> str:
    """The canonical query, a rule at a time: empty parameters dropped, tracking keys dropped,
    the rest sorted by key then value and written in one form. ``trace`` (when given) gets a
    ``Step`` for each rule that changed something.

    A query of plain characters (``_PLAIN_QUERY``), or of those and ``+`` with no ``=`` in a
    value (``_PLUS_QUERY``), is kept as written, part for part: nothing to decode or encode,
    and ASCII order is byte order (``+`` sorts against the others as the space it stands for
    does). Any other is form-decoded, sorted by bytes, form-encoded."""
    parts = query.split("&")
    kept = [part for part in parts if part]
    if trace is not None:
        current = _step(trace, "query", "empty query parameters dropped", query, "&".join(kept))
        left = list(kept)
    plain = _PLAIN_QUERY.fullmatch(query) is not None
    plus = not plain and _PLUS_QUERY.fullmatch(query) is not None
    params: list[tuple[Any, Any, str]] = []  # (key, value) to sort by, and the part
    for part in kept:
        key, _, value = part.partition("=")
        if plain or plus:
            name = key.replace("+", " ") if plus else key
            order: tuple[Any, Any] = (key, value)
        else:
            order = (_form_decode(key), _form_decode(value))
            name = order[0].decode("utf-8", "replace")
        if not _is_tracking(name, names):
            params.append((*order, part))
        elif trace is not None:
            left.remove(part)
            rule = f"tracking parameter {name} removed"
            current = _step(trace, "query", rule, current, "&".join(left))
    params.sort()
    if plain or plus:
        encoded = "&".join([k + "=" + v for k, v, _ in params])
    else:
        encoded = "&".join([_form_encode(k) + "=" + _form_encode_value(v) for k, v, _ in params])
    if trace is not None:
        written = "&".join(part for _, _, part in params)
        current = _step(trace, "query", "query parameters sorted", current, written)
        _step(trace, "query", "query form-encoding normalised", current, encoded)
    return "?" + encoded if encoded else ""


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


def canonical_of(parsed: can_ada.URL, trace: list[Step] | None = None) -> str:
    """The canonical form of a parsed URL; ``trace`` (when given) gets a ``Step`` for each of
    these rules that changed something (``explain``)."""
    path = parsed.pathname
    if "%" in path:
        normal = _ESCAPE.sub(_normalise_escape, path)
        rule = "percent-encoding normalised (escapes upper-cased, unreserved ones decoded)"
        _step(trace, "path", rule, path, normal)
        path = normal
    search = parsed.search
    if trace is None:
        query = _canonical_query(search[1:]) if len(search) > 1 else ""
    else:  # the same, a rule at a time
        query = _query_steps(search[1:], tracking.names, trace) if len(search) > 1 else ""
        if not query and "?" in parsed.href.partition("#")[0]:
            _step(trace, "query", "empty query dropped", "", None)
        if parsed.hash or parsed.href.endswith("#"):
            _step(trace, "fragment", "fragment dropped", parsed.hash[1:], None)
    userinfo = ""
    if parsed.username or parsed.password:
        userinfo = parsed.username + (":" + parsed.password if parsed.password else "") + "@"
    return f"{parsed.protocol}//{userinfo}{parsed.host}{path}{query}"


# -- the explanation: which rule changed which part -----------------------------------------


@dataclass(frozen=True, slots=True)
class Step:
    """One rule that changed one part of a URL on its way to the canonical form: ``part``
    (``"url"``, ``"scheme"``, ``"userinfo"``, ``"host"``, ``"port"``, ``"path"``, ``"query"``,
    ``"fragment"``) went from ``before`` to ``after`` (None: the part is gone, or was not
    there); ``url`` is the whole URL after this step."""

    rule: str
    part: str
    before: str | None
    after: str | None
    url: str = ""


@dataclass(frozen=True, slots=True)
class Explanation:
    """``explain(url)``: the URL, its canonical form, and the steps from one to the other (none
    for a URL that is canonical already). Each step's ``url`` is the URL after it: the first
    starts from ``url``, the last ends at ``canonical``."""

    url: str
    canonical: str
    steps: tuple[Step, ...]


def _step(trace: list[Step] | None, part: str, rule: str, before: str | None,
          after: str | None) -> str | None:  # fmt: skip
    """Record that ``rule`` took ``part`` from ``before`` to ``after``, when it changed it;
    ``after``."""
    if trace is not None and before != after:
        trace.append(Step(rule, part, before, after))
    return after


#: The parts of a URL, in the order they are written.
PARTS = ("scheme", "userinfo", "host", "port", "path", "query", "fragment")
#: scheme ":" ["//" authority] path ["?" query] ["#" fragment] (RFC 3986, appendix B): a split,
#: not a parser; the parser is ``can_ada``.
_SPLIT = re.compile(r"([^:/?#]+):(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)
_DEFAULT_PORTS = {"http": "80", "https": "443"}
_DOT_SEGMENT = frozenset({".", "..", "%2e", ".%2e", "%2e.", "%2e%2e"})
#: What the parser reads past before it splits (backslashes as slashes; spaces, tabs,
#: newlines and control characters stripped or dropped): such a URL is explained in one step.
_UNSPLIT = re.compile(r"[\\\x00-\x20\x7f]")
_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


def _split(url: str, written: bool = True) -> dict[str, str | None] | None:
    """The parts of an http(s) URL as ``written`` (or as the parser wrote it: ``href``; None:
    a part not there), or None when it is not written as scheme://authority... in plain
    characters (the parser reads more forms than that)."""
    m = _SPLIT.fullmatch(url)
    if m is None or m.group(2) is None or (written and _UNSPLIT.search(url)):
        return None
    scheme, authority, path, query, fragment = m.groups()
    userinfo, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        host, _, rest = hostport.partition("]")
        host += "]"
        if rest and not rest.startswith(":"):
            return None
        port = rest[1:] if rest else None
    else:
        host, colon, port_text = hostport.rpartition(":")
        if not colon:
            host, port = hostport, None
        else:
            port = port_text
    parts = {"scheme": scheme, "userinfo": userinfo if at else None, "host": host,
             "port": port, "path": path, "query": query, "fragment": fragment}  # fmt: skip
    return parts if _join(parts) == url else None


def _join(parts: dict[str, str | None]) -> str:
    userinfo, port, query, fragment = (parts[k] for k in ("userinfo", "port", "query",
                                                         "fragment"))  # fmt: skip
    return "".join([
        f"{parts['scheme']}://",
        "" if userinfo is None else userinfo + "@",
        parts["host"] or "",
        "" if port is None else ":" + port,
        parts["path"] or "",
        "" if query is None else "?" + query,
        "" if fragment is None else "#" + fragment,
    ])  # fmt: skip


def _parsed_rule(part: str, before: str | None, after: str | None, scheme: str) -> str:
    """Which of the URL standard's rules took ``part`` from ``before`` (as written) to
    ``after`` (as parsed)."""
    b, a = before or "", after or ""
    if part == "scheme":
        return "scheme lower-cased" if b.lower() == a else "scheme normalised"
    if part == "host":
        if a.startswith("["):
            return "IPv6 address normalised"
        if _IPV4.fullmatch(a) and b != a:
            return "IPv4 address normalised"
        if "xn--" in a and not b.isascii():
            return "host " + ("lower-cased / " if b != b.lower() else "") + "IDNA (punycode)"
        if b.lower() == a:
            return "host lower-cased"
        return "host normalised (lower-cased, percent-decoded, IDNA)"
    if part == "port":
        if after is None:
            default = b == _DEFAULT_PORTS.get(scheme)
            return "default port removed" if default else "empty port removed"
        return "port normalised (leading zeros)"
    if part == "userinfo":
        return "empty user info removed" if after is None else "user info percent-encoded"
    if part == "path":
        if not b and a == "/":
            return "empty path made /"
        rules = []
        if "\\" in b:
            rules.append("backslashes made slashes")
        if any(seg.lower() in _DOT_SEGMENT for seg in b.replace("\\", "/").split("/")):
            rules.append("dot segments resolved")
        if a.count("%") > b.count("%"):
            rules.append("characters percent-encoded")
        return "; ".join(rules) or "path normalised"
    if part in ("query", "fragment"):
        return "characters percent-encoded" if a.count("%") > b.count("%") else f"{part} normalised"
    return f"{part} normalised"


def explain(url: str) -> Explanation:
    """Which rule changed which part of ``url`` on its way to ``canonicalize(url)``: the URL
    standard's (the parser's: read off what it changed in each part) and crawlstore's own
    (recorded by the canonicaliser as it runs them). Raises ``InvalidSeed`` as
    ``canonicalize`` does."""
    parsed = parse_http_url(url)
    href: str = parsed.href
    trace: list[Step] = []
    canonical = canonical_of(parsed, trace)
    steps: list[Step] = []
    written = _split(url)
    reads = _split(href, written=False)
    assert reads is not None, href  # the parser writes http(s) URLs as scheme://authority...
    if written is None:  # a form only the parser reads: one step, when it changed anything
        if url != href:
            rule = "parsed by the URL standard (spaces, tabs, newlines, backslashes, a missing //)"
            steps.append(Step(rule, "url", url, href, href))
        current = dict(reads)
    else:
        current = dict(written)
        scheme = (written["scheme"] or "").lower()
        for part in PARTS:
            before, after = written[part], reads[part]
            if before != after:
                current[part] = after
                rule = _parsed_rule(part, before, after, scheme)
                steps.append(Step(rule, part, before, after, _join(current)))
    for step in trace:
        current[step.part] = step.after
        steps.append(replace(step, url=_join(current)))
    end = steps[-1].url if steps else url
    assert end == canonical, (url, end, canonical)  # the steps reproduce the canonical form
    return Explanation(url, canonical, tuple(steps))


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
        canonical = canonical_of(parse_http_url(url))
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
    return canonical_of(parse_http_url(url))


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
