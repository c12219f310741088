"""Where the URL Frontier API meets the store's model: crawl IDs and crawl names, URLs and
seeds, and the messages a seed becomes. No I/O, no gRPC calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import can_ada

from ..errors import CrawlstoreError
from ..frontier import URLStatus
from ..seed import Seed
from . import urlfrontier_pb2 as pb

__all__ = ["DEFAULT", "MAX_KEY", "api_crawl", "info_of", "item_of", "seed_of", "store_crawl"]

#: The API's default crawl ID, which is the store's default crawl.
DEFAULT = "DEFAULT"
#: The longest queue key the reference service accepts (characters).
MAX_KEY = 255
#: The longest crawl name a store accepts (UTF-8 bytes).
MAX_CRAWL = 200


class Unacceptable(CrawlstoreError, ValueError):
    """An item the service acknowledges SKIPPED (never worth sending again), with why."""


def store_crawl(crawl_id: str) -> str:
    """The store's crawl for an API crawl ID: an empty (or blank) ID and ``DEFAULT`` are the
    store's ``default`` crawl, and the API's ``default`` is the store's ``DEFAULT`` (the two
    names trade places, so that every ID keeps a crawl of its own). Any other ID is kept as
    given, spaces included, as the reference keeps it: ``" X "`` and ``"X"`` are two crawls."""
    if crawl_id == DEFAULT or not crawl_id.strip():
        return "default"
    if crawl_id == "default":
        return DEFAULT
    if len(crawl_id.encode("utf-8")) > MAX_CRAWL:
        raise Unacceptable(f"crawl ID longer than {MAX_CRAWL} bytes: {crawl_id[:60]!r}...")
    return crawl_id


def api_crawl(name: str) -> str:
    """The API's crawl ID of a store crawl (the inverse of ``store_crawl``)."""
    if name == "default":
        return DEFAULT
    if name == DEFAULT:
        return "default"
    return name


def host_key(url: str) -> str:
    """The queue key the service derives from a URL: its host as the URL standard parses it
    (lower case, without user info or port), where the reference takes the text up to the
    first ``:/?&`` as typed."""
    host: str = can_ada.parse(url).hostname
    return host


def seed_of(info: pb.URLInfo) -> Seed:
    """The seed of a ``URLInfo``: its URL (kept as given when the store's form differs), its
    queue key (the host's when empty) and its metadata, all in ``Seed.meta``."""
    raw = info.url
    try:
        seed = Seed.get(raw)
    except CrawlstoreError as exc:
        raise Unacceptable(str(exc)) from None
    key = info.key or host_key(seed.url)
    if not key:
        raise Unacceptable(f"no queue key can be derived from {raw!r:.200}")
    if len(key) > MAX_KEY:
        raise Unacceptable(f"queue key longer than {MAX_KEY} characters: {key[:60]!r}...")
    meta: dict[str, Any] = {"queue": key}
    if raw != seed.url:
        meta["url"] = raw
    if info.metadata:
        meta["metadata"] = {name: list(values.values) for name, values in info.metadata.items()}
    try:
        return seed.with_meta(meta)
    except CrawlstoreError as exc:
        raise Unacceptable(str(exc)) from None


def _info_fields(seed: Seed, queue: str | None, crawl_id: str) -> dict[str, Any]:
    meta: Mapping[str, Any] = seed.meta
    key = meta.get("queue")
    fields: dict[str, Any] = {
        "url": meta.get("url", seed.url),
        "key": key if isinstance(key, str) else (queue or ""),
        "crawlID": crawl_id,
    }
    metadata = meta.get("metadata")
    if isinstance(metadata, Mapping):
        fields["metadata"] = {
            str(name): pb.StringList(values=[str(v) for v in values])
            for name, values in metadata.items()
            if isinstance(values, (list, tuple))
        }
    return fields


def info_of(seed: Seed, crawl_id: str, queue: str | None = None) -> pb.URLInfo:
    """The ``URLInfo`` of a seed: the URL as the client gave it, its key and metadata."""
    return pb.URLInfo(**_info_fields(seed, queue, crawl_id))


def item_of(status: URLStatus, crawl_id: str) -> pb.URLItem:
    """A URL's status as a ``URLItem`` in the ``known`` form, as ``GetURLStatus`` and
    ``ListURLs`` answer: ``refetchable_from_date`` is when it is scheduled, 0 once it is
    finished, its creation time while it is queued or in flight."""
    assert status.seed is not None
    if status.state in ("done", "failed", "skipped"):
        date = 0
    elif status.state == "scheduled" and status.at is not None:
        date = int(status.at)
    else:
        date = int(status.created or 0)
    info = pb.URLInfo(**_info_fields(status.seed, status.queue, crawl_id))
    return pb.URLItem(
        known=pb.KnownURLItem(info=info, refetchable_from_date=date),
        ID=info.url,
        creation_date=int(status.created or 0),
    )
