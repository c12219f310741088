"""Scrapy requests as seeds, and the keys of their fingerprints in a seen set.

A request becomes a seed (method, URL, headers, body, priority, depth), with everything else
``Request.to_dict()`` holds under ``seed.meta["scrapy"]``; ``seed_to_dict`` gives the dict
back for ``request_from_dict``. ``RequestSeeds`` makes the same seed straight from a request,
and the request straight from its seed, without the dicts. A seen set holds the first
``FINGERPRINT_BYTES`` of Scrapy's fingerprints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import msgpack
from scrapy import Request
from scrapy.utils.request import request_from_dict

from ..errors import InvalidArgument, InvalidSeed
from ..seed import Seed

if TYPE_CHECKING:
    from scrapy import Spider

__all__ = [
    "FINGERPRINT_BYTES", "SCHEME", "RequestSeeds", "claim_seen", "seed_from_dict", "seed_to_dict",
]  # fmt: skip

#: The fields of ``Request.to_dict()`` a seed holds as its own; the rest go to its meta.
_SEED_FIELDS = ("url", "method", "headers", "body", "priority")
#: The keys of a plain ``Request``'s ``to_dict()`` that go to the seed's meta, in its order.
_REST = tuple(key for key in Request("https://a.example/").to_dict() if key not in _SEED_FIELDS)
#: The keys of the meta of a plain request's seed (its URL, when the seed's differs).
_PLAIN = frozenset((*_REST, "url"))
#: A seen set keeps this many bytes of each of Scrapy's fingerprints (20-byte SHA1s).
FINGERPRINT_BYTES = 16
#: What a crawl's state says its seen set is keyed by, when Scrapy's fingerprints key it:
#: ``frontier.core.state("seen")["fingerprints"]``.
SCHEME = "scrapy"


def seed_from_dict(request: Mapping[str, Any]) -> Seed:
    """The seed of a request dict (``Request.to_dict(spider=...)``), or ``InvalidSeed`` saying
    what a seed cannot hold: a URL that is not http(s), a priority past 32 bits, or a value
    that msgpack cannot keep exactly (a tuple, a set, an object)."""
    url = request.get("url")
    headers = request.get("headers") or {}
    if not isinstance(url, str) or not isinstance(headers, Mapping):
        raise InvalidSeed(f"a request dict has a str url and a headers mapping: {request!r:.100}")
    rest = {k: v for k, v in request.items() if k not in _SEED_FIELDS}
    return _seed(request.get("method", "GET"), url, headers, request.get("body", b""),
                 request.get("priority", 0), rest)  # fmt: skip


def seed_to_dict(seed: Seed) -> dict[str, Any]:
    """The request dict of a seed ``seed_from_dict`` made (a copy of it), for
    ``scrapy.utils.request.request_from_dict(d, spider=spider)``."""
    return {"url": seed.url, "method": seed.method, "headers": _header_lists(seed),
            "body": seed.body, "priority": seed.priority, **_copy(_rest_of(seed))}  # fmt: skip


class RequestSeeds:
    """A spider's requests as seeds, and back: ``seed(request, meta)`` is
    ``seed_from_dict(request.to_dict(spider=spider))`` with ``meta`` as the request's meta, and
    ``request(seed)`` is ``request_from_dict(seed_to_dict(seed), spider=spider)``. A plain
    ``Request`` skips the dicts; a subclass (``FormRequest``...) and a callback never seen
    before go through them."""

    def __init__(self, spider: Spider) -> None:
        self.spider = spider
        #: The names ``to_dict`` found for the spider's methods, by function.
        self._names: dict[object, str] = {}

    def seed(self, request: Request, meta: dict[str, Any]) -> Seed:
        """The seed of ``request`` (``InvalidSeed``; ``ValueError`` for a callback or an
        errback that is not a method of the spider)."""
        names = self._names_of(request) if type(request) is Request else None
        if names is None:
            data = request.to_dict(spider=self.spider)
            for function, key in ((request.callback, "callback"), (request.errback, "errback")):
                name, method = data.get(key), getattr(function, "__func__", None)
                if method is not None and isinstance(name, str):
                    self._names[method] = name
            data["meta"] = meta
            return seed_from_dict(data)
        rest = {key: getattr(request, key) for key in _REST}
        rest["callback"], rest["errback"], rest["meta"] = *names, meta
        return _seed(request.method, request.url, request.headers, request.body,
                     request.priority, rest)  # fmt: skip

    def request(self, seed: Seed) -> Request:
        """The request of a seed ``seed`` made (``ValueError`` for a callback the spider no
        longer has)."""
        rest = _rest_of(seed)
        if not _PLAIN.issuperset(rest):  # a subclass: ``_class`` and its own attributes
            return request_from_dict(seed_to_dict(seed), spider=self.spider)
        fields = _copy(rest)
        for key in ("callback", "errback"):  # as ``request_from_dict`` resolves them
            if fields.get(key) and self.spider:
                fields[key] = _method(self.spider, fields[key])
        return Request(**{"url": seed.url, "method": seed.method, "headers": _header_lists(seed),
                          "body": seed.body, "priority": seed.priority, **fields})  # fmt: skip

    def _names_of(self, request: Request) -> tuple[str | None, str | None] | None:
        """The names of the request's callback and errback, when ``to_dict`` found them before
        and the spider still has them; None otherwise."""
        names: list[str | None] = []
        for function in (request.callback, request.errback):
            if function is None:
                names.append(None)
                continue
            key = getattr(function, "__func__", None)
            name = self._names.get(key) if key is not None else None
            if name is None or getattr(getattr(self.spider, name, None), "__func__", 0) is not key:
                return None
            names.append(name)
        return names[0], names[1]


def _seed(
    method: Any, url: str, headers: Mapping[Any, Any], body: Any, priority: Any,
    rest: dict[str, Any],
) -> Seed:  # fmt: skip
    """The seed of a request's fields, ``rest`` (the other keys of its dict) in its meta."""
    unkept = _unkept(rest, "")
    if unkept is not None:
        where, value = unkept
        raise InvalidSeed(f"{where} ({type(value).__name__}) cannot be kept in msgpack")
    meta = rest.get("meta")
    depth = meta.get("depth", 0) if isinstance(meta, dict) else 0
    seed = Seed(method, url, headers=_headers(headers), body=body, priority=priority,
                depth=depth if type(depth) is int and depth >= 0 else 0,
                meta={"scrapy": rest})  # fmt: skip
    if seed.url != url:  # the parsed form differs: keep Scrapy's, which its fingerprint is of
        seed = seed.with_meta({"scrapy": {**rest, "url": url}})
    return seed


def _rest_of(seed: Seed) -> Mapping[str, Any]:
    rest = seed.meta.get("scrapy")
    if not isinstance(rest, Mapping):
        raise ValueError(f"not a seed of a Scrapy request (no meta['scrapy']): {seed!r:.100}")
    return rest


def _copy(rest: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a seed's meta (msgpack's own values: a round trip keeps them)."""
    copied: dict[str, Any] = msgpack.unpackb(msgpack.packb(dict(rest), use_bin_type=True),
                                             raw=False)  # fmt: skip
    return copied


def _method(spider: Spider, name: Any) -> Any:
    try:
        return getattr(spider, str(name))
    except AttributeError:
        raise ValueError(f"Method {name!r} not found in: {spider}") from None


def _header_lists(seed: Seed) -> dict[bytes, list[bytes]]:
    """A seed's headers as ``Request.to_dict()`` gives them: a name, a list of values."""
    headers: dict[bytes, list[bytes]] = {}
    for name, value in seed.headers:
        headers.setdefault(name.encode("latin-1"), []).append(value.encode("latin-1"))
    return headers


def _headers(headers: Mapping[Any, Any]) -> list[tuple[str, str]]:
    """``Request.to_dict()``'s headers (a name, a list of values) as name/value pairs."""
    return [(_text(name), _text(value)) for name, values in headers.items()
            for value in (values if isinstance(values, list) else [values])]  # fmt: skip


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("latin-1")  # header bytes, one to one
    if isinstance(value, str):
        return value
    raise InvalidSeed(f"a header name or value is bytes or str: {value!r:.100}")


def _unkept(value: Any, where: str) -> tuple[str, Any] | None:
    """Where in ``value`` the first part is that msgpack would not give back as it is, and
    that part."""
    kind = type(value)
    if kind in _SCALARS or (kind is int and -(2**63) <= value < 2**64):
        return None
    items: Iterable[tuple[Any, Any]]
    if kind is list:
        items = enumerate(value)
    elif kind is dict:
        for key in value:
            if type(key) is not str:
                return (f"a key of {where or 'the request'}", key)
        items = value.items()
    else:
        return (where, value)
    for key, part in items:
        if type(part) not in _SCALARS:
            found = _unkept(part, f"{where}[{key!r}]" if where or kind is list else str(key))
            if found is not None:
                return found
    return None


#: The types msgpack gives back as they are, whatever their value.
_SCALARS = frozenset((type(None), bool, str, bytes, float))


def claim_seen(frontier: Any, seen: Any) -> None:
    """Make sure the crawl's seen set is keyed by Scrapy's fingerprints: record it in a crawl
    whose seen set is empty, and refuse (``InvalidArgument``) one that crawlstore's own
    fingerprints fill, whose keys would never match."""
    state = frontier.core.state("seen")
    scheme = state.get("fingerprints")
    if scheme == SCHEME:
        return
    if scheme is None and len(seen) == 0:
        state["fingerprints"] = SCHEME
        return
    raise InvalidArgument(
        f"crawl {frontier.core.name!r} has a seen set keyed by crawlstore's own fingerprints "
        f"({len(seen)} of them), not by Scrapy's: give Scrapy a crawl of its own "
        "(CRAWLSTORE_CRAWL)"
    )
