"""Storages: where a store keeps its records, each behind the interface of ``frontier.spi``.

A storage (``_memory``, ``_lmdb``, ``_redis``) imports that interface, the shared record codecs
of ``_records`` and the value modules (``seed``, ``url``, ``errors``, ``journal``, ``clock``):
never another storage, and nothing above the interface. This package names what the rest of
crawlstore may use of them: how a store is opened by the scheme of its target, and what only a
file has (its format, its check, its migration), and the migrations of a store on Redis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._lmdb.backup import sync_directory
from ._lmdb.engine import FORMAT_VERSION
from ._lmdb.migrate import migrate as migrate_file
from ._lmdb.migrate import read_meta as read_file_meta
from ._lmdb.opener import open_file, open_file_copy
from ._lmdb.upgrade import upgrade_format_2 as upgrade_file_format_2
from ._lmdb.verify import verify
from ._memory import MemoryStorage
from ._redis.keys import INDEXING as REDIS_INDEXING

if TYPE_CHECKING:
    from ..frontier.spi import Durability, StoreStorage
    from ._redis.migrate import FormatMove as FormatMove

__all__ = ["FORMAT_VERSION", "REDIS_INDEXING", "REDIS_SCHEMES", "MemoryStorage", "migrate_file",
           "open_file_copy", "open_store", "read_file_meta", "redis_format_move", "sync_directory",
           "upgrade_file_format_2", "verify"]  # fmt: skip

#: URL schemes of stores on a Redis server or cluster.
REDIS_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")


def open_store(target: Any, *, durability: Durability, readonly: bool, options: dict[str, Any]
               ) -> StoreStorage:  # fmt: skip
    """The storage ``target`` names: a URL of one of ``REDIS_SCHEMES`` (redis-py, imported only
    then), else a file's path."""
    if isinstance(target, str) and target.partition("://")[0] in REDIS_SCHEMES:
        from ._redis.opener import open_url

        return open_url(target, durability=durability, readonly=readonly, options=options)
    return open_file(target, durability=durability, readonly=readonly, options=options)


def redis_format_move(url: str) -> FormatMove:
    """The server side of migrating the store on Redis at ``url`` (redis-py)."""
    from ._redis.migrate import FormatMove

    return FormatMove(url)
