"""Where the service and the reference service may part: each case either does what the
reference does, or is a choice that the service page's list of differences states, with its
reason (the tests read that list)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import ROOT
from urlfrontier_helpers import OK, SKIPPED, Running, batches, discovered, info, known

from crawlstore import ManualClock
from crawlstore.urlfrontier import urlfrontier_pb2 as pb
from crawlstore.urlfrontier.service import MAX_GET

NOW = 1_800_000_000.0
PAGE = (ROOT / "docs" / "urlfrontier.md").read_text()


def section(title: str) -> str:
    """The text of a section of the service page, up to the next section."""
    start = PAGE.index(f"\n## {title}\n")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start : end if end >= 0 else None]


def differences() -> str:
    return section("Differences from the reference service")


@pytest.fixture
def uf(tmp_path: Path) -> Iterator[Running]:
    running = Running(tmp_path / "served.lmdb", ManualClock(NOW))
    yield running
    running.stop()


def queues(uf: Running, crawl: str = "", **params: object) -> list[str]:
    return list(uf.stub.ListQueues(pb.Pagination(crawlID=crawl, **params)).values)


def count(uf: Running, **params: object) -> int:
    return uf.stub.CountURLs(pb.CountUrlParams(**params)).value


# -- a known URL sent with another key goes to that key's queue --------------------------------


def test_a_known_update_with_another_key_moves_the_url_to_that_queue(uf: Running) -> None:
    url = "http://a.com/1"
    uf.put(discovered(url, key="k1"))
    assert uf.put(known(url, NOW - 10, key="k3")) == [(url, OK)]
    assert queues(uf) == ["k3"]
    assert (uf.stats("k3").size, uf.stats("k1").size) == (1, 0)
    assert (count(uf, key="k3"), count(uf, key="k1")) == (1, 0)
    (got,) = uf.get("DEFAULT", key="k3", max_urls_per_queue=5)  # the key it answers is a queue
    assert (got.url, got.key) == (url, "k3")
    assert uf.stats("k3").inProcess == 1
    status = uf.stub.GetURLStatus(pb.URLStatusRequest(url=url, key="k3"))
    assert status.known.info.key == "k3"
    assert uf.put(discovered(url, key="k1")) == [(url, SKIPPED)]  # known to the crawl: stays
    uf.put(known(url, 0, key="k1"))  # completed, back in k1: its lease ends
    assert (uf.stats("k1").counts["completed"], uf.stats("k3").counts["completed"]) == (1, 0)
    assert (uf.stats("k3").inProcess, uf.stats().size, count(uf)) == (0, 0, 1)


def test_the_docs_say_where_a_url_sent_with_another_key_goes() -> None:
    text = differences()
    assert re.search(r"discovered[^.]*another key[^.]*`SKIPPED`", text, re.S)
    assert re.search(r"known[^.]*another key[^.]*moves", text, re.S)


# -- derived keys: the host as the URL standard parses it --------------------------------------


def reference_key(url: str) -> str:
    """The key the reference derives: what follows ``://`` up to the first ``:/?&``."""
    return re.split(r"[:/?&]", url.split("://", 1)[-1], maxsplit=1)[0]


def test_derived_keys_are_the_parsed_host_as_the_docs_list_them(uf: Running) -> None:
    rows = re.findall(r"^ *\| `([^`]+)` \| `([^`]+)` \| `([^`]+)` \|$", differences(), re.M)
    examples = {url: (ours, theirs) for url, ours, theirs in rows}
    assert examples["HTTPS://WWW.Example.com/"] == ("www.example.com", "WWW.Example.com")
    assert examples["http://User@Example.COM:8080/a"] == ("example.com", "User@Example.COM")
    for url, (ours, theirs) in examples.items():
        assert theirs == reference_key(url), url
        uf.put(discovered(url))
        status = uf.stub.GetURLStatus(pb.URLStatusRequest(url=url))
        assert status.known.info.key == ours, url


# -- what DeleteQueue and DeleteCrawl count -----------------------------------------------------


def test_deletes_count_every_url_removed_completed_ones_too(uf: Running) -> None:
    for crawl in ("A", "B"):
        uf.put(discovered("http://a.com/1", crawl=crawl), discovered("http://a.com/2", crawl=crawl),
               known("http://a.com/3", 0, crawl=crawl))  # fmt: skip
    assert count(uf, crawlID="A", key="a.com") == 3
    assert uf.stub.DeleteQueue(pb.QueueWithinCrawlParams(crawlID="A", key="a.com")).value == 3
    assert uf.stub.DeleteCrawl(pb.DeleteCrawlMessage(value="B")).value == 3
    text = differences()
    assert re.search(r"`DeleteQueue`[^.]*`DeleteCrawl`[^.]*completed", text, re.S)
    assert re.search(r"RocksDB[^.]*memory backend[^.]*active", text, re.S)


# -- ListCrawls: the crawls that have a queue ---------------------------------------------------


def test_a_crawl_whose_last_queue_was_deleted_is_not_listed(uf: Running) -> None:
    uf.put(discovered("http://a.com/1", crawl="X"), discovered("http://b.com/1", crawl="X"),
           known("http://c.com/1", 0, crawl="Y"))  # fmt: skip
    delete = uf.stub.DeleteQueue
    assert delete(pb.QueueWithinCrawlParams(crawlID="X", key="a.com")).value == 1
    assert list(uf.stub.ListCrawls(pb.Local()).values) == ["X", "Y"]  # Y: nothing active
    assert delete(pb.QueueWithinCrawlParams(crawlID="X", key="b.com")).value == 1
    assert list(uf.stub.ListCrawls(pb.Local()).values) == ["Y"]
    uf.put(discovered("http://a.com/1", crawl="X"))
    assert list(uf.stub.ListCrawls(pb.Local()).values) == ["X", "Y"]


# -- a blank filter is no filter ----------------------------------------------------------------


def test_a_blank_filter_is_no_filter(uf: Running) -> None:
    uf.put(discovered("http://a.com/1"), discovered("http://a.com/a%20b"))
    for blank in (" ", " \t\n"):
        assert count(uf, filter=blank) == 2
        assert count(uf, filter=blank, ignoreCase=True) == 2
        listed = uf.stub.ListURLs(pb.ListUrlParams(filter=blank))
        assert len(list(listed)) == 2
    assert count(uf, filter="%20") == 1  # a filter that is not blank applies as it is


# -- crawl IDs are kept as given ----------------------------------------------------------------


def test_crawl_ids_with_spaces_are_crawls_of_their_own(uf: Running) -> None:
    url = "http://a.com/1"
    assert uf.put(discovered(url, crawl=" X "), discovered(url, crawl="X", id="2")) == [
        ("2", OK), (url, OK)]  # fmt: skip
    assert list(uf.stub.ListCrawls(pb.Local()).values) == [" X ", "X"]
    assert (uf.stats(crawl=" X ").crawlID, uf.stats(crawl=" X ").size) == (" X ", 1)
    (got,) = uf.get(" X ", max_urls_per_queue=1)
    assert got.crawlID == " X "
    assert uf.stub.DeleteCrawl(pb.DeleteCrawlMessage(value=" X ")).value == 1
    assert list(uf.stub.ListCrawls(pb.Local()).values) == ["X"]
    uf.put(discovered(url, crawl=" \t"))  # a blank ID is DEFAULT, as on the reference
    assert list(uf.stub.ListCrawls(pb.Local()).values) == ["DEFAULT", "X"]


# -- GetURLs hands out at most MAX_GET URLs a call ----------------------------------------------


def test_get_urls_hands_out_at_most_a_documented_number_a_call(uf: Running) -> None:
    n = MAX_GET + 50
    items = [info(f"http://a.com/{i}") for i in range(n)]
    acks = uf.stub.PutDiscovered(batches(*((str(i), items[i : i + 500])
                                           for i in range(0, n, 500))))  # fmt: skip
    assert sum(len(a.statuses) for a in acks) == n
    assert len(uf.get(max_urls_per_queue=0, max_queues=0)) == MAX_GET
    uf.clock.advance(1)  # the queue's delay
    assert len(uf.get(max_urls_per_queue=0, max_queues=0)) == 50
    cap = f"{MAX_GET:,}"
    getting = re.search(r"^- \*\*`GetURLs`\*\*.*?(?=^- |\Z)", section("Semantics, point by point"),
                        re.S | re.M)  # fmt: skip
    assert getting is not None and cap in getting.group(0)
    assert re.search(rf"`GetURLs`[^.]*{cap}", differences(), re.S)


# -- spellings of one URL are one URL -----------------------------------------------------------


def test_spellings_of_one_url_are_one_url(uf: Running) -> None:
    spellings = ["http://a.com/x", "http://A.com/x", "HTTP://a.com/x", "http://a.com/x#frag",
                 "http://a.com:80/x", "http://a.com/./x", "http://a.com/%78",
                 "http://a.com/y/../x", "http://a.com/x?utm_source=z"]  # fmt: skip
    acks = dict(uf.put(*(discovered(url) for url in spellings)))
    assert sorted(acks.values()) == [OK] + [SKIPPED] * 8
    assert count(uf) == 1
    text = differences()
    assert "crawlstore canon" in text and "concepts/seeds.md#the-canonical-form" in text
