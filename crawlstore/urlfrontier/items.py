"""The client's URL value, what it is on the wire (``URLInfo``, ``URLItem``), and dump files:
one JSON ``URLItem`` a line (protobuf's JSON mapping, as the Java client's ``DumpURLs`` writes
them), read back along with plain URL lines. No gRPC calls."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from google.protobuf import json_format

from ..errors import CrawlstoreError
from ..textfiles import open_text
from . import urlfrontier_pb2 as pb

__all__ = ["URL", "DumpError", "dump_line", "read_urls"]


class DumpError(CrawlstoreError, ValueError):
    """A line of a URL file that is neither a URL nor a JSON ``URLItem``; names the line."""


@dataclass(frozen=True, slots=True)
class URL:
    """A URL of the URL Frontier API. ``key``: its queue ("" lets the service derive it from
    the host); ``crawl``: its crawl ID; ``metadata``: names to lists of values.
    ``refetchable_from``: ``None`` for a discovered URL (added only if new), else a known one's
    next fetch in epoch seconds (0: never again, it is completed); ``created``: when the service
    first saw it (epoch seconds; 0 when not told)."""

    url: str
    key: str = ""
    crawl: str = "DEFAULT"
    metadata: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    refetchable_from: int | None = None
    created: int = 0

    def info(self) -> pb.URLInfo:
        """This URL as a ``URLInfo`` message."""
        return pb.URLInfo(url=self.url, key=self.key, crawlID=self.crawl,
                          metadata={name: pb.StringList(values=values)
                                    for name, values in self.metadata.items()})  # fmt: skip

    def item(self) -> pb.URLItem:
        """This URL as a ``URLItem`` message: discovered or known, its ID the URL."""
        if self.refetchable_from is None:
            return pb.URLItem(discovered=pb.DiscoveredURLItem(info=self.info()), ID=self.url,
                              creation_date=self.created)  # fmt: skip
        known = pb.KnownURLItem(info=self.info(), refetchable_from_date=self.refetchable_from)
        return pb.URLItem(known=known, ID=self.url, creation_date=self.created)

    @classmethod
    def of_info(cls, info: pb.URLInfo, *, refetchable_from: int | None = None,
                created: int = 0) -> URL:  # fmt: skip
        """The URL of a ``URLInfo`` message."""
        metadata = {name: tuple(values.values) for name, values in info.metadata.items()}
        return cls(info.url, info.key, info.crawlID or "DEFAULT", metadata, refetchable_from,
                   created)  # fmt: skip

    @classmethod
    def of_item(cls, item: pb.URLItem) -> URL:
        """The URL of a ``URLItem`` message (discovered or known)."""
        if item.WhichOneof("item") == "known":
            return cls.of_info(item.known.info, refetchable_from=item.known.refetchable_from_date,
                               created=item.creation_date)  # fmt: skip
        return cls.of_info(item.discovered.info, created=item.creation_date)


def dump_line(item: pb.URLItem) -> str:
    """One line of a dump: the item in protobuf's JSON mapping, on one line."""
    return json_format.MessageToJson(item, indent=None)


def read_urls(path: str | os.PathLike[str], *, crawl: str = "DEFAULT") -> Iterator[URL]:
    """The URLs of a file (gzip or not, ``-`` for stdin): a line is a plain URL (discovered, in
    ``crawl``) or a JSON ``URLItem`` (as a dump holds, in its own crawl); blank lines are
    skipped."""
    with open_text(path, "r") as file:
        for number, line in enumerate(file, 1):
            text = line.strip()
            if not text:
                continue
            if not text.startswith("{"):
                yield URL(text, crawl=crawl)
                continue
            try:
                item = json_format.Parse(text, pb.URLItem())
            except json_format.ParseError as exc:
                raise DumpError(f"{os.fspath(path)}, line {number}: not a URLItem: {exc}") from None
            yield URL.of_item(item)
