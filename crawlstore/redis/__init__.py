"""Stores on Redis or a Redis Cluster: ``Store.open("redis://...")`` or
``Store.open("redis+cluster://...")`` (the ``redis`` extra)."""

from typing import Any

from .views import RedisBloomSeen, RedisSeen, RedisValidators

__all__ = ["RedisBloomSeen", "RedisSeen", "RedisValidators"]


def __getattr__(name: str) -> Any:
    if name == "RedisStore":
        import warnings

        from ..store import Store

        warnings.warn("RedisStore is Store: open a store on Redis with Store.open(url); "
                      "the name goes in the next release", DeprecationWarning,
                      stacklevel=2)  # fmt: skip
        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
