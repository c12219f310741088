"""Canonical URLs and fingerprints: the golden table, pinned vectors and properties."""

from __future__ import annotations

import random

import can_ada
import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlstore import FINGERPRINT_VERSION, Fingerprint, Seed, canonicalize, fingerprint
from crawlstore.errors import InvalidSeed
from crawlstore.frontier.policy import key_function
from crawlstore.url import TRACKING_PARAMS, tracking

#: Hypothesis bounds each example by 200 ms of wall clock, which a busy machine misses.
UNTIMED = settings(deadline=None)

GOLDEN = [
    # scheme, host, ports
    ("HTTPS://Example.com:443/a?b=2&a=1&utm_source=x", "https://example.com/a?a=1&b=2"),
    ("https://Example.com:443/a?b=2&utm_source=mail&a=1", "https://example.com/a?a=1&b=2"),
    ("http://x.com:80/", "http://x.com/"),
    ("http://X.COM", "http://x.com/"),
    ("https://example.com:443", "https://example.com/"),
    ("https://example.com:8443/", "https://example.com:8443/"),
    ("http://example.com:443/", "http://example.com:443/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("https://user:pass@Example.com/", "https://user:pass@example.com/"),
    # IDN
    ("https://münchen.de/", "https://xn--mnchen-3ya.de/"),
    ("https://BÜCHER.example/x", "https://xn--bcher-kva.example/x"),
    ("https://xn--mnchen-3ya.de/", "https://xn--mnchen-3ya.de/"),
    # IP addresses
    ("http://[2001:DB8:0:0:0:0:0:1]:80/", "http://[2001:db8::1]/"),
    ("http://[::FFFF:127.0.0.1]/", "http://[::ffff:7f00:1]/"),
    ("http://0x7f.1/", "http://127.0.0.1/"),
    ("http://127.000.000.001/", "http://127.0.0.1/"),
    # fragments
    ("https://example.com/a#frag", "https://example.com/a"),
    ("https://example.com/#", "https://example.com/"),
    ("https://example.com/?x=1#a?b=2", "https://example.com/?x=1"),
    # paths and dot segments
    ("https://example.com/a/./b/../c", "https://example.com/a/c"),
    ("https://example.com/a/b/../../..", "https://example.com/"),
    ("http://example.com/a/%2e%2e/b", "http://example.com/b"),
    ("https://example.com/a/", "https://example.com/a/"),
    ("https://example.com/a", "https://example.com/a"),
    ("https://example.com/A/B", "https://example.com/A/B"),
    ("https://example.com/path;params?x=1", "https://example.com/path;params?x=1"),
    # percent escapes
    ("https://example.com/%7e%41%2d%2e%5f", "https://example.com/~A-._"),
    ("https://example.com/%2f%3a%c3%a9", "https://example.com/%2F%3A%C3%A9"),
    ("https://example.com/a%2Fb", "https://example.com/a%2Fb"),
    ("https://example.com/café", "https://example.com/caf%C3%A9"),
    ("https://example.com/a b", "https://example.com/a%20b"),
    # empty queries and tracking parameters
    ("https://example.com/?", "https://example.com/"),
    ("https://example.com/?&", "https://example.com/"),
    ("https://example.com/?utm_source=x", "https://example.com/"),
    (
        "https://example.com/?fbclid=1&GCLID=2&UTM_Medium=x&_ga=3&_gl=4&ref_src=5&mc_cid=6&yclid=7",
        "https://example.com/",
    ),
    ("https://example.com/?utm=1", "https://example.com/?utm=1"),
    # sorting, repeated keys, blank values
    ("https://example.com/?b=2&a=2&a=1", "https://example.com/?a=1&a=2&b=2"),
    ("https://example.com/?a=1&a=1", "https://example.com/?a=1&a=1"),
    ("https://example.com/?B=1&a=1", "https://example.com/?B=1&a=1"),
    ("https://example.com/?a-b=1&a=2", "https://example.com/?a=2&a-b=1"),
    ("https://example.com/?a=&b", "https://example.com/?a=&b="),
    # + and %20, escapes in the query
    ("https://example.com/?q=a+b", "https://example.com/?q=a+b"),
    ("https://example.com/?q=a%20b", "https://example.com/?q=a+b"),
    ("https://example.com/?q=%7e&r=~", "https://example.com/?q=~&r=~"),
    ("https://example.com/?q=%2f&r=/", "https://example.com/?q=%2F&r=%2F"),
    ("https://example.com/?k=café", "https://example.com/?k=caf%C3%A9"),
    ("https://example.com/?z=%ff", "https://example.com/?z=%FF"),
]


@pytest.mark.parametrize(("url", "expected"), GOLDEN)
def test_golden_canonical_form(url: str, expected: str) -> None:
    assert canonicalize(url) == expected


def test_golden_table_is_large_enough() -> None:
    assert len(GOLDEN) >= 40


@pytest.mark.parametrize(
    "url",
    ["foo", "/relative", "http://", "http://[::1", "http://exa mple.com/", "mailto:x@y.com",
     "ftp://example.com/", "file:///etc/passwd", "javascript:alert(1)", "", "data:,x"],
)  # fmt: skip
def test_unparseable_or_non_http_urls_raise(url: str) -> None:
    with pytest.raises(InvalidSeed, match="URL"):
        canonicalize(url)


def test_fingerprint_of_the_documented_pair_is_equal() -> None:
    a = fingerprint("GET", "HTTPS://Example.com:443/a?b=2&a=1&utm_source=x")
    b = fingerprint("GET", "https://example.com/a?a=1&b=2")
    assert a == b
    assert Seed.get("HTTPS://Example.com:443/a?b=2&a=1&utm_source=x").fingerprint == b


# Pinned: a change here changes every stored fingerprint and must bump FINGERPRINT_VERSION.
GOLDEN_FINGERPRINTS = [
    (("GET", "https://example.com/"), "8c6ba1a2d7d845658241b1562f44fa85"),
    (("GET", "https://example.com/a?a=1&b=2"), "10fd9d875d48c5d6363808c67174dbd8"),
    (("HEAD", "https://example.com/"), "5108570387dae08b16d0deac5bc25182"),
    (("POST", "https://example.com/search", '{"q": "lamp"}'), "97d62886731cb8657dcbb2b38cc8eaf0"),
    (("POST", "https://example.com/search", b"\x00\xff"), "b7451e36500cb7d16e1a6a3f4f4be528"),
    (("GET", "https://xn--mnchen-3ya.de/"), "3b6f5deaa3a80aaa2f584030a9330c1f"),
    # version 2: an "=" in a value stays literal whatever else the query escapes
    (("GET", "https://example.com/?a=b=c&d=%41"), "5e801bc24490198a4c36d5ccb759f025"),
]


@pytest.mark.parametrize(("args", "hex_digest"), GOLDEN_FINGERPRINTS)
def test_fingerprint_golden_vectors(args: tuple[str, ...], hex_digest: str) -> None:
    assert FINGERPRINT_VERSION == 2
    assert fingerprint(*args).hex() == hex_digest  # type: ignore[arg-type]


def test_fingerprint_byte_layout_is_method_nul_url_nul_body() -> None:
    data = b"POST\x00https://example.com/search\x00" + b'{"q": "lamp"}'
    expected = mmh3.mmh3_x64_128_digest(data)
    assert fingerprint("post", "https://example.com/search", '{"q": "lamp"}') == expected


def test_fingerprint_parts_are_separated() -> None:
    assert fingerprint("GET", "https://a.com/", b"x") != fingerprint("GET", "https://a.com/x")
    assert fingerprint("GET", "https://a.com/") != fingerprint("HEAD", "https://a.com/")
    assert fingerprint("POST", "https://a.com/", b"1") != fingerprint("POST", "https://a.com/")


def test_fingerprint_value() -> None:
    fp = fingerprint("GET", "https://example.com/")
    assert isinstance(fp, bytes) and len(fp) == 16
    assert repr(fp) == "Fingerprint('8c6ba1a2d7d845658241b1562f44fa85')"
    assert str(fp) == "8c6ba1a2d7d845658241b1562f44fa85"
    assert Fingerprint.from_hex(str(fp)) == fp
    with pytest.raises(ValueError, match="16 bytes"):
        Fingerprint(b"short")


def test_seed_fingerprint_ignores_tag_priority_depth_headers() -> None:
    base = Seed.get("https://example.com/a")
    other = base.with_tag("x").with_priority(9).with_depth(3).with_header("Accept", "a/b")
    assert other.fingerprint == base.fingerprint
    assert base.with_body("x").fingerprint != base.fingerprint


def test_tracking_parameters_are_configurable() -> None:
    assert tracking.names >= TRACKING_PARAMS
    url = "https://example.com/?sid=1&fbclid=2&a=1"
    try:
        tracking.add("SID")
        assert canonicalize(url) == "https://example.com/?a=1"
        tracking.remove("fbclid")
        assert canonicalize(url) == "https://example.com/?a=1&fbclid=2"
        assert "Sid" in tracking and "utm_anything" in tracking and "a" not in tracking
    finally:
        tracking.reset()
    assert canonicalize(url) == "https://example.com/?a=1&sid=1"


# -- properties ---------------------------------------------------------------------------------

# No raw spaces: WHATWG strips them at the ends of a URL string, which is not what these test.
_segment = st.text(alphabet="abcXYZ019-._~%/éü+=&?", max_size=8)
_key = st.sampled_from(["a", "b", "B", "q", "utm_source", "fbclid", "k%20", "x+y", "é"])
_value = st.text(alphabet="ab1%+é/~=", max_size=5)
_host = st.sampled_from(["example.com", "EXAMPLE.com", "münchen.de", "127.0.0.1", "[::1]", "a.b.c"])


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080"]))
    path = "/".join(draw(st.lists(_segment, max_size=4)))
    pairs = draw(st.lists(st.tuples(_key, _value), max_size=5))
    query = "&".join(f"{k}={v}" for k, v in pairs)
    frag = draw(st.sampled_from(["", "#", "#frag"]))
    return f"{scheme}://{draw(_host)}{port}/{path}" + (f"?{query}" if query else "") + frag


@UNTIMED
@given(urls(), st.sampled_from(["", "u@", "u:p@", "a%40b:c@"]))
def test_the_host_queue_key_is_the_parsed_host(url: str, userinfo: str) -> None:
    """The "host" queue mode reads the host off the canonical URL without parsing it again:
    the same as the parser's host (with a port that is not the default), userinfo or not."""
    scheme, rest = url.split("://", 1)
    seed = Seed.get(f"{scheme}://{userinfo}{rest}")
    assert key_function("host")(seed) == can_ada.parse(seed.url).host


@UNTIMED
@given(urls())
def test_canonicalisation_is_idempotent(url: str) -> None:
    once = canonicalize(url)
    assert canonicalize(once) == once


@UNTIMED
@given(urls(), st.sampled_from(["", "#x", "#a/b?c"]))
def test_fingerprint_ignores_the_fragment(url: str, frag: str) -> None:
    base = url.split("#", 1)[0]
    assert fingerprint("GET", base + frag) == fingerprint("GET", url)


@UNTIMED
@given(st.lists(st.tuples(_key, _value), min_size=1, max_size=6), st.randoms())
def test_fingerprint_ignores_query_order_and_tracking(
    pairs: list[tuple[str, str]], rnd: random.Random
) -> None:
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    extra = [("utm_medium", "x"), ("GCLID", "y")]
    a = "https://example.com/p?" + "&".join(f"{k}={v}" for k, v in pairs)
    b = "https://example.com/p?" + "&".join(f"{k}={v}" for k, v in shuffled + extra)
    assert fingerprint("GET", a) == fingerprint("GET", b)


@UNTIMED
@given(st.text(alphabet="ab+-._~=&AZ09%", max_size=24), st.booleans())
def test_the_fast_query_paths_agree_with_the_general_one(query: str, tracked: bool) -> None:
    """The shortcuts for plain and ``+``-bearing queries give what form-decoding, dropping
    tracking keys, sorting and form-encoding give."""
    from crawlstore import url as u

    if tracked:
        query = "utm_x=1&" + query
    pairs = []
    for part in query.split("&"):
        if part:
            key, _, value = part.partition("=")
            raw_key = u._form_decode(key)
            if not u._is_tracking(raw_key.decode("utf-8", "replace"), u.tracking.names):
                pairs.append((raw_key, u._form_decode(value)))
    pairs.sort()
    general = "&".join(u._form_encode(k) + "=" + u._form_encode_value(v) for k, v in pairs)
    if "+" in query and "%" not in query:  # the path this test guards; the plain one is older
        assert u._canonical_query(query) == ("?" + general if general else "")


_plain_key = st.text(alphabet="abAZ09-._~é", min_size=1, max_size=4)
_plain_value = st.text(alphabet="abAZ09-._~=é ", max_size=5)


def _spell(text: str, draw: st.DrawFn) -> str:
    """``text`` (a key or value) as a query may write it: each character as itself or as
    its escape, a space as ``+`` or ``%20``."""
    out = []
    for ch in text:
        escape = "".join(f"%{b:02X}" if draw(st.booleans()) else f"%{b:02x}"
                         for b in ch.encode())  # fmt: skip
        out.append(draw(st.sampled_from(["+", escape] if ch == " " else [ch, escape])))
    return "".join(out)


@given(st.lists(st.tuples(_plain_key, _plain_value), min_size=1, max_size=4), st.data())
def test_every_spelling_of_a_query_has_one_canonical_form(
    pairs: list[tuple[str, str]], data: st.DataObject
) -> None:
    """A query written plainly (``=`` inside a value as itself) and the same query with any of
    its characters escaped: one canonical form, one fingerprint, whichever path each takes."""
    from crawlstore import url as u

    plain = "&".join(f"{k}={v.replace(' ', '+')}" for k, v in pairs)
    spelt = "&".join(f"{_spell(k, data.draw)}={_spell(v, data.draw)}" for k, v in pairs)
    a, b = (
        f"http://h.test/p?{plain}",
        f"http://h.test/p?{spelt}" + data.draw(st.sampled_from(["", "#f"])),
    )
    assert canonicalize(a) == canonicalize(b)
    assert u.get_fingerprint(a)[1] == u.get_fingerprint(b)[1] == fingerprint("GET", a)
    assert canonicalize(canonicalize(b)) == canonicalize(b)


def test_an_equals_sign_in_a_value_stays_literal_on_every_path() -> None:
    from crawlstore import url as u

    spellings = ["http://h/?a=b=c&d=A", "http://h/?a=b=c&d=%41", "http://h/?a=b%3Dc&d=A",
                 "http://h/?d=A&a=b=c#x"]  # fmt: skip
    assert {canonicalize(s) for s in spellings} == {"http://h/?a=b=c&d=A"}
    assert len({u.get_fingerprint(s)[1] for s in spellings}) == 1
    assert canonicalize("http://h/?k%3Dx=1") == "http://h/?k%3Dx=1"  # in a key: escaped


_userinfo = st.sampled_from(["", "u@", "u:p@", ":p@", "U%41:p@"])


@UNTIMED
@given(urls(), _userinfo)
def test_seed_get_reads_the_canonical_form_off_href_as_the_general_path_builds_it(
    url: str, userinfo: str
) -> None:
    """``Seed.get`` takes the canonical form from ``href`` when it can: the same form, and the
    same fingerprint, as building it part by part."""
    from crawlstore import Seed
    from crawlstore import url as u

    url = url.replace("://", "://" + userinfo, 1)
    try:
        parsed = u.parse_http_url(url)
    except InvalidSeed:
        with pytest.raises(InvalidSeed):
            Seed.get(url)
        return
    href, fp = u.get_fingerprint(url)
    assert href == parsed.href
    assert fp == u.fingerprint_canonical("GET", u.canonical_of(parsed), b"")
    assert Seed.get(url) == Seed("GET", url)


# -- explain: which rule changed which part --------------------------------------------------


def _check_steps(url: str) -> list[str]:
    """Every step of ``explain(url)`` is real: it changes its part, and only that part, of
    the URL before it; applied in turn, they end at the canonical form. Its rules."""
    from crawlstore.url import _split, explain

    explained = explain(url)
    assert explained.canonical == canonicalize(url)
    current = url
    for step in explained.steps:
        assert step.before != step.after, step
        if step.part == "url":  # the parser read a form it alone reads: one step
            assert (step.before, step.after) == (current, step.url)
        else:
            before, after = _split(current, False), _split(step.url, False)
            assert before is not None and after is not None, (current, step)
            assert before[step.part] == step.before, (current, step)
            assert after == {**before, step.part: step.after}, (current, step)
        current = step.url
    assert current == explained.canonical
    assert explain(explained.canonical).steps == ()  # a canonical URL: nothing to explain
    return [step.rule for step in explained.steps]


@pytest.mark.parametrize(("url", "expected"), GOLDEN)
def test_explain_steps_reproduce_the_canonical_form(url: str, expected: str) -> None:
    rules = _check_steps(url)
    assert bool(rules) == (url != expected)


def test_explain_names_the_rules() -> None:
    rules = _check_steps("HTTPS://Example.COM:443/a/./b/../c/%7e?utm_source=x&b=2&a=1#top")
    assert rules == [
        "scheme lower-cased",
        "host lower-cased",
        "default port removed",
        "dot segments resolved",
        "percent-encoding normalised (escapes upper-cased, unreserved ones decoded)",
        "tracking parameter utm_source removed",
        "query parameters sorted",
        "fragment dropped",
    ]
    assert _check_steps("https://münchen.de") == ["host IDNA (punycode)", "empty path made /"]
    assert _check_steps(" https://example.com\\a\tb ")[0].startswith("parsed by the URL standard")
    with pytest.raises(InvalidSeed):
        _check_steps("ftp://example.com/")


_SCHEMES = st.sampled_from(["http", "https", "HTTP", "Https"])
_HOSTS = st.sampled_from(["example.com", "Example.COM", "münchen.de", "127.000.0.1",
                          "[2001:DB8::1]", "a.b.example", "xn--mnchen-3ya.de"])  # fmt: skip
_PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":0443", ":"])
_SEGMENTS = st.lists(st.sampled_from(["a", "B", ".", "..", "%2e", "%7e", "%2f", "c d", "é", ""]),
                     max_size=5)  # fmt: skip
_PARAMS = st.lists(st.sampled_from(["a=1", "b=2", "a=0", "utm_source=x", "GCLID=3", "", "k",
                                    "q=a+b", "q=a%20b", "z=%ff", "é=1", "x=%7E"]),
                   max_size=5)  # fmt: skip


@UNTIMED
@given(_SCHEMES, st.sampled_from(["", "user@", "user:pw@"]), _HOSTS, _PORTS, _SEGMENTS,
       st.none() | _PARAMS, st.none() | st.sampled_from(["", "top", "a?b"]))  # fmt: skip
def test_explain_holds_for_generated_urls(
    scheme: str,
    userinfo: str,
    host: str,
    port: str,
    segments: list[str],
    params: list[str] | None,
    fragment: str | None,
) -> None:
    url = f"{scheme}://{userinfo}{host}{port}" + "".join("/" + s for s in segments)
    if params is not None:
        url += "?" + "&".join(params)
    if fragment is not None:
        url += "#" + fragment
    try:
        canonicalize(url)
    except InvalidSeed:
        return
    _check_steps(url)
