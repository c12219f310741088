"""Opening a store on Redis from its URL."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidArgument, OlderFormat
from ...frontier.spi import Durability
from .partitioned import PARTITIONED_FORMAT, PartitionedRedisStorage
from .server import Address, Server
from .storage import OtherFormat, RedisStorage

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
    address = Address.parse(url)
    server = Server(address)
    layout: type[RedisStorage] = PartitionedRedisStorage if address.partitioned else RedisStorage
    try:
        return layout(server, readonly=readonly)
    except OtherFormat as exc:  # the store's own layout, whatever the URL asks of a new one
        layout = PartitionedRedisStorage if exc.format == PARTITIONED_FORMAT else RedisStorage
        try:
            return layout(server, readonly=readonly)
        except OlderFormat:
            if readonly:
                server.close()
                raise
    except OlderFormat:
        if readonly:
            server.close()
            raise
    older = int(layout(server, fingerprint=1).meta["fingerprint"])
    return layout(server, fingerprint=older)
