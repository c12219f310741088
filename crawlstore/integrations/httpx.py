"""httpx glue: the request for a seed (conditional when validators are stored) and the
classification of a response into the report it calls for.

Needs ``httpx`` (``pip install 'crawlstore[httpx]'``).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ..revalidate import Revalidate
from ..seed import Seed

if TYPE_CHECKING:
    import httpx

__all__ = ["Outcome", "build_request", "classify"]

_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class Outcome(enum.Enum):
    """What a response means for the crawl."""

    DONE = "done"  # 2xx (and other final answers): handle it, report Done
    UNCHANGED = "unchanged"  # 304: nothing new, report Done(unchanged=True)
    RETRY = "retry"  # 408, 425, 429, 5xx: report Retry
    FAILED = "failed"  # other 4xx: report Failed


def build_request(
    client: httpx.Client | httpx.AsyncClient, seed: Seed, revalidate: Revalidate | None = None
) -> httpx.Request:
    """The request for ``seed``: its method, URL, headers and body, plus conditional headers."""
    headers = dict(seed.headers)
    if revalidate is not None:
        headers.update(revalidate.headers(seed))
    return client.build_request(seed.method, seed.url, headers=headers, content=seed.body or None)


def classify(response: httpx.Response) -> Outcome:
    status = response.status_code
    if status == 304:
        return Outcome.UNCHANGED
    if status in _RETRY_STATUSES:
        return Outcome.RETRY
    if 400 <= status < 600:
        return Outcome.FAILED
    return Outcome.DONE
