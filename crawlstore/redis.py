"""Stores on Redis or a Redis Cluster: ``Store.open("redis://...")`` or
``Store.open("redis+cluster://...")`` (the ``redis`` extra)."""

from typing import Any

__all__: list[str] = []

#: Names of earlier releases: the one ``Store`` and its views serve every storage.
_RENAMED = {"RedisStore": "Store", "RedisSeen": "StoreSeen", "RedisBloomSeen": "StoreBloomSeen",
            "RedisValidators": "StoreValidators"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        import warnings

        from . import store

        new = _RENAMED[name]
        warnings.warn(f"{name} is {new}: the same class serves a store on Redis and in a file; "
                      "the old name goes in the next release", DeprecationWarning,
                      stacklevel=2)  # fmt: skip
        return getattr(store, new)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
