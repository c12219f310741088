"""The crawl loop's input: deterministic URLs over 200 hosts, and each page's 10 links, exactly
half of them new and half URLs pushed before."""

from __future__ import annotations

import random

HOSTS = 200
START = 1000  # start URLs pushed (untimed) before the crawl loop
LINKS = 10
NEW = LINKS // 2


def url(n: int) -> str:
    return f"https://h{n % HOSTS}.example/p/{n}"


def start_urls(n: int = START) -> list[str]:
    return [url(i) for i in range(n)]


def page_links(page: int, start: int = START) -> list[str]:
    """Page ``page``'s links: URLs ``start + 5 * page`` to ``+ 4`` (new), and five URLs drawn
    among the ones pushed before (the start URLs and earlier pages' new links), shuffled."""
    rng = random.Random(page * 1_000_003 + start)
    base = start + NEW * page
    links = [url(base + k) for k in range(NEW)] + [url(rng.randrange(base)) for _ in range(NEW)]
    rng.shuffle(links)
    return links


class Links:
    """``links_of(page)`` from a precomputed list, so that building the strings stays out of
    the timed loop (the contenders build their request objects from them inside it)."""

    def __init__(self, pages: int, start: int = START) -> None:
        self.pages = [page_links(i, start) for i in range(pages)]

    def __call__(self, page: int) -> list[str]:
        return self.pages[page]
