"""Crawl a local site twice with asyncio + httpx: the second pass is answered with 304s.

    python examples/recrawl_httpx.py

A small server on 127.0.0.1 serves pages with ETag and Last-Modified; between the passes two
pages change. Pages are tagged with an hourly revisit interval, so the store schedules the
second pass by itself; ``Revalidate`` makes its requests conditional. The store runs on a
``ManualClock`` moved an hour on between the passes, where a real crawl would wait an hour.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from crawlstore import Failed, ManualClock, Retry, Seed, Store
from crawlstore.integrations.httpx import Outcome, build_request, classify
from crawlstore.revalidate import Revalidate
from crawlstore.revisit import RevisitTags, revisit

PAGES = 20
versions = dict.fromkeys(range(PAGES), 1)


class Tag(RevisitTags):
    PAGE = revisit("1h")


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        n = int(self.path.strip("/") or 0)
        etag = f'"{n}-{versions[n]}"'
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        body = " ".join(f"/{(n * 3 + k) % PAGES}" for k in (1, 2)).encode()
        self.send_response(200)
        self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def crawl(store: Store, base: str, limit: int | None = None) -> tuple[int, int]:
    """One pass: fetch what is due (at most ``limit`` pages); returns (fetched, unchanged).
    A revisiting crawl never runs out of work: the pass ends when nothing is due now."""
    frontier = store.frontier("fifo").revisit(Tag).dedup_with(store.seen()).retry(2)
    revalidate = Revalidate(store.validators())
    fetched = unchanged = 0
    async with httpx.AsyncClient() as client:
        while fetched != limit and (seed := await frontier.anext_seed(timeout=0)) is not None:
            response = await client.send(build_request(client, seed, revalidate))
            fetched += 1
            outcome = classify(response)
            if outcome is Outcome.RETRY:
                frontier.report(Retry(seed))
            elif outcome is Outcome.FAILED:
                frontier.report(Failed(seed))
            else:
                unchanged += outcome is Outcome.UNCHANGED
                with store.transaction():  # the report, its validators and the links: one commit
                    revalidate.done(frontier, seed, response.status_code, response.headers)
                    for path in response.text.split():
                        frontier.push(Seed.get(base + path).with_tag(Tag.PAGE))
    return fetched, unchanged


async def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    clock = ManualClock(time.time())  # the store's time, moved on by hand below
    with (
        tempfile.TemporaryDirectory() as tmp,
        Store.open(Path(tmp) / "crawl.lmdb", clock=clock) as store,
    ):
        store.frontier("fifo").push(Seed.get(base + "/").with_tag(Tag.PAGE))
        first, _ = await crawl(store, base)
        print(f"pass 1: fetched {first} pages")
        versions[3] += 1
        versions[7] += 1  # two pages change between the passes
        clock.advance(3600)  # an hour later (a real crawl waits it out): every page is due
        fetched, unchanged = await crawl(store, base, limit=first)
        print(f"pass 2: fetched {fetched} pages, {unchanged} unchanged (304), "
              f"{fetched - unchanged} changed")  # fmt: skip
        print(f"store: {store.frontier().stats().unchanged} unchanged in all")
    server.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
