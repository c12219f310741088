"""Stores on Redis or a Redis Cluster: ``Store.open("redis://...")`` or
``Store.open("redis+cluster://...")`` (the ``redis`` extra)."""

from .store import RedisStore
from .views import RedisBloomSeen, RedisSeen, RedisValidators

__all__ = ["RedisBloomSeen", "RedisSeen", "RedisStore", "RedisValidators"]
