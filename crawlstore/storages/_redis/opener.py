"""Opening a store on Redis from its URL."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidArgument, OlderFormat
from ...frontier.spi import Durability
from .server import Address, Server
from .storage import RedisStorage

__all__ = ["open_url"]


def open_url(url: str, *, durability: Durability, readonly: bool, options: dict[str, Any]
             ) -> RedisStorage:  # fmt: skip
    """The storage at ``url``, created when its namespace is empty. A store whose records hold
    an older fingerprint version opens at that version (``fingerprint``), for ``Store.open`` to
    migrate; read-only, it raises ``OlderFormat``."""
    if options:
        name = next(iter(options))
        raise InvalidArgument(f"{name} applies to a store in a file, not to one on Redis")
    if durability is not Durability.SAFE:
        raise InvalidArgument(
            "a store on Redis takes its durability from its servers: add strict=1 to "
            "the URL for commits that a replica has too (see the Redis guide)"
        )
    server = Server(Address.parse(url))
    try:
        return RedisStorage(server, readonly=readonly)
    except OlderFormat:
        if readonly:
            server.close()
            raise
    older = int(RedisStorage(server, fingerprint=1).meta["fingerprint"])
    return RedisStorage(server, fingerprint=older)
