"""``python -m crawlstore.demo``: crawl a generated in-memory site through the frontier.

The site has duplicate links (fragments, tracking parameters, reordered queries), off-site
links, PDFs, pages too deep, flaky pages that answer 503 once, and a rate-limited section that
answers 429 once: every facade has something to do. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass

from . import Backoff, Done, InMemFrontier, RetryPolicy, Seed
from .frontier import Retry

SITE = "https://example.com"


@dataclass
class Page:
    status: int
    links: list[str]


def generate_site(pages: int, rng: random.Random) -> dict[str, list[str]]:
    """Page path -> the hrefs on it."""
    site: dict[str, list[str]] = {}
    for i in range(pages):
        section = "api" if i % 10 == 0 else "docs"
        links = []
        for _ in range(6):
            j = rng.randrange(pages)
            target = f"/{'api' if j % 10 == 0 else 'docs'}/{j}"
            links.append(rng.choice([target, target + "#top", target + "?utm_source=feed"]))
        links += [f"/files/{i}.pdf", f"https://other.org/{i}"]
        site[f"/{section}/{i}"] = links
    return site


class Server:
    """Answers like a small web server: flaky pages fail once, /api/ is rate-limited once."""

    def __init__(self, site: dict[str, list[str]]) -> None:
        self.site = site
        self.hits: dict[str, int] = {}

    def get(self, url: str) -> Page:
        path = "/" + url.split("/", 3)[3].split("#")[0].split("?")[0]
        self.hits[path] = self.hits.get(path, 0) + 1
        if path not in self.site:
            return Page(404, [])
        first = self.hits[path] == 1
        if first and path.startswith("/api/"):
            return Page(429, [])
        if first and int(path.rsplit("/", 1)[1]) % 7 == 3:
            return Page(503, [])
        return Page(200, self.site[path])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    server = Server(generate_site(args.pages, random.Random(args.seed)))
    frontier = (
        InMemFrontier.fifo()
        .dedup()
        .allow_hosts(["example.com"])
        .filter(lambda s: not s.url.endswith(".pdf"))
        .max_depth(6)
        .retry_with(RetryPolicy(3, base_delay=0.01))
        .tag_backoff()
    )
    frontier.push(Seed.get(f"{SITE}/docs/1").with_tag("docs"))
    start = time.perf_counter()
    fetched = 0
    while (seed := frontier.next_seed(poll=0.01)) is not None:
        fetched += 1
        page = server.get(seed.url)
        if page.status == 429:
            frontier.report(Backoff(seed.tag, until=frontier.clock() + 0.05))
            frontier.report(Retry(seed))
        elif page.status >= 500:
            frontier.report(Retry(seed))
        else:
            with frontier.transaction():  # the page's report and its links: one step
                frontier.report(Done(seed))
                for href in page.links:
                    url = href if href.startswith("http") else SITE + href
                    tag = "api" if "/api/" in url else "docs"
                    frontier.push(Seed.get(url).with_tag(tag).with_depth(seed.depth + 1))
    elapsed = time.perf_counter() - start

    stats = frontier.stats()
    print(f"crawled {stats.done} pages of {len(server.site)} in {elapsed:.2f}s ({fetched} fetches)")
    print(f"offered {stats.pushed} links: {stats.admitted} admitted")
    for reason, count in sorted(stats.refused.items()):
        print(f"  refused {count:6d} {reason}")
    print(f"retried {stats.retried}, failed {stats.failed}; left in the frontier: {len(frontier)}")


if __name__ == "__main__":
    main()
