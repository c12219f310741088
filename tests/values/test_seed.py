"""Seed: construction, validation, builders, immutability and records."""

from __future__ import annotations

import enum

import pytest

from crawlstore import Seed
from crawlstore.errors import InvalidSeed


class Page(enum.Enum):
    Listing = "listing-value"


def test_get_and_defaults() -> None:
    s = Seed.get("https://Example.com/a#f")
    assert (s.method, s.url, s.headers, s.body) == ("GET", "https://example.com/a#f", (), b"")
    assert (s.tag, s.priority, s.depth, s.attempt) == (None, 0, 0, 1)
    assert Seed("post", "https://example.com/").method == "POST"


def test_builders_return_new_seeds() -> None:
    s = Seed.get("https://example.com/")
    t = s.with_tag(Page.Listing).with_priority(7).with_depth(2).with_body("é")
    t = t.with_header("Accept", "text/html").with_header("Accept", "*/*")
    assert s == Seed.get("https://example.com/")
    assert t.tag == "Listing"  # enum members are stored by name
    assert (t.priority, t.depth, t.body) == (7, 2, "é".encode())
    assert t.headers == (("Accept", "text/html"), ("Accept", "*/*"))
    assert t.with_tag(None).tag is None and t.with_attempt(3).attempt == 3


def test_immutable() -> None:
    s = Seed.get("https://example.com/")
    with pytest.raises(AttributeError, match="immutable"):
        s.priority = 3  # type: ignore[misc]


def test_equality_and_hash() -> None:
    a = Seed.get("https://example.com/").with_tag("t")
    b = Seed.get("https://example.com/").with_tag("t")
    assert a == b and hash(a) == hash(b) and a != a.with_priority(1)
    assert "priority=1" in repr(a.with_priority(1)) and "tag='t'" in repr(a)


@pytest.mark.parametrize(
    ("make", "names"),
    [
        (lambda: Seed.get("ftp://example.com/"), "ftp://example.com/"),
        (lambda: Seed.get("https://"), "https://"),
        (lambda: Seed.get("example.com/a"), "example.com/a"),
        (lambda: Seed.get(b"https://example.com/"), "bytes"),  # type: ignore[arg-type]
        (lambda: Seed("GE T", "https://example.com/"), "GE T"),
        (lambda: Seed("", "https://example.com/"), "''"),
        (lambda: Seed.get("https://example.com/").with_priority(2**31), "2147483648"),
        (lambda: Seed.get("https://example.com/").with_priority(-(2**31) - 1), "-2147483649"),
        (lambda: Seed.get("https://example.com/").with_priority(True), "True"),  # type: ignore[arg-type]
        (lambda: Seed.get("https://example.com/").with_depth(-1), "-1"),
        (lambda: Seed.get("https://example.com/").with_header("Bad Name", "x"), "Bad Name"),
        (lambda: Seed.get("https://example.com/").with_header("X", "a\r\nb"), "X"),
        (lambda: Seed.get("https://example.com/").with_body(3), "int"),  # type: ignore[arg-type]
        (lambda: Seed.get("https://example.com/").with_tag(""), "''"),
        (lambda: Seed.get("https://example.com/").with_tag(5), "5"),  # type: ignore[arg-type]
        (lambda: Seed.get("https://example.com/").with_attempt(0), "0"),
    ],
)
def test_invalid_input_raises_invalid_seed_naming_the_value(make, names: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidSeed) as info:
        make()
    assert isinstance(info.value, ValueError)
    assert names in str(info.value)


def test_record_round_trip() -> None:
    s = (Seed("POST", "https://example.com/s").with_body(b"\x00x").with_tag("t")
         .with_header("A", "b").with_priority(-3).with_depth(4).with_attempt(2))  # fmt: skip
    assert Seed.from_record(s.to_record()) == s


@pytest.mark.parametrize(
    "record",
    [None, [], ["GET"], ["GET", "https://e.com/", [["A"]], b"", None, 0, 0, 1],
     ["GET", "https://e.com/", [], b"", 5, 0, 0, 1],
     ["GET", "notaurl", [], b"", None, 0, 0, 1]],
)  # fmt: skip
def test_bad_records_raise_invalid_seed(record: object) -> None:
    with pytest.raises(InvalidSeed):
        Seed.from_record(record)
