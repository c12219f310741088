"""A generated trap site on 127.0.0.1 next to a normal section: a crawl with avoid_traps()
terminates, crawls every normal page, and no more from each trap than the budgets allow."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx

from crawlstore import Done, InMemFrontier, Seed, Store
from crawlstore.frontier import Frontier
from crawlstore.frontier.traps import TrapPolicy

NORMAL = 40
COLORS = ["red", "green", "blue", "black", "white", "pink", "grey", "brown"]
SIZES = ["xs", "s", "m", "l", "xl", "xxl"]


def links_of(path: str, query: str) -> list[str]:
    """The links of a page of the generated site."""
    parts = [p for p in path.split("/") if p]
    if path == "/":
        return ["/docs/0", "/calendar/2024/01", "/loop/x/", "/search?color=red&size=m",
                "/s/" + session(0) + "/home"]  # fmt: skip
    if parts[0] == "docs":  # the normal section: a chain with cross links, and the traps again
        n = int(parts[1])
        return [f"/docs/{m}" for m in (n + 1, n + 2, n // 2) if m < NORMAL] + ["/"]
    if parts[0] == "calendar":  # an endless calendar: next and previous month
        year, month = int(parts[1]), int(parts[2])
        nxt = (year + month // 12, month % 12 + 1)
        prev = (year - (month == 1), (month - 2) % 12 + 1)
        return [f"/calendar/{y}/{m:02d}" for y, m in (nxt, prev)]
    if parts[0] == "loop":  # repeating segments: every page links one level deeper
        return [path + "x/", path + "y/x/"]
    if parts[0] == "search":  # faceted search: every page links every combination
        q = parse_qs(query)
        page = int(q.get("page", ["1"])[0])
        facets = [f"/search?color={c}&size={s}" for c in COLORS for s in SIZES]
        return [*facets, f"/search?color={q['color'][0]}&size={q['size'][0]}&page={page + 1}"]
    if parts[0] == "s":  # a session id in the path, new on every link
        n = int(parts[2]) if parts[2].isdigit() else 0
        return [f"/s/{session(n + 1)}/{n + 1}", f"/s/{session(n + 2)}/{n + 1}"]
    return []


def session(n: int) -> str:
    return hashlib.md5(str(n).encode()).hexdigest()[:20]


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        body = "\n".join(links_of(url.path, url.query)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def trap_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


POLICY = TrapPolicy(max_urls=60, max_fanout=50, max_random_urls=6, max_path_depth=12,
                    max_repetitions=3)  # fmt: skip
LIMIT = 2000  # a crawl that has not ended after this many fetches is caught in a trap


def crawl(frontier: Frontier, base: str) -> list[str]:
    frontier.push(Seed.get(base + "/"))
    fetched: list[str] = []
    with httpx.Client() as client:
        while len(fetched) < LIMIT and (seed := frontier.next_seed(timeout=5)) is not None:
            response = client.get(seed.url)
            fetched.append(seed.url[len(base) :])
            with frontier.transaction():
                frontier.report(Done(seed))
                frontier.push_many(
                    Seed.get(base + link).with_depth(seed.depth + 1)
                    for link in response.text.splitlines()
                )
    return fetched


def check(fetched: list[str]) -> None:
    assert len(fetched) < LIMIT, "the crawl did not terminate"
    assert {f"/docs/{n}" for n in range(NORMAL)} <= set(fetched)  # every normal page
    by_trap = {name: [f for f in fetched if f.startswith(f"/{name}")]
               for name in ("calendar", "loop", "search", "s/")}  # fmt: skip
    assert 0 < len(by_trap["calendar"]) <= 60  # max_urls
    assert 0 < len(by_trap["loop"]) <= 4  # /loop/x/x/x/x repeats x more than 3 times
    assert 0 < len(by_trap["search"]) <= 50  # max_fanout of the search directory
    assert 0 < len(by_trap["s/"]) <= 6  # max_random_urls: session ids
    assert len(fetched) <= 1 + NORMAL + 60 + 4 + 50 + 6


def test_a_crawl_of_a_trap_site_terminates_in_memory() -> None:
    with trap_site() as base:
        fetched = crawl(InMemFrontier.fifo().dedup().avoid_traps_with(POLICY), base)
    check(fetched)


def test_a_crawl_of_a_trap_site_terminates_on_the_store(tmp_path: Path) -> None:
    with trap_site() as base, Store.open(tmp_path / "t.lmdb", durability="nosync") as store:
        frontier = store.frontier("fifo").dedup_with(store.seen()).avoid_traps_with(POLICY)
        fetched = crawl(frontier, base)
        check(fetched)
        blocked = {b.prefix[len(base) :] for b in frontier.blocked()}
        assert blocked == {"/calendar/", "/loop/", "/search/", "/s/"}
