"""``crawlstore.urlfrontier.Client`` against the service running in this process: every call,
its answers as plain values, errors as ``FrontierError``, dump files read back."""

from __future__ import annotations

import gzip
import json
import logging
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

grpc = pytest.importorskip("grpc")

from crawlstore import Store  # noqa: E402
from crawlstore.urlfrontier import (  # noqa: E402
    URL,
    Acks,
    Client,
    DumpError,
    FrontierError,
    read_urls,
)
from crawlstore.urlfrontier import urlfrontier_pb2_grpc as pb_grpc  # noqa: E402
from crawlstore.urlfrontier.server import Server  # noqa: E402
from crawlstore.urlfrontier.service import FrontierService  # noqa: E402


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    server = Server(tmp_path / "s.db", port=0, default_delay=0.0, durability="nosync")
    with server, Client(f"127.0.0.1:{server.port}") as c:
        yield c


def test_put_urls_acks_every_url_through_a_small_window(client: Client) -> None:
    urls = [f"https://h{i % 5}.example/{i}" for i in range(60)]
    assert client.put_urls(urls, window=3) == Acks(ok=60, skipped=0, failed=0)
    again = client.put_urls([*urls[:10], "not a url", "https://new.example/"], window=2)
    assert again == Acks(ok=1, skipped=11, failed=0)
    assert client.count_urls() == 61


def test_put_urls_known_items_keep_key_metadata_and_dates(client: Client) -> None:
    later = int(time.time()) + 3600
    acks = client.put_urls([
        URL("https://a.example/m", key="qa", metadata={"depth": ("1",), "tag": ("x", "y")}),
        URL("https://a.example/done", key="qa", refetchable_from=0),
        URL("https://b.example/later", crawl="other", refetchable_from=later),
    ])  # fmt: skip
    assert acks.ok == 3
    status = client.url_status("https://a.example/m", key="qa")
    assert status is not None
    assert (status.url, status.key, status.crawl) == ("https://a.example/m", "qa", "DEFAULT")
    assert status.metadata == {"depth": ("1",), "tag": ("x", "y")}
    assert status.created > 0
    done = client.url_status("https://a.example/done", key="qa")
    assert done is not None and done.refetchable_from == 0
    scheduled = client.url_status("https://b.example/later", crawl="other")
    assert scheduled is not None and scheduled.refetchable_from == later
    assert client.url_status("https://b.example/later") is None  # not in DEFAULT
    assert client.url_status("https://nowhere.example/") is None


def test_put_urls_of_strings_as_known(client: Client) -> None:
    client.put_urls(["https://a.example/1"], crawl="c", known=0)
    status = client.url_status("https://a.example/1", crawl="c")
    assert status is not None and status.refetchable_from == 0
    assert client.get_urls(crawl="c") == []


def test_an_error_reading_the_urls_is_raised_not_lost(client: Client) -> None:
    def urls() -> Iterator[str]:
        yield "https://a.example/1"
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        client.put_urls(urls())


def test_put_discovered_batches_and_skips_what_is_known(client: Client) -> None:
    client.put_urls(["https://a.example/0"])
    urls = [f"https://a.example/{i}" for i in range(10)] + ["https://a.example/3", "nope"]
    assert client.put_discovered(urls, batch=3, window=2) == Acks(ok=9, skipped=3, failed=0)
    assert client.put_discovered([], batch=3) == Acks(ok=0, skipped=0, failed=0)
    assert client.count_urls() == 10


class _Before26(FrontierService):
    PutDiscovered = pb_grpc.URLFrontierServicer.PutDiscovered  # UNIMPLEMENTED


def test_put_discovered_falls_back_to_put_urls(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.db", durability="nosync")
    service = _Before26(store)
    server = grpc.server(ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_URLFrontierServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with Client(host="127.0.0.1", port=port) as client:
            urls = ["https://a.example/1", "https://a.example/2", "https://a.example/1"]
            assert client.put_discovered(urls, batch=2) == Acks(ok=2, skipped=1, failed=0)
            assert client.count_urls() == 2
    finally:
        server.stop(0).wait()
        service.close()
        store.close()


def test_get_urls_of_a_crawl_a_queue_or_any_crawl(client: Client) -> None:
    client.put_urls([f"https://h{i}.example/{j}" for i in range(3) for j in range(3)])
    client.put_urls([f"https://b.example/{j}" for j in range(2)], crawl="BESPOKE")
    one = client.get_urls(max_urls_per_queue=1, max_queues=1, crawl="DEFAULT")
    assert len(one) == 1 and one[0].crawl == "DEFAULT" and one[0].key.endswith(".example")
    keyed = client.get_urls(key="h2.example", crawl="DEFAULT", max_urls_per_queue=2)
    assert [u.url for u in keyed] == ["https://h2.example/0", "https://h2.example/1"]
    assert all(u.refetchable_from is None for u in keyed)
    rest = client.get_urls(delay_requestable=3600)  # any crawl
    assert {u.crawl for u in rest} == {"DEFAULT", "BESPOKE"}
    assert len(one) + len(keyed) + len(rest) == 11
    assert client.get_urls() == []  # all in process
    assert client.stats().in_process == 9


def test_active_switch(client: Client) -> None:
    client.put_urls(["https://a.example/1"])
    assert client.get_active() is True
    client.set_active(False)
    assert client.get_active() is False
    assert client.get_urls() == []
    client.set_active(True)
    assert [u.url for u in client.get_urls()] == ["https://a.example/1"]


def test_queues_crawls_nodes_and_stats(client: Client) -> None:
    client.put_urls([f"https://h{i}.example/" for i in range(5)])
    client.put_urls(["https://b.example/"], crawl="BESPOKE")
    assert client.list_crawls() == ["BESPOKE", "DEFAULT"]
    assert client.list_nodes() == [client.address]
    page = client.list_queues(size=2, start=1)
    assert page.crawl == "DEFAULT" and page.start == 1 and len(page.keys) == 2
    every = client.list_queues(size=10)
    assert sorted(every.keys) == [f"h{i}.example" for i in range(5)]
    assert set(page.keys) < set(every.keys) and every.total == 5
    client.block_queue_until("h0.example", time.time() + 3600)
    assert "h0.example" not in client.list_queues().keys
    assert "h0.example" in client.list_queues(include_inactive=True).keys
    stats = client.stats()
    assert (stats.crawl, stats.size, stats.in_process, stats.queues) == ("DEFAULT", 5, 0, 5)
    assert stats.counts == {"completed": 0, "active_queues": 5}
    assert client.stats(crawl="BESPOKE", key="b.example").size == 1


def test_block_delay_and_limit_hold_queues_back(client: Client) -> None:
    client.put_urls([f"https://{h}.example/{j}" for h in "abc" for j in range(3)])
    client.block_queue_until("a.example", time.time() + 3600)
    client.set_delay(3600, key="b.example")
    client.set_crawl_limit("c.example", 1)
    client.put_urls(["https://c.example/0"], known=0)  # one completed: the limit is reached
    got = client.get_urls(max_urls_per_queue=1)
    assert [u.url for u in got] == ["https://b.example/0"]
    client.block_queue_until("a.example", 0)
    client.set_crawl_limit("c.example", 0)
    got = client.get_urls(max_urls_per_queue=5)  # b waits for its delay
    assert {u.key for u in got} == {"a.example", "c.example"} and len(got) == 5
    with pytest.raises(FrontierError) as caught:
        client.set_crawl_limit("", 3)
    assert caught.value.code == "INVALID_ARGUMENT" and caught.value.call.startswith("SetCrawl")


def test_set_delay_without_a_key_is_every_queues(client: Client) -> None:
    client.put_urls([f"https://a.example/{j}" for j in range(3)])
    client.set_delay(3600)
    assert len(client.get_urls(max_urls_per_queue=1)) == 1
    assert client.get_urls(max_urls_per_queue=1) == []


def test_list_count_and_purge_urls(client: Client) -> None:
    client.put_urls([f"https://h{i % 2}.example/Page{i}" for i in range(7)])
    listed = list(client.list_urls(page=2))
    assert sorted(u.url for u in listed) == sorted(f"https://h{i % 2}.example/Page{i}"
                                                   for i in range(7))  # fmt: skip
    assert all(u.refetchable_from is not None and u.created > 0 for u in listed)
    assert len(list(client.list_urls(start=5, page=2))) == 2
    assert len(list(client.list_urls(key="h0.example"))) == 4
    assert list(client.list_urls(filter="page")) == []
    assert len(list(client.list_urls(filter="page", ignore_case=True))) == 7
    assert client.count_urls() == 7
    assert client.count_urls(key="h1.example") == 3
    assert client.count_urls(filter="page1", ignore_case=True) == 1
    assert client.purge_urls(days=1) == 0
    assert client.purge_urls(key="h1.example") == 3
    assert client.count_urls() == 4


def test_delete_queue_and_crawl(client: Client) -> None:
    client.put_urls([f"https://h{i % 2}.example/{i}" for i in range(5)])
    client.put_urls(["https://b.example/"], crawl="BESPOKE")
    assert client.delete_queue("h0.example") == 3
    assert client.delete_queue("nothing.example") == 0
    assert client.count_urls() == 2
    assert client.delete_crawl("BESPOKE") == 1
    assert client.list_crawls() == ["DEFAULT"]


def test_set_log_level(client: Client) -> None:
    client.set_log_level("DEBUG", package="crawlstore.test.client")
    assert logging.getLogger("crawlstore.test.client").level == logging.DEBUG
    client.set_log_level("warn", package="crawlstore.test.client")
    assert logging.getLogger("crawlstore.test.client").level == logging.WARNING
    with pytest.raises(ValueError, match="log level"):
        client.set_log_level("LOUD")


@pytest.mark.parametrize("name", ["dump.jsonl", "dump.jsonl.gz"])
def test_dump_and_read_back(client: Client, tmp_path: Path, name: str) -> None:
    later = int(time.time()) + 3600
    client.put_urls([URL("https://a.example/m", metadata={"k": ("v",)}),
                     URL("https://a.example/done", refetchable_from=0),
                     URL("https://a.example/later", refetchable_from=later),
                     URL("https://b.example/", crawl="BESPOKE")])  # fmt: skip
    path = tmp_path / name
    assert client.dump(path) == 4
    text = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    lines = [json.loads(line) for line in text.splitlines()]
    assert all("known" in line and "creationDate" in line for line in lines)
    assert {line["known"]["info"]["url"] for line in lines} >= {"https://b.example/"}
    assert client.dump(tmp_path / "one.jsonl", crawl="BESPOKE") == 1
    for crawl in client.list_crawls():
        client.delete_crawl(crawl)
    assert client.put_urls(read_urls(path)).ok == 4
    assert client.count_urls(crawl="BESPOKE") == 1
    meta = client.url_status("https://a.example/m")
    done = client.url_status("https://a.example/done")
    scheduled = client.url_status("https://a.example/later")
    assert meta is not None and meta.metadata == {"k": ("v",)}
    assert done is not None and done.refetchable_from == 0
    assert scheduled is not None and scheduled.refetchable_from == later


def test_read_urls_of_plain_lines_and_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "urls.txt"
    path.write_text("https://a.example/\n\n  https://b.example/  \n")
    assert list(read_urls(path, crawl="c")) == [URL("https://a.example/", crawl="c"),
                                                URL("https://b.example/", crawl="c")]  # fmt: skip
    path.write_text('https://a.example/\n{"known": 3}\n')
    with pytest.raises(DumpError, match="line 2"):
        list(read_urls(path))


def test_a_server_that_cannot_be_reached(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Client(f"127.0.0.1:{port}", timeout=5) as client:
        with pytest.raises(FrontierError) as caught:
            client.list_crawls()
        assert caught.value.code == "UNAVAILABLE"
        assert f"127.0.0.1:{port}" in str(caught.value)
        with pytest.raises(FrontierError, match="UNAVAILABLE"):
            client.put_urls(["https://a.example/"])
        with pytest.raises(FrontierError, match="UNAVAILABLE"):
            client.get_urls()
