"""Scrapy requests as seeds, and the keys of their fingerprints in a seen set.

A request becomes a seed (method, URL, headers, body, priority, depth), with everything else
``Request.to_dict()`` holds under ``seed.meta["scrapy"]``; ``seed_to_dict`` gives the dict
back for ``request_from_dict``. A seen set holds the first ``FINGERPRINT_BYTES`` of Scrapy's
fingerprints.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ..errors import InvalidArgument, InvalidSeed
from ..seed import Seed

__all__ = ["FINGERPRINT_BYTES", "SCHEME", "claim_seen", "seed_from_dict", "seed_to_dict"]

#: The fields of ``Request.to_dict()`` a seed holds as its own; the rest go to its meta.
_SEED_FIELDS = ("url", "method", "headers", "body", "priority")
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
    unkept = _unkept(rest, "")
    if unkept is not None:
        where, value = unkept
        raise InvalidSeed(f"{where} ({type(value).__name__}) cannot be kept in msgpack")
    meta = rest.get("meta")
    depth = meta.get("depth", 0) if isinstance(meta, dict) else 0
    seed = Seed(
        request.get("method", "GET"),
        url,
        headers=_headers(headers),
        body=request.get("body", b""),
        priority=request.get("priority", 0),
        depth=depth if type(depth) is int and depth >= 0 else 0,
    )
    if seed.url != url:  # the parsed form differs: keep Scrapy's, which its fingerprint is of
        rest["url"] = url
    return seed.with_meta({"scrapy": rest})


def seed_to_dict(seed: Seed) -> dict[str, Any]:
    """The request dict of a seed ``seed_from_dict`` made (a copy of it), for
    ``scrapy.utils.request.request_from_dict(d, spider=spider)``."""
    rest = seed.meta.get("scrapy")
    if not isinstance(rest, Mapping):
        raise ValueError(f"not a seed of a Scrapy request (no meta['scrapy']): {seed!r:.100}")
    headers: dict[bytes, list[bytes]] = {}
    for name, value in seed.headers:
        headers.setdefault(name.encode("latin-1"), []).append(value.encode("latin-1"))
    return {"url": seed.url, "method": seed.method, "headers": headers, "body": seed.body,
            "priority": seed.priority, **copy.deepcopy(dict(rest))}  # fmt: skip


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
    if value is None or kind in (bool, str, bytes, float):
        return None
    if kind is int:
        return None if -(2**63) <= value < 2**64 else (where, value)
    if kind is list:
        parts = [(f"{where}[{i}]", v) for i, v in enumerate(value)]
    elif kind is dict:
        parts = []
        for k, v in value.items():
            if type(k) is not str:
                return (f"a key of {where or 'the request'}", k)
            parts.append((f"{where}[{k!r}]" if where else k, v))
    else:
        return (where, value)
    return next((found for w, v in parts if (found := _unkept(v, w)) is not None), None)


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
