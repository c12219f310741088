"""Opening a store on Redis from its URL."""

from __future__ import annotations

from typing import Any

from ...errors import InvalidArgument, OlderFormat
from ...frontier.spi import Durability
from .partitioned import INDEXLESS_FORMAT, PARTITIONED_FORMAT, PartitionedRedisStorage
from .server import Address, Server
from .storage import LayoutMove, OtherFormat, RedisStorage

__all__ = ["open_url"]


def open_url(url: str, *, durability: Durability, readonly: bool, options: dict[str, Any]
             ) -> RedisStorage:  # fmt: skip
    """The storage at ``url``, created when its namespace is empty (in format 3 unless the URL
    says ``partitioned=0``). A store of format 1 opens only when its URL says
    ``partitioned=0``; else it raises ``LayoutMove``, naming ``crawlstore migrate``, as a
    store of format 2 does (it has no indexes yet). A store
    whose records hold an older fingerprint version opens at that version (``fingerprint``),
    for ``Store.open`` to migrate; read-only, it raises ``OlderFormat``."""
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
    layout: type[RedisStorage] = (
        RedisStorage if address.partitioned is False else PartitionedRedisStorage
    )
    try:
        try:
            return layout(server, readonly=readonly)
        except OtherFormat as exc:  # the store's own layout, whatever the URL asks of a new one
            if exc.format == INDEXLESS_FORMAT:
                raise _format_2(address) from None
            if exc.format != PARTITIONED_FORMAT and address.partitioned is not False:
                raise _format_1(address) from None
            layout = PartitionedRedisStorage if exc.format == PARTITIONED_FORMAT else RedisStorage
            return layout(server, readonly=readonly)
    except LayoutMove:
        server.close()
        raise
    except OlderFormat:
        if readonly:
            server.close()
            raise
    older = int(layout(server, fingerprint=1).meta["fingerprint"])
    return layout(server, fingerprint=older)


def _format_1(address: Address) -> LayoutMove:
    return LayoutMove(
        f"{address} is a store of format 1, whose every unit takes one store-wide lock; this "
        "crawlstore writes format 3, whose units commit bucket by bucket (see the Redis "
        f"guide). Stop the store's clients, then run: crawlstore migrate '{address}' (it "
        "keeps an export of the store in a file). To go on in format 1, add partitioned=0 "
        "to the URL."
    )


def _format_2(address: Address) -> LayoutMove:
    return LayoutMove(
        f"{address} is a store of format 2, which keeps none of the crawls' bounded indexes "
        "of format 3 (recent failures, revisits by the minute, blocked trap prefixes apart). "
        "Stop the store's clients, then run: crawlstore migrate "
        f"'{address}' (it writes them in place, from the records)."
    )
