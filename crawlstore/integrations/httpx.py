"""httpx glue: the request for a seed (conditional when validators are stored), what a response
means for the crawl, and ``report_response``, which reports it as one step.

Needs ``httpx`` (``pip install -e '.[httpx]'``).

| status | outcome | what ``report_response`` does |
|---|---|---|
| 304 | UNCHANGED | ``Done(unchanged=True)``, validators kept |
| 301, 302, 303, 307, 308 with a Location | REDIRECT | ``Done``, and the target pushed |
| the same without a usable Location | FAILED | ``Failed`` |
| 408, 425, 429, 500, 502-504, 507, 509, 511, 520-599 | RETRY | ``Retry`` (see below) |
| 501, 505, 506, 508, 510, other 4xx | FAILED | ``Failed``: asking again cannot help |
| anything else (2xx, 1xx, other 3xx) | DONE | ``Done``, validators recorded, links |

``Retry`` waits the ``Retry-After`` delay when the response gives one; a 429 or 503 with it
also pauses the host's queue until then.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING

from ..errors import InvalidSeed
from ..frontier.protocol import Done, Failed, Report, Retry
from ..revalidate import Revalidate
from ..seed import Seed
from ..url import parse_http_url
from ..validators import Validator

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    import httpx

    from ..frontier.base import Frontier

__all__ = [
    "MAX_RETRY_AFTER",
    "Outcome",
    "Plan",
    "build_request",
    "classify",
    "plan_response",
    "redirect_target",
    "report_response",
    "retry_at",
]

#: 5xx answers that asking again cannot change: the server does not support the method or the
#: HTTP version, or is misconfigured (506, 508, 510). Every other 5xx is retried.
FINAL_5XX = frozenset({501, 505, 506, 508, 510})
RETRY_4XX = frozenset({408, 425, 429})
REDIRECTS = frozenset({301, 302, 303, 307, 308})
#: Statuses whose ``Retry-After`` pauses the host (RFC 9110 defines it for 503 and 429).
PAUSING = frozenset({429, 503})
_CREDENTIALS = ("authorization", "cookie")
#: The longest pause a ``Retry-After`` gets (seconds): a server asking for more is retried then.
MAX_RETRY_AFTER = 86400.0


class Outcome(enum.Enum):
    """What a response means for the crawl."""

    #: 2xx (and other final answers): handle it, report Done.
    DONE = "done"
    #: 304: nothing new, report Done(unchanged=True).
    UNCHANGED = "unchanged"
    #: 301/302/303/307/308: push the target, report Done.
    REDIRECT = "redirect"
    #: 408, 425, 429, 5xx but FINAL_5XX: report Retry.
    RETRY = "retry"
    #: Other 4xx, FINAL_5XX, a redirect without a Location: report Failed.
    FAILED = "failed"


def build_request(
    client: httpx.Client | httpx.AsyncClient, seed: Seed, revalidate: Revalidate | None = None
) -> httpx.Request:
    """The request for ``seed``: its method, URL, headers and body, plus conditional headers.
    Send it without following redirects (httpx's default): the frontier follows them."""
    headers = dict(seed.headers)
    if revalidate is not None:
        headers.update(revalidate.headers(seed))
    return client.build_request(seed.method, seed.url, headers=headers, content=seed.body or None)


def classify(response: httpx.Response) -> Outcome:
    """What ``response`` means for the crawl (see the module's table)."""
    status = response.status_code
    if status == 304:
        return Outcome.UNCHANGED
    if status in REDIRECTS:
        return Outcome.REDIRECT if response.headers.get("location") else Outcome.FAILED
    if status in RETRY_4XX or (500 <= status < 600 and status not in FINAL_5XX):
        return Outcome.RETRY
    if 400 <= status < 600:
        return Outcome.FAILED
    return Outcome.DONE


def redirect_target(seed: Seed, response: httpx.Response) -> Seed | None:
    """The seed a redirect leads to: its ``Location`` resolved against the request's URL, with
    the method a browser would use (303, and 301/302 after a POST, become GET without a body;
    307 and 308 keep both), the seed's tag, priority and depth, and its headers (but
    ``Authorization`` and ``Cookie``, when the target is on another origin). None when the
    response is no redirect, or its Location is no http(s) URL."""
    location = response.headers.get("location")
    status = response.status_code
    if status not in REDIRECTS or not location:
        return None
    method, body, headers = seed.method, seed.body, seed.headers
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, body = "GET", b""
    try:
        url = str(response.url.join(location))
        if parse_http_url(url).origin != parse_http_url(seed.url).origin:
            headers = tuple((n, v) for n, v in headers if n.lower() not in _CREDENTIALS)
        return Seed(method, url, headers=headers, body=body, tag=seed.tag,
                    priority=seed.priority, depth=seed.depth)  # fmt: skip
    except (InvalidSeed, ValueError):
        return None


def retry_at(response: httpx.Response, now: float) -> float | None:
    """When ``Retry-After`` (seconds, or an HTTP date) says to ask again, at most
    ``MAX_RETRY_AFTER`` from ``now``; None without a usable one."""
    value = response.headers.get("retry-after", "").strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():  # "²" is a digit to str.isdigit, not to float()
        at = now + float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None  # an HTTP date is in GMT; one without a zone is no HTTP date
        at = when.timestamp()
    if not math.isfinite(at):
        return None
    return min(max(at, now), now + MAX_RETRY_AFTER)


@dataclass(frozen=True, slots=True)
class Plan:
    """What a response means for a seed, as the writes that report it: ``report``, the
    ``links`` to push (a redirect's target, or the page's links), the time until which the
    seed's queue pauses (``pause_until``; a 429 or 503 with ``Retry-After``) and the
    ``validator`` to store (None: nothing to store)."""

    outcome: Outcome
    report: Report
    links: tuple[Seed, ...] = ()
    pause_until: float | None = None
    validator: Validator | None = None


def plan_response(
    seed: Seed,
    response: httpx.Response,
    *,
    now: float,
    revalidate: Revalidate | None = None,
    links: Iterable[Seed] = (),
    content_hash: str | None = None,
) -> Plan:
    """The writes that report ``response`` for ``seed`` (see the module's table), without
    making them: ``report_response`` makes them in one transaction; a group-commit worker
    makes them as one unit (``pause_queue`` in a ``submit``, then ``finish(plan.report,
    plan.links, validator=plan.validator)``). ``links`` (and ``content_hash``) count only
    when the page is done."""
    outcome = classify(response)
    status = response.status_code
    if outcome is Outcome.RETRY:
        at = retry_at(response, now)
        pause = at if at is not None and status in PAUSING else None
        return Plan(outcome, Retry(seed, after=None if at is None else at - now), (), pause)
    if outcome is Outcome.FAILED:
        return Plan(outcome, Failed(seed, status=status))
    if outcome is Outcome.REDIRECT:
        target = redirect_target(seed, response)
        if target is None:
            return Plan(Outcome.FAILED, Failed(seed, reason="redirect without a usable Location",
                                               status=status))  # fmt: skip
        return Plan(outcome, Done(seed, status=status), (target,))
    if revalidate is not None:
        report, validator = revalidate.outcome(seed, status, response.headers,
                                               content_hash=content_hash)  # fmt: skip
        return Plan(outcome, report, tuple(links), None, validator)
    unchanged = True if outcome is Outcome.UNCHANGED else None
    report = Done(seed, unchanged=unchanged, content_hash=content_hash, status=status)
    return Plan(outcome, report, tuple(links))


class _Kept:
    """The items of an iterable, taken from it when first iterated and kept: iterated again,
    the same items (an iterator given once serves every run of a step)."""

    def __init__(self, items: Iterable[Seed]) -> None:
        self._items: Iterable[Seed] = items
        self._kept: tuple[Seed, ...] | None = None

    def __iter__(self) -> Iterator[Seed]:
        if self._kept is None:
            self._kept = tuple(self._items)
        return iter(self._kept)


def report_response(
    frontier: Frontier,
    seed: Seed,
    response: httpx.Response,
    *,
    revalidate: Revalidate | None = None,
    links: Iterable[Seed] = (),
) -> Outcome:
    """Report what ``response`` means for ``seed`` as one step (see the module's table): the
    report, its validators (with ``revalidate``), a redirect's target or the page's ``links``
    (pushed through the frontier's facades: dedup, scope and depth apply) in one transaction.

    A ``Retry-After`` on a 429 or 503 also pauses the seed's queue until then, so other hosts
    go on (with per-host queues: on a storage with one queue only the seed waits). ``Retry``
    needs ``retry()`` on the frontier, or the seed fails."""
    kept = _Kept(links)  # a step run again after a conflict pushes the same links

    def write() -> Outcome:
        plan = plan_response(seed, response, now=frontier.clock(), revalidate=revalidate,
                             links=kept)  # fmt: skip
        if plan.pause_until is not None:
            frontier.pause_queue(seed, plan.pause_until)
        frontier.report(plan.report)
        if plan.validator is not None and revalidate is not None:
            revalidate.validators.put(seed.fingerprint, plan.validator)
        if plan.links:
            frontier.push_many(plan.links)
        return plan.outcome

    return frontier.atomic(write)
