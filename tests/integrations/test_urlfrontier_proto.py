"""The URL Frontier schema: the committed stubs are what ``urlfrontier.proto`` generates, and the
schema is the upstream API 2.6. The expectations below are written out by hand from the API's
field tables, so they check the ``.proto`` rather than restate it."""

from __future__ import annotations

import hashlib
import importlib.util
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.protobuf", reason="protobuf is not installed (the urlfrontier extra)")

from google.protobuf import descriptor_pb2, json_format
from helpers import ROOT

from crawlstore.urlfrontier import regenerate
from crawlstore.urlfrontier import urlfrontier_pb2 as pb

FILE = descriptor_pb2.FileDescriptorProto()
pb.DESCRIPTOR.CopyToProto(FILE)
Field = descriptor_pb2.FieldDescriptorProto

# (RPC, request, response, streaming), in the order of the service block
RPCS = [
    ("ListNodes", "Empty", "StringList", "unary"),
    ("ListCrawls", "Local", "StringList", "unary"),
    ("DeleteCrawl", "DeleteCrawlMessage", "Long", "unary"),
    ("ListQueues", "Pagination", "QueueList", "unary"),
    ("GetURLs", "GetParams", "URLInfo", "server-streaming"),
    ("PutURLs", "URLItem", "AckMessage", "bidirectional"),
    ("PutDiscovered", "DiscoveredBatch", "BatchAck", "bidirectional"),
    ("GetStats", "QueueWithinCrawlParams", "Stats", "unary"),
    ("DeleteQueue", "QueueWithinCrawlParams", "Long", "unary"),
    ("BlockQueueUntil", "BlockQueueParams", "Empty", "unary"),
    ("SetActive", "Active", "Empty", "unary"),
    ("GetActive", "Local", "Boolean", "unary"),
    ("SetDelay", "QueueDelayParams", "Empty", "unary"),
    ("SetLogLevel", "LogLevelParams", "Empty", "unary"),
    ("SetCrawlLimit", "CrawlLimitParams", "Empty", "unary"),
    ("GetURLStatus", "URLStatusRequest", "URLItem", "unary"),
    ("ListURLs", "ListUrlParams", "URLItem", "server-streaming"),
    ("CountURLs", "CountUrlParams", "Long", "unary"),
    ("PurgeURLs", "PurgeUrlParams", "Long", "unary"),
]
STREAMING = {  # (client streams, server streams)
    "unary": (False, False),
    "server-streaming": (False, True),
    "bidirectional": (True, True),
}
MESSAGES = {
    "Empty", "Local", "Active", "Boolean", "Long", "StringList", "DeleteCrawlMessage",
    "Pagination", "QueueList", "QueueWithinCrawlParams", "QueueDelayParams", "BlockQueueParams",
    "GetParams", "AnyCrawlID", "URLItem", "AckMessage", "URLInfo", "KnownURLItem",
    "DiscoveredURLItem", "DiscoveredBatch", "BatchAck", "Stats", "LogLevelParams",
    "CrawlLimitParams", "URLStatusRequest", "ListUrlParams", "CountUrlParams", "PurgeUrlParams",
}  # fmt: skip
# field: (number, type); "oneof NAME T" for a member of a oneof, "optional T" for proto3 optional
FIELDS: dict[str, dict[str, tuple[int, str]]] = {
    "GetParams": {
        "max_urls_per_queue": (1, "uint32"),
        "max_queues": (2, "uint32"),
        "key": (3, "string"),
        "delay_requestable": (4, "uint32"),
        "anyCrawlID": (5, "oneof item AnyCrawlID"),
        "crawlID": (6, "oneof item string"),
    },
    "URLItem": {
        "discovered": (1, "oneof item DiscoveredURLItem"),
        "known": (2, "oneof item KnownURLItem"),
        "ID": (3, "string"),
        "creation_date": (4, "uint64"),
    },
    "AckMessage": {"ID": (1, "string"), "status": (2, "AckMessage.Status")},
    "URLInfo": {
        "url": (1, "string"),
        "key": (2, "string"),
        "metadata": (3, "map<string, StringList>"),
        "crawlID": (4, "string"),
    },
    "KnownURLItem": {"info": (1, "URLInfo"), "refetchable_from_date": (2, "uint64")},
    "DiscoveredBatch": {"ID": (1, "string"), "items": (2, "repeated URLInfo")},
    "BatchAck": {"ID": (1, "string"), "statuses": (2, "repeated AckMessage.Status")},
    "Stats": {
        "size": (1, "uint64"),
        "inProcess": (2, "uint32"),
        "counts": (3, "map<string, uint64>"),
        "numberOfQueues": (4, "uint64"),
        "crawlID": (5, "string"),
    },
    "QueueList": {
        "values": (1, "repeated string"),
        "total": (2, "uint64"),
        "start": (3, "uint32"),
        "size": (4, "uint32"),
        "crawlID": (5, "string"),
    },
    "LogLevelParams": {
        "package": (1, "string"),
        "level": (2, "LogLevelParams.Level"),
        "local": (3, "bool"),
    },
    "CrawlLimitParams": {
        "key": (1, "string"),
        "limit": (2, "uint32"),
        "crawlID": (3, "string"),
        "local": (4, "bool"),
    },
    "ListUrlParams": {
        "start": (1, "uint32"),
        "size": (2, "uint32"),
        "key": (3, "string"),
        "crawlID": (4, "string"),
        "local": (5, "bool"),
        "filter": (6, "optional string"),
        "ignoreCase": (7, "optional bool"),
    },
    "CountUrlParams": {
        "key": (1, "string"),
        "crawlID": (2, "string"),
        "filter": (3, "optional string"),
        "ignoreCase": (4, "optional bool"),
        "local": (5, "optional bool"),
    },
    "PurgeUrlParams": {"key": (1, "string"), "crawlID": (2, "string"), "days": (3, "uint32")},
}
ENUMS = {
    "AckMessage.Status": {"OK": 0, "SKIPPED": 1, "FAIL": 2},
    "LogLevelParams.Level": {"TRACE": 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4},
}
# sha256 of the descriptor compiled from the upstream 2.6 file (sha256 897623e8...1e9b): ours is
# the same bytes, so stubs generated from either can share one process's descriptor pool
UPSTREAM_DESCRIPTOR = "fdd2472692aefa53e1f947f203feb5aa574531fbc34765976e786ec26d8b9b35"


def _message(name: str) -> descriptor_pb2.DescriptorProto:
    return next(m for m in FILE.message_type if m.name == name)


def _type(message: descriptor_pb2.DescriptorProto, field: Field) -> str:
    if field.type in (Field.TYPE_MESSAGE, Field.TYPE_ENUM):
        name = field.type_name.removeprefix(".urlfrontier.")
    else:
        name = Field.Type.Name(field.type).removeprefix("TYPE_").lower()
    entries = {f"{message.name}.{n.name}": n for n in message.nested_type if n.options.map_entry}
    if name in entries:
        key, value = entries[name].field
        return f"map<{_type(entries[name], key)}, {_type(entries[name], value)}>"
    if field.label == Field.LABEL_REPEATED:
        return f"repeated {name}"
    if field.proto3_optional:
        return f"optional {name}"
    if field.HasField("oneof_index"):
        return f"oneof {message.oneof_decl[field.oneof_index].name} {name}"
    return name


def test_package_and_service() -> None:
    assert (FILE.name, FILE.package, FILE.syntax) == ("urlfrontier.proto", "urlfrontier", "proto3")
    assert [s.name for s in FILE.service] == ["URLFrontier"]
    assert pb.DESCRIPTOR.services_by_name["URLFrontier"].full_name == "urlfrontier.URLFrontier"
    assert not FILE.dependency  # no imports, no well-known types


def test_every_rpc_with_its_types_and_streaming() -> None:
    methods = [
        (m.name, m.input_type, m.output_type, (m.client_streaming, m.server_streaming))
        for m in FILE.service[0].method
    ]
    expected = [
        (name, f".urlfrontier.{request}", f".urlfrontier.{response}", STREAMING[streaming])
        for name, request, response, streaming in RPCS
    ]
    assert methods == expected


def test_the_messages_are_those_of_the_api() -> None:
    assert {m.name for m in FILE.message_type} == MESSAGES


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_fields_numbers_and_types(name: str) -> None:
    message = _message(name)
    assert {f.name: (f.number, _type(message, f)) for f in message.field} == FIELDS[name]


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_nested_enums(name: str) -> None:
    outer, inner = name.split(".")
    (enum,) = [e for e in _message(outer).enum_type if e.name == inner]
    assert {v.name: v.number for v in enum.value} == ENUMS[name]


def test_the_descriptor_is_the_upstream_one() -> None:
    assert hashlib.sha256(pb.DESCRIPTOR.serialized_pb).hexdigest() == UPSTREAM_DESCRIPTOR


def test_on_the_wire() -> None:
    # an explicit empty crawl ID is sent (field 6, empty); no crawl ID leaves the oneof unset
    assert pb.GetParams(crawlID="").SerializeToString() == b"\x32\x00"
    assert pb.GetParams().WhichOneof("item") is None
    # repeated enums are packed: field 2, length 2, SKIPPED, FAIL
    statuses = [pb.AckMessage.SKIPPED, pb.AckMessage.FAIL]
    assert pb.BatchAck(statuses=statuses).SerializeToString() == b"\x12\x02\x01\x02"
    # the JSON names of the Java client's dump format
    item = pb.URLItem(ID="u", known=pb.KnownURLItem(refetchable_from_date=5))
    assert json_format.MessageToDict(item) == {"ID": "u", "known": {"refetchableFromDate": "5"}}


class _Channel:
    """Records what the generated client stub asks a channel for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, kind: str) -> Any:
        def method(path: str, **_: Any) -> None:
            self.calls.append((path, kind))

        return method


def test_the_service_module_imports_inside_the_package() -> None:
    pytest.importorskip("grpc", reason="grpcio is not installed (the urlfrontier extra)")
    from crawlstore.urlfrontier import urlfrontier_pb2_grpc as service

    channel = _Channel()
    service.URLFrontierStub(channel)
    kinds = {
        "unary": "unary_unary",
        "server-streaming": "unary_stream",
        "bidirectional": "stream_stream",
    }
    paths = [(f"/urlfrontier.URLFrontier/{name}", kinds[s]) for name, _, _, s in RPCS]
    assert channel.calls == paths
    servicer = [n for n in vars(service.URLFrontierServicer) if not n.startswith("_")]
    assert servicer == [name for name, *_ in RPCS]


def test_committed_stubs_are_current(tmp_path: Path) -> None:
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpcio-tools is not installed (the test extra): cannot regenerate the stubs")
    regenerate.generate(tmp_path)
    stale = [
        name
        for name in regenerate.STUBS
        if (tmp_path / name).read_bytes() != (regenerate.HERE / name).read_bytes()
    ]
    assert not stale, (
        f"{stale} differ from what grpcio-tools {version('grpcio-tools')} generates from "
        "urlfrontier.proto: run python -m crawlstore.urlfrontier.regenerate with the "
        "grpcio-tools the test extra pins"
    )


def test_the_extras_require_what_the_stubs_were_generated_for() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib needs Python 3.11")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    stubs = {name: (regenerate.HERE / name).read_text() for name in regenerate.STUBS}
    grpc = re.search(r"GRPC_GENERATED_VERSION = '(.+)'", stubs["urlfrontier_pb2_grpc.py"])
    protobuf = re.search(r"# Protobuf Python Version: (.+)", stubs["urlfrontier_pb2.py"])
    assert grpc and protobuf
    runtime = {f"grpcio>={grpc[1]}", f"protobuf>={protobuf[1]}"}
    assert runtime <= set(extras["urlfrontier"])
    assert runtime | {f"grpcio-tools=={grpc[1]}"} <= set(extras["test"])
