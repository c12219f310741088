"""``StoreFrontier``: the frontier core over a store's LMDB storage."""

from __future__ import annotations

from ..frontier.core import CoreFrontier

__all__ = ["StoreFrontier"]


class StoreFrontier(CoreFrontier):
    """The frontier of one crawl in a store (``store.frontier()``): every operation is one
    write transaction, or joins ``store.transaction()``; every facade works on it as on
    ``InMemFrontier``, and several processes may share it."""
