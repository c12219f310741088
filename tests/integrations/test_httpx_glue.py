"""The httpx glue on what real sites send: redirects, Retry-After, 5xx, hostile validators."""

from __future__ import annotations

import logging
from email.utils import formatdate
from pathlib import Path

import httpx
import pytest
from helpers import MakeFrontier, pop_seeds

from crawlstore import InMemValidators, ManualClock, Ready, Seed, Store, Validator, Wait
from crawlstore.errors import InvalidValidator
from crawlstore.integrations.httpx import (
    MAX_RETRY_AFTER,
    Outcome,
    build_request,
    classify,
    redirect_target,
    report_response,
    retry_at,
)
from crawlstore.revalidate import Revalidate


def answer(status: int, url: str = "https://e.com/a", method: str = "GET",
           **headers: str) -> httpx.Response:  # fmt: skip
    return httpx.Response(status, headers=headers, request=httpx.Request(method, url))


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(200, Outcome.DONE), (204, Outcome.DONE), (304, Outcome.UNCHANGED), (404, Outcome.FAILED),
     (408, Outcome.RETRY), (425, Outcome.RETRY), (429, Outcome.RETRY), (500, Outcome.RETRY),
     (501, Outcome.FAILED), (502, Outcome.RETRY), (503, Outcome.RETRY), (504, Outcome.RETRY),
     (505, Outcome.FAILED), (506, Outcome.FAILED), (507, Outcome.RETRY), (508, Outcome.FAILED),
     (509, Outcome.RETRY), (510, Outcome.FAILED), (511, Outcome.RETRY), (520, Outcome.RETRY),
     (530, Outcome.RETRY), (599, Outcome.RETRY), (300, Outcome.DONE)],
)  # fmt: skip
def test_classify(status: int, outcome: Outcome) -> None:
    assert classify(answer(status)) is outcome


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_need_a_location(status: int) -> None:
    assert classify(answer(status, location="/b")) is Outcome.REDIRECT
    assert classify(answer(status)) is Outcome.FAILED


def test_redirect_targets() -> None:
    post = Seed("POST", "https://e.com/a").with_body(b"q=1").with_header("Authorization", "x")
    post = post.with_tag("t").with_priority(3).with_depth(2)
    moved = redirect_target(post, answer(301, method="POST", location="/b?x=1"))
    assert moved is not None and (moved.method, moved.url, moved.body) == (
        "GET",
        "https://e.com/b?x=1",
        b"",
    )
    assert (moved.tag, moved.priority, moved.depth) == ("t", 3, 2)
    kept = redirect_target(post, answer(307, method="POST", location="b"))
    assert kept is not None and (kept.method, kept.url, kept.body) == (
        "POST",
        "https://e.com/b",
        b"q=1",
    )
    assert ("Authorization", "x") in kept.headers
    away = redirect_target(post, answer(308, method="POST", location="https://other.org/"))
    assert away is not None and away.method == "POST" and not away.headers  # no credentials
    see_other = redirect_target(Seed.get("https://e.com/a"), answer(303, location="//e.com/c"))
    assert see_other is not None and see_other.url == "https://e.com/c"
    assert redirect_target(post, answer(302, location="mailto:a@b.c")) is None
    assert redirect_target(post, answer(200, location="/b")) is None


def test_a_redirect_pushes_its_target_through_the_facades(make_frontier: MakeFrontier) -> None:
    f = make_frontier().dedup().allow_hosts(["e.com"]).max_depth(1)
    f.push(Seed.get("https://e.com/a").with_depth(1))
    seed = pop_seeds(f, 1)[0]
    assert report_response(f, seed, answer(301, location="/b")) is Outcome.REDIRECT
    (target,) = pop_seeds(f, 5)
    assert target.url == "https://e.com/b" and target.depth == 1  # a redirect is no link hop
    assert report_response(f, target, answer(302, location="https://out.org/")) is Outcome.REDIRECT
    stats = f.stats()  # the target on another host was refused by the scope
    assert stats.done == 2 and stats.refused == {"out_of_scope": 1} and len(f) == 0
    f.push(Seed.get("https://e.com/c").with_depth(1))
    looping = pop_seeds(f, 1)[0]
    report_response(f, looping, answer(301, location="/a"))  # back to a page already seen
    assert f.stats().refused["duplicate"] == 1 and len(f) == 0  # dedup ends the loop


def test_a_redirect_without_a_usable_location_fails(make_frontier: MakeFrontier) -> None:
    f = make_frontier()
    f.push_many([Seed.get("https://e.com/a"), Seed.get("https://e.com/b")])
    first, second = pop_seeds(f, 2)
    assert report_response(f, first, answer(302)) is Outcome.FAILED
    assert report_response(f, second, answer(302, location="javascript:x()")) is Outcome.FAILED
    assert f.stats().failed == 2 and len(f) == 0


def test_retry_after_in_seconds_and_dates(clock: ManualClock) -> None:
    now = clock()
    assert retry_at(answer(503, **{"retry-after": "120"}), now) == now + 120
    date = formatdate(now + 300, usegmt=True)
    assert retry_at(answer(429, **{"retry-after": date}), now) == pytest.approx(now + 300)
    assert retry_at(answer(429, **{"retry-after": formatdate(now - 50, usegmt=True)}), now) == now
    assert retry_at(answer(429, **{"retry-after": "99999999"}), now) == now + MAX_RETRY_AFTER
    for bad in ("soon", "-5", "1.5", "Mon, 32 Foo 2020 99:00:00"):
        assert retry_at(answer(429, **{"retry-after": bad}), now) is None
    assert retry_at(answer(429), now) is None
    superscript = httpx.Response(429, headers=[(b"retry-after", b"\xb2")],  # "²" to str.isdigit
                                 request=httpx.Request("GET", "https://e.com/"))  # fmt: skip
    assert retry_at(superscript, now) is None


def test_a_429_with_retry_after_pauses_only_its_host(tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s.lmdb", clock=clock, durability="nosync") as store:
        f = store.frontier("fifo", queues="host").retry(3)
        f.push_many(Seed.get(u) for u in
                    ["https://slow.com/1", "https://slow.com/2", "https://fast.com/1"])  # fmt: skip
        first = pop_seeds(f, 1)[0]
        assert first.url == "https://slow.com/1"
        outcome = report_response(f, first, answer(429, url=first.url, **{"retry-after": "60"}))
        assert outcome is Outcome.RETRY
        popped = f.pop()
        assert isinstance(popped, Ready) and popped.seed.url == "https://fast.com/1"
        wait = f.pop()
        assert isinstance(wait, Wait) and wait.until == pytest.approx(clock() + 60)
        clock.advance(60)
        got = {s.url for s in pop_seeds(f, 5)}
        assert got == {"https://slow.com/1"}  # one a host: the retry comes first, then /2
        assert store.frontier().queue("slow.com").blocked_until == pytest.approx(clock())


def test_with_one_queue_only_the_seed_waits(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().retry(3)
    f.push_many([Seed.get("https://slow.com/1"), Seed.get("https://slow.com/2")])
    first = pop_seeds(f, 1)[0]
    report_response(f, first, answer(503, url=first.url, **{"retry-after": "30"}))
    assert pop_seeds(f, 5)[0].url == "https://slow.com/2"  # the crawl goes on
    assert f.snapshot().scheduled[0][0] == pytest.approx(clock() + 30)


HOSTILE = {
    "crlf": {"etag": '"a"\r\nX-Evil: 1', "last-modified": "Mon, 01 Jan 2024 00:00:00 GMT"},
    "huge": {"etag": '"' + "x" * 2**20 + '"'},
    "no date": {"etag": '"ok"', "last-modified": "yesterday\n"},
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_validators_are_dropped_and_the_page_is_done(
    make_frontier: MakeFrontier, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    f = make_frontier()
    revalidate = Revalidate(InMemValidators())
    f.push_many([Seed.get("https://e.com/1"), Seed.get("https://e.com/2")])
    caplog.set_level(logging.WARNING, "crawlstore.revalidate")
    for seed in pop_seeds(f, 2):
        response = httpx.Response(200, request=httpx.Request("GET", seed.url))
        response.headers.update(HOSTILE[kind])  # headers a server sent, unchecked
        assert report_response(f, seed, response, revalidate=revalidate) is Outcome.DONE
    assert f.stats().done == 2 and revalidate.dropped == 2
    assert len([r for r in caplog.records if "e.com" in r.getMessage()]) == 1  # once a host
    with httpx.Client() as client:
        for n in (1, 2):  # the next requests carry nothing that breaks them
            seed = Seed.get(f"https://e.com/{n}")
            request = build_request(client, seed, revalidate)
            assert all(len(v) < 600 and "\n" not in v for v in request.headers.values())
    stored = revalidate.validators.get(Seed.get("https://e.com/1").fingerprint)
    assert stored in (
        None,
        Validator(etag='"ok"'),
        Validator(last_modified="Mon, 01 Jan 2024 00:00:00 GMT"),
    )


def test_validators_that_cannot_be_sent_are_refused(tmp_path: Path) -> None:
    for bad in ({"etag": "a\rb"}, {"etag": "x" * 513}, {"last_modified": "not a date"},
                {"etag": "caf\u00e9\u4e16"}):  # fmt: skip
        with pytest.raises(InvalidValidator):
            Validator(**bad)
    Validator(etag='W/"caf\u00e9"', last_modified="Sun, 06 Nov 1994 08:49:37 GMT")
    from crawlstore.storages._lmdb.codec import pack

    with Store.open(tmp_path / "s.lmdb") as store:  # a file from before these checks
        v = store.validators()
        fp = Seed.get("https://e.com/").fingerprint
        v.put(fp, Validator(etag='"x"'))
        storage = store._storage
        prefix = storage.view(lambda: storage.crawl_key("default"))
        storage.engine.run(lambda ctx: ctx.txn.put(prefix + fp, pack(["a\r\nb", None, 0.0]),
                                                   db=ctx.dbs["validators"]))  # fmt: skip
        assert v.get(fp) is None
