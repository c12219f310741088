"""Helpers for the URL Frontier service tests: a server on a store, a stub, messages."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import grpc

from crawlstore import ManualClock
from crawlstore.urlfrontier import urlfrontier_pb2 as pb
from crawlstore.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from crawlstore.urlfrontier.server import Server

OK, SKIPPED, FAIL = pb.AckMessage.OK, pb.AckMessage.SKIPPED, pb.AckMessage.FAIL


class Running:
    """A server on ``path`` (port 0), its stub, and the clock it runs on."""

    def __init__(self, path: Path, clock: ManualClock, **options: Any) -> None:
        self.path, self.clock, self.options = path, clock, options
        self.server = Server(path, port=0, clock=clock, durability="nosync", **options).start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.server.port}")
        self.stub = pb_grpc.URLFrontierStub(self.channel)

    def restart(self) -> None:
        self.stop()
        self.__init__(self.path, self.clock, **self.options)  # type: ignore[misc]

    def stop(self) -> None:
        self.channel.close()
        self.server.stop()

    # -- calls ----------------------------------------------------------------------------------

    def put(self, *items: pb.URLItem) -> list[tuple[str, int]]:
        return sorted((a.ID, a.status) for a in self.stub.PutURLs(iter(items)))

    def get(self, crawl: str | None = None, **params: Any) -> list[pb.URLInfo]:
        if crawl is not None:
            params["crawlID"] = crawl
        return list(self.stub.GetURLs(pb.GetParams(**params)))

    def urls(self, crawl: str | None = None, **params: Any) -> list[str]:
        return [info.url for info in self.get(crawl, **params)]

    def stats(self, key: str = "", crawl: str = "") -> pb.Stats:
        return self.stub.GetStats(pb.QueueWithinCrawlParams(key=key, crawlID=crawl))


def info(url: str, key: str = "", crawl: str = "", **metadata: Iterable[str]) -> pb.URLInfo:
    meta = {name: pb.StringList(values=list(values)) for name, values in metadata.items()}
    return pb.URLInfo(url=url, key=key, crawlID=crawl, metadata=meta)


def discovered(url: str, key: str = "", crawl: str = "", id: str = "",
               **metadata: Iterable[str]) -> pb.URLItem:  # fmt: skip
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=info(url, key, crawl, **metadata)),
                      ID=id)  # fmt: skip


def known(url: str, date: float, key: str = "", crawl: str = "", id: str = "",
          **metadata: Iterable[str]) -> pb.URLItem:  # fmt: skip
    return pb.URLItem(
        known=pb.KnownURLItem(info=info(url, key, crawl, **metadata),
                              refetchable_from_date=int(date)), ID=id)  # fmt: skip


def batches(*groups: tuple[str, list[pb.URLInfo]]) -> Iterator[pb.DiscoveredBatch]:
    for batch_id, items in groups:
        yield pb.DiscoveredBatch(ID=batch_id, items=items)
