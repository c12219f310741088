"""Revalidation: conditional headers, recording validators, 304s, and the httpx glue."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers import seed

from crawlstore import Done, InMemFrontier, InMemValidators, ManualClock, Ready, Seed, Store
from crawlstore.integrations.httpx import Outcome, build_request, classify
from crawlstore.revalidate import Revalidate
from crawlstore.validators import Validator

LM = "Mon, 01 Jan 2024 00:00:00 GMT"


def test_validator_from_headers() -> None:
    assert Validator.from_headers({"ETag": '"x"', "Last-Modified": LM}) == Validator('"x"', LM)
    assert Validator.from_headers([("etag", "w")]) == Validator("w", None)
    assert not Validator.from_headers({"Content-Type": "text/html"})
    assert Validator("a", LM).merged(Validator("b")) == Validator("b", LM)


def test_conditional_headers_only_for_get_and_head() -> None:
    validators = InMemValidators()
    r = Revalidate(validators)
    get, post = seed("a"), Seed("POST", "https://example.com/a")
    assert r.headers(get) == {}
    validators.put(get.fingerprint, Validator('"x"', LM))
    validators.put(post.fingerprint, Validator('"y"'))
    assert r.headers(get) == {"If-None-Match": '"x"', "If-Modified-Since": LM}
    head = Seed("HEAD", "https://example.com/a")  # another request: its own validators
    assert r.headers(head) == {}
    validators.put(head.fingerprint, Validator('"h"'))
    assert r.headers(head) == {"If-None-Match": '"h"'}
    assert r.headers(post) == {}
    validators.put(get.fingerprint, Validator(last_modified=LM))
    assert r.headers(get) == {"If-Modified-Since": LM}


def test_recording_rules() -> None:
    validators = InMemValidators()
    r, s = Revalidate(validators), seed("a")
    r.record(s, 200, {"ETag": '"1"'})
    assert validators.get(s.fingerprint) == Validator('"1"')
    r.record(s, 304, {})  # a 304 keeps them
    assert validators.get(s.fingerprint) == Validator('"1"')
    r.record(s, 304, {"Last-Modified": LM})  # ...with any field it updates
    assert validators.get(s.fingerprint) == Validator('"1"', LM)
    r.record(s, 404, {"ETag": '"2"'})  # neither 2xx nor 304: nothing
    assert validators.get(s.fingerprint) == Validator('"1"', LM)
    r.record(s, 200, {})  # a 2xx without validators clears the old ones
    assert validators.get(s.fingerprint) is None
    r.record(Seed("POST", "https://example.com/a"), 200, {"ETag": "p"})
    assert len(validators) == 0
    assert Revalidate.unchanged(304) and not Revalidate.unchanged(200)


def test_done_counts_304s_and_records_in_one_transaction(
    tmp_path: Path, clock: ManualClock
) -> None:
    with Store.open(tmp_path / "s.lmdb", clock=clock, durability="nosync") as store:
        frontier, r = store.frontier(), Revalidate(store.validators())
        frontier.push_many([seed("a"), seed("b")])
        a, b = (p.seed for p in (frontier.pop(), frontier.pop()) if isinstance(p, Ready))
        r.done(frontier, a, 200, {"ETag": '"a"'})
        with pytest.raises(RuntimeError), store.transaction():
            r.done(frontier, b, 200, {"ETag": '"b"'})
            raise RuntimeError("the page's items could not be saved")
        assert store.validators().get(b.fingerprint) is None  # fetched in full next time
        assert frontier.stats().in_flight == 1
        r.done(frontier, b, 304, {})
        assert frontier.stats().unchanged == 1 and frontier.stats().done == 2


def test_in_memory_unchanged_counter() -> None:
    f = InMemFrontier.fifo()
    f.push(seed("a"))
    popped = f.pop()
    assert isinstance(popped, Ready)
    f.report(Done(popped.seed, unchanged=True))
    assert f.stats().unchanged == 1


def test_httpx_request_and_classification() -> None:
    validators = InMemValidators()
    s = seed("a").with_header("Accept", "text/html")
    validators.put(s.fingerprint, Validator('"x"'))
    with httpx.Client() as client:
        request = build_request(client, s, Revalidate(validators))
        assert request.method == "GET" and str(request.url) == "https://example.com/a"
        assert (
            request.headers["If-None-Match"] == '"x"' and request.headers["Accept"] == "text/html"
        )
        post = build_request(client, Seed("POST", "https://example.com/s").with_body(b"q=1"))
        assert post.content == b"q=1" and "If-None-Match" not in post.headers
    done, failed, retry = Outcome.DONE, Outcome.FAILED, Outcome.RETRY
    cases = {200: done, 204: done, 301: failed, 304: Outcome.UNCHANGED, 404: failed, 410: failed,
             429: retry, 503: retry}  # fmt: skip
    for status, outcome in cases.items():
        assert classify(httpx.Response(status)) is outcome, status
