"""Two passes over a local site: the second is answered with 304s, except for pages that
changed and for the page whose extraction failed in the first pass."""

from __future__ import annotations

from pathlib import Path

import httpx
from website import links, serve

from crawlstore import Failed, ManualClock, Seed, Store
from crawlstore.integrations.httpx import Outcome, build_request, classify
from crawlstore.revalidate import Revalidate
from crawlstore.revisit import RevisitTags, revisit


class Tag(RevisitTags):
    PAGE = revisit("1h")


def crawl_pass(store: Store, base: str, clock: ManualClock, broken: set[str]) -> None:
    frontier = store.frontier("fifo").revisit(Tag).dedup_with(store.seen()).retry(2)
    revalidate = Revalidate(store.validators())
    with httpx.Client() as client:
        # timeout=0: end the pass once only later revisits remain
        while (seed := frontier.next_seed(timeout=0, sleep=clock.sleep)) is not None:
            response = client.send(build_request(client, seed, revalidate))
            outcome = classify(response)
            if outcome is Outcome.FAILED:
                frontier.report(Failed(seed))
                continue
            path = seed.url[len(base) :]
            if path in broken:  # extraction fails: no validators are kept
                frontier.report(Failed(seed))
                continue
            with store.transaction():
                revalidate.done(frontier, seed, response.status_code, response.headers)
                for link in links(response.text):
                    frontier.push(Seed.get(base + link).with_tag(Tag.PAGE))


def test_second_pass_is_conditional(tmp_path: Path, clock: ManualClock) -> None:
    pages = {"/": ("\n".join(f"link: /p/{i}" for i in range(9)), 1)}
    pages.update({f"/p/{i}": (f"page {i}", 1) for i in range(9)})
    with serve(pages) as site, Store.open(tmp_path / "crawl.lmdb", clock=clock) as store:
        store.frontier("fifo").push(Seed.get(site.base + "/").with_tag(Tag.PAGE))
        crawl_pass(store, site.base, clock, broken={"/p/7"})
        assert site.count(200) == 10 and site.count(304) == 0
        site.change("/p/3")
        site.change("/p/5")
        clock.advance(3600)
        crawl_pass(store, site.base, clock, broken=set())
        # /, and /p/0.. except the two that changed and the one that failed before: 304
        assert site.count(304) == 7
        assert site.hits[("/p/7", 200)] == 2 and site.hits[("/p/3", 200)] == 2
        stats = store.frontier().stats()
        assert stats.unchanged == 7 and stats.failed == 1 and stats.done == 19
        assert len(store.validators()) == 10
