"""The URL Frontier service over gRPC on 127.0.0.1: every call, the reference service's rules
(and the ones it gets wrong, done right), the upstream black-box suite's assertions."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from urlfrontier_helpers import OK, SKIPPED, Running, batches, discovered, info, known

from crawlstore import ManualClock
from crawlstore.urlfrontier import urlfrontier_pb2 as pb

NOW = 1_800_000_000.0


@pytest.fixture
def uf(tmp_path: Path) -> Iterator[Running]:
    running = Running(tmp_path / "served.lmdb", ManualClock(NOW))
    yield running
    running.stop()


# -- the upstream black-box suite (URLFrontierServiceTest) -------------------------------------


def test_never_refetched(uf: Running) -> None:
    assert uf.put(known("http://www.example.com/never", 0)) == [
        ("http://www.example.com/never", OK)
    ]
    assert uf.get("DEFAULT", key="www.example.com", max_urls_per_queue=10) == []


def test_right_order(uf: Running) -> None:
    uf.put(
        known("http://www.example.com/new", NOW), known("http://www.example.com/old", NOW - 10000)
    )
    got = uf.urls("DEFAULT", key="www.example.com", max_urls_per_queue=2, max_queues=1)
    assert got == ["http://www.example.com/old", "http://www.example.com/new"]


def test_updates_with_leases_expiring(uf: Running) -> None:
    url = "http://www.example.com/"
    assert uf.put(discovered(url), discovered(url)) == [(url, OK), (url, SKIPPED)]
    assert uf.stub.ListQueues(pb.Pagination()).values == ["www.example.com"]
    params = {"key": "www.example.com", "max_urls_per_queue": 1, "delay_requestable": 2}
    assert uf.urls("DEFAULT", **params) == [url]
    stats = uf.stats("www.example.com")
    assert (stats.numberOfQueues, stats.inProcess) == (1, 1)
    assert uf.urls("DEFAULT", **params) == []
    uf.clock.advance(2)
    assert uf.urls("DEFAULT", **{**params, "delay_requestable": 0}) == [url]  # lease expired
    uf.clock.advance(31)
    assert uf.stats("www.example.com").inProcess == 0  # 0 meant 30 s
    assert uf.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="www.example.com")).value == 1
    assert uf.stats().numberOfQueues == 0


def test_queue_names_from_a_url_with_a_query_and_no_path(uf: Running) -> None:
    uf.put(discovered("http://gac.icann.org?language_id=1"))
    assert uf.stub.ListQueues(pb.Pagination()).values == ["gac.icann.org"]
    assert uf.stats("gac.icann.org").size == 1
    assert uf.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="gac.icann.org")).value == 1


def test_crawl_ids(uf: Running) -> None:
    assert list(uf.stub.ListCrawls(pb.Local()).values) == []
    url = "http://www.example.com/"
    uf.put(discovered(url, crawl="BESPOKE"), discovered(url, crawl=""))
    assert uf.put(discovered(url, crawl="DEFAULT")) == [(url, SKIPPED)]  # "" is DEFAULT
    default, bespoke = uf.stats(crawl="DEFAULT"), uf.stats(crawl="BESPOKE")
    assert (default.size, default.numberOfQueues, default.crawlID) == (1, 1, "DEFAULT")
    assert (bespoke.size, bespoke.crawlID) == (1, "BESPOKE")
    assert sorted(uf.stub.ListCrawls(pb.Local()).values) == ["BESPOKE", "DEFAULT"]
    assert uf.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="BESPOKE")).value == 1
    assert (uf.stats(crawl="BESPOKE").size, uf.stats(crawl="BESPOKE").crawlID) == (0, "BESPOKE")
    uf.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=""))
    assert uf.stats(crawl="").size == 0
    assert list(uf.stub.ListCrawls(pb.Local()).values) == []


# -- putting URLs -------------------------------------------------------------------------------


def test_acks_carry_the_id_or_the_url(uf: Running) -> None:
    acks = uf.put(discovered("http://a.com/1", id="one"), discovered("http://a.com/2"))
    assert acks == [("http://a.com/2", OK), ("one", OK)]


def test_urls_the_model_refuses_and_overlong_keys_are_skipped(
    uf: Running, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "crawlstore.urlfrontier")
    acks = uf.put(discovered("ftp://a.com/x"), discovered("no url"),
                  discovered("http://a.com/x", key="k" * 256), pb.URLItem(ID="empty"),
                  discovered("http://a.com/ok", key="k" * 255))  # fmt: skip
    assert acks == [("empty", SKIPPED), ("ftp://a.com/x", SKIPPED), ("http://a.com/ok", OK),
                    ("http://a.com/x", SKIPPED), ("no url", SKIPPED)]  # fmt: skip
    assert "ftp://a.com/x" in caplog.text
    assert uf.stats().size == 1


def test_the_clients_url_comes_back_byte_for_byte(uf: Running) -> None:
    raw = "HTTP://Example.COM:80/a b/../c?x=1#frag"
    assert uf.put(discovered(raw, id="r")) == [("r", OK)]
    assert uf.urls(max_urls_per_queue=1) == [raw]
    item = uf.stub.GetURLStatus(pb.URLStatusRequest(url=raw))
    assert item.known.info.url == raw and item.known.info.key == "example.com"
    assert [i.known.info.url for i in uf.stub.ListURLs(pb.ListUrlParams())] == [raw]


def test_discovered_urls_go_in_only_when_unknown(uf: Running) -> None:
    url = "http://a.com/1"
    uf.put(known(url, 0, note=["done"]))
    assert uf.put(discovered(url, note=["again"])) == [(url, SKIPPED)]
    status = uf.stub.GetURLStatus(pb.URLStatusRequest(url=url))
    assert status.known.refetchable_from_date == 0
    assert list(status.known.info.metadata["note"].values) == ["done"]  # completed keeps it


def test_known_urls_overwrite_metadata_and_reschedule(uf: Running) -> None:
    url = "http://a.com/1"
    uf.put(discovered(url, a=["1"]))
    uf.put(known(url, NOW + 60, b=["2"]))
    status = uf.stub.GetURLStatus(pb.URLStatusRequest(url=url)).known
    assert status.refetchable_from_date == int(NOW + 60)
    assert dict(status.info.metadata) == {"b": pb.StringList(values=["2"])}
    assert uf.urls(max_urls_per_queue=5) == []
    uf.clock.advance(60)
    assert uf.urls(max_urls_per_queue=5) == [url]
    uf.put(known(url, 0))
    uf.clock.advance(3600)
    assert uf.urls(max_urls_per_queue=5) == []  # completed: never again
    assert uf.stats().counts["completed"] == 1


def test_a_known_update_ends_the_lease_whoever_holds_it(uf: Running) -> None:
    url = "http://a.com/1"
    uf.put(discovered(url))
    assert uf.urls(max_urls_per_queue=1, delay_requestable=600) == [url]
    assert uf.stats().inProcess == 1
    uf.put(known(url, NOW))
    assert uf.stats().inProcess == 0
    uf.clock.advance(1)
    assert uf.urls(max_urls_per_queue=1) == [url]


def test_put_discovered_acks_every_batch_in_order(uf: Running) -> None:
    uf.put(discovered("http://a.com/known"))
    acks = list(uf.stub.PutDiscovered(batches(
        ("probe", []),
        ("b1", [info("http://a.com/1"), info("http://a.com/1"), info("bad"),
                info("http://a.com/known"), info("http://b.com/2", crawl="X")]),
    )))  # fmt: skip
    assert [(a.ID, list(a.statuses)) for a in acks] == [
        ("probe", []), ("b1", [OK, SKIPPED, SKIPPED, SKIPPED, OK])]  # fmt: skip
    assert uf.stats().size == 2 and uf.stats(crawl="X").size == 1


def test_a_long_stream_with_many_items_in_flight(uf: Running) -> None:
    n = 5000
    items = (discovered(f"http://h{i % 50}.com/{i}", id=str(i)) for i in range(n))
    acks = list(uf.stub.PutURLs(items))
    assert sorted(int(a.ID) for a in acks) == list(range(n))
    assert {a.status for a in acks} == {OK}
    assert uf.stats().size == n and uf.stats().numberOfQueues == 50


# -- getting URLs -------------------------------------------------------------------------------


def fill(uf: Running, hosts: int, per_host: int, crawl: str = "") -> None:
    uf.put(*(discovered(f"http://h{h}.com/{i}", crawl=crawl)
             for h in range(hosts) for i in range(per_host)))  # fmt: skip


def test_round_robin_continues_between_calls(uf: Running) -> None:
    uf.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0))
    fill(uf, 3, 3)
    got = []
    for _ in range(6):
        (one,) = uf.get(max_queues=1, max_urls_per_queue=1)
        got.append(one.key)
        uf.put(known(one.url, 0))
    assert got[:3] == ["h0.com", "h1.com", "h2.com"] and got[3:] == got[:3]


def test_the_in_process_cap_is_per_queue(uf: Running) -> None:
    uf.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0))
    fill(uf, 2, 5)
    first = uf.get(max_urls_per_queue=3)
    assert sorted(i.key for i in first) == ["h0.com"] * 3 + ["h1.com"] * 3
    assert uf.get(max_urls_per_queue=3) == []  # each queue has 3 in transit
    uf.put(known(first[0].url, 0))
    assert [i.url for i in uf.get(max_urls_per_queue=3)] == ["http://h0.com/3"]


def test_politeness_delay_per_queue_with_a_global_default(uf: Running) -> None:
    fill(uf, 2, 4)  # a new store: a delay of 1 s between two pops of a queue

    def get_and_complete() -> list[str]:
        got = uf.get(max_urls_per_queue=1)
        uf.put(*(known(i.url, 0) for i in got))
        return sorted(i.key for i in got)

    assert get_and_complete() == ["h0.com", "h1.com"]
    assert get_and_complete() == []  # too soon
    uf.clock.advance(0.999)
    assert get_and_complete() == []
    uf.clock.advance(0.001)
    assert get_and_complete() == ["h0.com", "h1.com"]  # exactly 1 s later, not 2 s
    uf.stub.SetDelay(pb.QueueDelayParams(key="h0.com", delay_requestable=10))
    uf.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0))
    uf.clock.advance(1)  # a lower delay applies once the wait in course ends
    assert get_and_complete() == ["h1.com"]
    assert get_and_complete() == ["h1.com"]  # no delay now
    uf.clock.advance(9)
    assert get_and_complete() == ["h0.com"]


def test_blocks_and_limits_kept_for_queues_that_do_not_exist_yet(uf: Running) -> None:
    uf.stub.BlockQueueUntil(pb.BlockQueueParams(key="h0.com", time=int(NOW + 100)))
    uf.stub.SetCrawlLimit(pb.CrawlLimitParams(key="h1.com", limit=1))
    uf.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0))
    fill(uf, 2, 3)
    got = uf.get(max_urls_per_queue=5)
    assert [i.key for i in got] == ["h1.com"]
    uf.put(known(got[0].url, 0))
    assert uf.get(max_urls_per_queue=5) == []  # h1 reached its limit, h0 is blocked
    uf.stub.BlockQueueUntil(pb.BlockQueueParams(key="h0.com", time=0))
    assert len(uf.get(max_urls_per_queue=5)) == 3
    with pytest.raises(grpc.RpcError) as err:
        uf.stub.SetCrawlLimit(pb.CrawlLimitParams(key="", limit=1))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT


def test_crawl_selection(uf: Running, caplog: pytest.LogCaptureFixture) -> None:
    uf.put(discovered("http://a.com/1"), discovered("http://a.com/2", crawl="X"))
    assert uf.urls("", key="a.com") == ["http://a.com/1"]  # explicit "" is DEFAULT
    assert uf.urls(key="a.com") == []  # a queue needs a crawl
    assert "needs a crawl ID" in caplog.text
    uf.clock.advance(2)
    assert sorted(uf.urls(anyCrawlID=pb.AnyCrawlID())) == ["http://a.com/2"]


def test_the_active_flag(uf: Running) -> None:
    fill(uf, 1, 1)
    uf.stub.SetActive(pb.Active(state=False))
    assert uf.stub.GetActive(pb.Local()).state is False
    assert uf.get() == []
    uf.put(discovered("http://b.com/"))  # puts still work
    uf.stub.SetActive(pb.Active(state=True))
    assert len(uf.get()) == 2


# -- control and inspection ---------------------------------------------------------------------


def test_get_stats(uf: Running) -> None:
    uf.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0))
    fill(uf, 3, 2)
    uf.put(known("http://h0.com/0", 0), known("http://h0.com/1", 0))
    uf.get(max_urls_per_queue=1)
    stats = uf.stats()
    assert (stats.size, stats.inProcess, stats.numberOfQueues) == (4, 2, 3)
    assert dict(stats.counts) == {"completed": 2, "active_queues": 2}
    assert uf.stats("h0.com").size == 0 and uf.stats("nope").numberOfQueues == 0


def test_list_queues_is_sorted_paged_and_counted(uf: Running) -> None:
    fill(uf, 5, 1)
    uf.put(known("http://h2.com/0", 0))
    uf.stub.BlockQueueUntil(pb.BlockQueueParams(key="h3.com", time=int(NOW + 60)))
    active = uf.stub.ListQueues(pb.Pagination(start=1, size=2))
    assert (list(active.values), active.total, active.start, active.size) == (
        ["h1.com", "h4.com"], 3, 1, 2)  # fmt: skip
    every = uf.stub.ListQueues(pb.Pagination(include_inactive=True, crawlID=""))
    assert (list(every.values), every.total, every.crawlID) == (
        [f"h{i}.com" for i in range(5)], 5, "DEFAULT")  # fmt: skip


def test_delete_queue_of_an_unknown_queue_is_0(uf: Running) -> None:
    assert uf.stub.DeleteQueue(pb.QueueWithinCrawlParams(key="nope")).value == 0
    assert uf.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="nope")).value == 0


def test_url_status_list_count_and_purge(uf: Running) -> None:
    uf.put(discovered("http://a.com/Page"), known("http://a.com/x", NOW + 7),
           known("http://b.com/PAGE", 0))  # fmt: skip
    status = uf.stub.GetURLStatus(pb.URLStatusRequest(url="http://a.com/x", key="a.com"))
    assert (status.known.refetchable_from_date, status.creation_date) == (int(NOW + 7), int(NOW))
    for request, code in ((pb.URLStatusRequest(url="http://a.com/none"), grpc.StatusCode.NOT_FOUND),
                          (pb.URLStatusRequest(url="http://a.com/x", key="b.com"),
                           grpc.StatusCode.NOT_FOUND),
                          (pb.URLStatusRequest(url="mailto:x"), grpc.StatusCode.INVALID_ARGUMENT)):  # fmt: skip # noqa: E501
        with pytest.raises(grpc.RpcError) as err:
            uf.stub.GetURLStatus(request)
        assert err.value.code() is code and err.value.details()

    def listed(**params: object) -> list[str]:
        return sorted(i.known.info.url for i in uf.stub.ListURLs(pb.ListUrlParams(**params)))

    assert listed() == ["http://a.com/Page", "http://a.com/x", "http://b.com/PAGE"]
    assert listed(key="a.com") == ["http://a.com/Page", "http://a.com/x"]
    assert listed(filter="page") == []
    assert listed(filter="page", ignoreCase=True) == ["http://a.com/Page", "http://b.com/PAGE"]
    assert len(listed(start=1, size=1)) == 1 and len(listed(start=3)) == 0
    count = uf.stub.CountURLs
    assert (
        count(pb.CountUrlParams()).value == 3 and count(pb.CountUrlParams(key="b.com")).value == 1
    )
    assert count(pb.CountUrlParams(filter="PAGE", ignoreCase=True)).value == 2
    uf.clock.advance(86400 * 2)
    uf.put(discovered("http://a.com/new"))
    assert uf.stub.PurgeURLs(pb.PurgeUrlParams(days=1)).value == 3
    assert listed() == ["http://a.com/new"]
    assert uf.stub.PurgeURLs(pb.PurgeUrlParams(days=0)).value == 1


def test_log_level_nodes_and_errors(uf: Running) -> None:
    uf.stub.SetLogLevel(pb.LogLevelParams(package="crawlstore.x", level=pb.LogLevelParams.DEBUG))
    assert logging.getLogger("crawlstore.x").level == logging.DEBUG
    assert list(uf.stub.ListNodes(pb.Empty()).values) == [f"127.0.0.1:{uf.server.port}"]
    with pytest.raises(grpc.RpcError) as err:
        uf.stub.GetStats(pb.QueueWithinCrawlParams(crawlID="c" * 300))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "crawl ID" in (err.value.details() or "")


def test_a_client_of_api_1_1_still_talks(uf: Running) -> None:
    """Before 2.0, DeleteCrawl took a String and answered an Integer: the same fields."""
    from google.protobuf import wrappers_pb2

    uf.put(discovered("http://a.com/", crawl="OLD"))
    call = uf.channel.unary_unary(
        "/urlfrontier.URLFrontier/DeleteCrawl",
        request_serializer=wrappers_pb2.StringValue.SerializeToString,
        response_deserializer=wrappers_pb2.Int32Value.FromString,
    )
    assert call(wrappers_pb2.StringValue(value="OLD")).value == 1


# -- what the store keeps -----------------------------------------------------------------------


def test_urls_leases_and_control_state_survive_a_restart(uf: Running) -> None:
    fill(uf, 2, 2)
    uf.stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=3))
    uf.stub.SetDelay(pb.QueueDelayParams(key="h1.com", delay_requestable=0))
    uf.stub.SetCrawlLimit(pb.CrawlLimitParams(key="h1.com", limit=7))
    uf.stub.BlockQueueUntil(pb.BlockQueueParams(key="h9.com", time=int(NOW + 50)))
    leased = uf.urls(max_urls_per_queue=1, delay_requestable=100)
    uf.stub.SetActive(pb.Active(state=False))
    uf.restart()
    assert uf.stub.GetActive(pb.Local()).state is False
    uf.stub.SetActive(pb.Active(state=True))
    assert uf.stats().inProcess == 2 and uf.stats().size == 4
    assert uf.get(max_urls_per_queue=1) == []  # the leases are held
    queues = {q: uf.server.store.frontier(crawl="default").queue(q) for q in ("h1.com", "h9.com")}
    assert queues["h1.com"] is not None and (queues["h1.com"].delay, queues["h1.com"].limit) == (
        0.0,
        7,
    )
    assert queues["h9.com"] is not None and queues["h9.com"].blocked_until == NOW + 50
    assert uf.server.store.defaults().delay == 3.0
    uf.clock.advance(100)
    assert sorted(uf.urls(max_urls_per_queue=1)) == sorted(leased)


def test_prometheus_metrics_under_the_reference_names(tmp_path: Path) -> None:
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    running = Running(tmp_path / "m.lmdb", ManualClock(NOW), metrics_port=port)
    try:
        running.put(discovered("http://a.com/1"), known("http://a.com/2", 0), discovered("ftp://x"))
        running.get()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        running.stop()
    for line in ("frontier_putURLs_calls_total 1.0", "frontier_putURLs_total 3.0",
                 'frontier_putURLs_discovered_total{discovered="true"} 1.0',
                 'frontier_putURLs_discovered_total{discovered="false"} 1.0',
                 "frontier_putURLs_ignored_total 1.0", "frontier_putURLs_completed_total 1.0",
                 "frontier_getURLs_calls_total 1.0", "frontier_getURLs_total 1.0",
                 "frontier_getURLs_latency_seconds_count 1.0"):  # fmt: skip
        assert line in text, line
