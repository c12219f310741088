"""The URL Frontier API (crawler-commons/url-frontier, 2.6) over gRPC
(``pip install -e '.[urlfrontier]'``): ``urlfrontier.proto`` and the Python stubs
generated from it, ``urlfrontier_pb2`` (messages) and ``urlfrontier_pb2_grpc`` (service); a
client, ``Client``, with the values it answers and URL files (``read_urls``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import Acks, Client, FrontierError, FrontierStats, QueueList
    from .items import URL, DumpError, read_urls

__all__ = ["URL", "Acks", "Client", "DumpError", "FrontierError", "FrontierStats", "QueueList",
           "read_urls"]  # fmt: skip

_WHERE = {"URL": "items", "DumpError": "items", "read_urls": "items"}


def __getattr__(name: str) -> Any:  # imported on first use: the stubs need grpc and protobuf
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE.get(name, 'client')}", __name__), name)
