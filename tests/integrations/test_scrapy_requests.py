"""Scrapy requests as seeds straight from their attributes (``RequestSeeds``): the same stored
seed as ``seed_from_dict(request.to_dict(spider=spider))``, and back the same request as
``request_from_dict(seed_to_dict(seed), spider=spider)``."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("scrapy")

from scrapy import FormRequest, Request, Spider
from scrapy.utils.request import request_from_dict

from crawlstore.errors import InvalidSeed
from crawlstore.scrapy.requests import RequestSeeds, seed_from_dict, seed_to_dict
from crawlstore.seed import Seed


class Site(Spider):
    name = "site"

    def parse(self, response: Any) -> Any:
        return None

    def parse_item(self, response: Any) -> Any:
        return None

    def on_error(self, failure: Any) -> Any:
        return None

    also_parse = parse_item  # two names for one method: to_dict names it "also_parse"


SPIDER = Site()

#: URLs, some of which Scrapy and a seed write differently (a default port, IDNA, a space).
URLS = [
    "https://a.example/",
    "http://a.example:80/p?q=1&r=2",
    "https://a.example:443/a%20b/c?x=%7E",
    "https://bücher.example/ä?ö=1",
    "http://b.example/a b#frag",
    "https://c.example:8443/path;params?z",
]
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
TOKEN = st.sampled_from(["Accept", "x-a", "X-A", "Content-Type", "X-Many"])
HEADER_VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=10)
#: A header's value, or its values (a name repeated).
HEADERS = HEADER_VALUE | st.lists(HEADER_VALUE, min_size=1, max_size=3)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False)
    | TEXT | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
COOKIES = st.dictionaries(TEXT, TEXT, max_size=3) | st.lists(
    st.fixed_dictionaries({"name": TEXT, "value": TEXT}, optional={"domain": TEXT}), max_size=2
)
CALLBACKS = st.sampled_from([None, SPIDER.parse, SPIDER.parse_item, SPIDER.also_parse])


@st.composite
def requests(draw: st.DrawFn) -> Request:
    meta = draw(st.dictionaries(TEXT, VALUES, max_size=4))
    if draw(st.booleans()):
        meta["depth"] = draw(st.integers(0, 50))
    return Request(
        draw(st.sampled_from(URLS)),
        method=draw(st.sampled_from(["GET", "POST", "put", "HEAD", "DELETE"])),
        headers=draw(st.dictionaries(TOKEN, HEADERS, max_size=3)),
        body=draw(st.binary(max_size=20) | HEADER_VALUE),  # a str body: in every encoding
        cookies=draw(COOKIES),
        meta=meta,
        encoding=draw(st.sampled_from(["utf-8", "latin-1", "cp1252"])),
        priority=draw(st.integers(-(2**31), 2**31 - 1)),
        dont_filter=draw(st.booleans()),
        callback=draw(CALLBACKS),
        errback=draw(st.sampled_from([None, SPIDER.on_error])),
        flags=draw(st.lists(TEXT, max_size=3)),
        cb_kwargs=draw(st.dictionaries(TEXT, VALUES, max_size=3)),
    )


def stored(seed: Seed) -> tuple[bytes, bytes]:
    """What a store keeps of a seed: its record's bytes and its fingerprint."""
    return msgpack.packb(seed.to_record(), use_bin_type=True), bytes(seed.fingerprint)


def check(seeds: RequestSeeds, request: Request) -> None:
    """The direct conversions give what the dicts give, both ways."""
    original = request.to_dict(spider=SPIDER)
    seed = seeds.seed(request, request.meta)
    assert stored(seed) == stored(seed_from_dict(request.to_dict(spider=SPIDER)))
    back = seeds.request(seed)
    assert type(back) is type(request)
    assert back.to_dict(spider=SPIDER) == original
    assert back.to_dict(spider=SPIDER) == request_from_dict(
        seed_to_dict(seed), spider=SPIDER).to_dict(spider=SPIDER)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(requests())
def test_a_request_s_seed_and_its_request_back_are_those_of_its_dict(request: Request) -> None:
    seeds = RequestSeeds(SPIDER)
    check(seeds, request)  # the spider's methods unknown yet: through to_dict, which names them
    check(seeds, request)  # named before: straight


class Other:
    def parse(self, response: Any) -> Any:
        return None


class Tagged(Request):
    """A subclass: its dict records its ``_class``."""


@pytest.mark.parametrize("request_", [
    FormRequest("https://a.example/f", formdata={"a": "1", "b": "é"}, callback=SPIDER.parse),
    Tagged("https://a.example/t", meta={"k": [1, {"x": b"y"}]}, errback=SPIDER.on_error),
])  # fmt: skip
def test_a_subclass_goes_through_its_dict(request_: Request) -> None:
    seeds = RequestSeeds(SPIDER)
    check(seeds, request_)
    assert "_class" in seeds.seed(request_, request_.meta).meta["scrapy"]


def test_a_callback_the_spider_has_not_is_refused_as_by_to_dict() -> None:
    seeds, other = RequestSeeds(SPIDER), Site()
    for callback in (lambda response: None, Other().parse, print):
        request = Request("https://a.example/", callback=callback)
        with pytest.raises(ValueError):
            request.to_dict(spider=SPIDER)
        with pytest.raises(ValueError):
            seeds.seed(request, {})
    request = Request("https://a.example/", callback=other.parse_item)  # the same function
    check(seeds, request)
    check(seeds, request)


def test_a_callback_gone_from_the_spider_is_refused_as_by_request_from_dict() -> None:
    seeds = RequestSeeds(SPIDER)
    seed = seeds.seed(Request("https://a.example/", callback=SPIDER.parse), {})
    gone = seed.with_meta({"scrapy": {**seed.meta["scrapy"], "callback": "vanished"}})
    with pytest.raises(ValueError, match="vanished"):
        request_from_dict(seed_to_dict(gone), spider=SPIDER)
    with pytest.raises(ValueError, match="vanished"):
        seeds.request(gone)


def test_what_a_seed_cannot_hold_is_named_as_from_the_dict() -> None:
    seeds = RequestSeeds(SPIDER)
    for request in (Request("https://a.example/", meta={"k": (1, 2)}),
                    Request("https://a.example/", cb_kwargs={"k": {3: "x"}}),
                    Request("https://a.example/", flags=[{1, 2}]),  # type: ignore[list-item]
                    Request("ftp://a.example/f")):  # fmt: skip
        with pytest.raises(InvalidSeed) as direct:
            seeds.seed(request, request.meta)
        with pytest.raises(InvalidSeed) as by_dict:
            seed_from_dict(request.to_dict(spider=SPIDER))
        assert str(direct.value) == str(by_dict.value)
