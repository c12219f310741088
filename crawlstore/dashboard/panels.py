"""What the dashboard shows, read from a store opened read-only: each panel a JSON-ready dict
built from the store's own counters and indexes, so that a refresh costs what it shows, not
what the crawl holds (a queue scan stops at ``QUEUE_SCAN`` queues, and says so)."""

from __future__ import annotations

import functools
import itertools
import os
import threading
import time
from collections import Counter, deque
from dataclasses import asdict
from typing import Any
from urllib.parse import urlsplit

from ..errors import InvalidArgument, InvalidSeed
from ..frontier.indexes import RECENT_FAILURES
from ..frontier.spi import REVISIT_SLOT
from ..frontier.traps import BLOCKED_NAMESPACE, blocked_prefixes
from ..store import Store

__all__ = ["HISTORY", "QUEUE_SCAN", "Panels", "UnknownCrawl"]

#: Seconds of pages-a-second history kept in memory, a crawl.
HISTORY = 600.0
#: Queues a refresh reads at most (a page of the queue listing at a time).
QUEUE_SCAN = 2000
#: Queues each queue panel lists (and rows of the other lists).
SHOWN = 10
#: Recent failures listed.
FAILURES_SHOWN = 20
#: How far ahead the revisits panel counts (seconds).
REVISITS_AHEAD = 3600.0


class UnknownCrawl(LookupError):
    """A crawl the store does not hold."""


class Panels:
    """The panels of one store; the pages-a-second history of each crawl, kept from
    successive reads of its counters."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._history: dict[str, deque[tuple[float, int]]] = {}
        self._sizes: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def crawls(self) -> list[str]:
        return self.store.crawls()

    def _frontier(self, crawl: str) -> Any:
        if crawl not in self.store.crawls():
            raise UnknownCrawl(f"{self.store.location} holds no crawl {crawl!r}")
        return self.store.frontier(crawl=crawl)

    def summary(self, crawl: str) -> dict[str, Any]:
        """The crawl's counters, its pages a second over the last minutes, the store's file."""
        stats = self._frontier(crawl).stats()
        now = time.time()
        with self._lock:
            history = self._history.setdefault(crawl, deque())
            if not history or now - history[-1][0] >= 1.0:
                history.append((now, stats.done + stats.failed + stats.skipped))
            while history and now - history[0][0] > HISTORY:
                history.popleft()
            points = list(history)
        rates = [{"at": b[0], "rate": max(0.0, (b[1] - a[1]) / (b[0] - a[0]))}
                 for a, b in itertools.pairwise(points)]  # fmt: skip
        return {"crawl": crawl, "at": now, "stats": _stats(asdict(stats)), "rates": rates,
                "store": self._store(now)}  # fmt: skip

    def _store(self, now: float) -> dict[str, Any]:
        meta = self.store.meta
        out: dict[str, Any] = {"location": self.store.location, "format": meta.get("format"),
                               "fingerprint": meta.get("fingerprint"), "file_bytes": None,
                               "growth_bytes_per_s": None}  # fmt: skip
        if "://" in self.store.location:
            return out
        size = os.path.getsize(self.store.path)
        with self._lock:
            self._sizes.append((now, size))
            while self._sizes and now - self._sizes[0][0] > HISTORY:
                self._sizes.popleft()
            first = self._sizes[0]
        out["file_bytes"] = size
        if now > first[0]:
            out["growth_bytes_per_s"] = (size - first[1]) / (now - first[0])
        return out

    def queues(self, crawl: str) -> dict[str, Any]:
        """The busiest queues, those blocked (until when) and those at their cap of seeds in flight,
        from at most ``QUEUE_SCAN`` queues."""
        frontier = self._frontier(crawl)
        now = self.store.clock()
        seen: list[Any] = []
        after = None
        while len(seen) < QUEUE_SCAN:
            page = frontier.queues(after=after, limit=min(500, QUEUE_SCAN - len(seen)))
            seen += page
            if len(page) < 500:
                break
            after = page[-1].key
        cap = frontier.core.policy.max_in_flight
        if cap is None:
            cap = self.store.defaults().max_in_flight
        busiest = sorted(seen, key=lambda q: (-(q.queued + q.in_flight), q.key))[:SHOWN]
        blocked = sorted((q for q in seen if q.blocked_until > now),
                         key=lambda q: q.blocked_until)[:SHOWN]  # fmt: skip
        full = [q for q in seen if q.in_flight and q.in_flight >= _cap(q, cap)][:SHOWN]
        return {"crawl": crawl, "scanned": len(seen), "complete": len(seen) < QUEUE_SCAN,
                "busiest": [_queue(q) for q in busiest], "blocked": [_queue(q) for q in blocked],
                "at_cap": [_queue(q) for q in full]}  # fmt: skip

    def recent(self, crawl: str) -> dict[str, Any]:
        """The crawl's recent failures, the commonest failure reasons by host among them, the
        trap prefixes blocked, and the revisits due in the next hour: each read from an index
        of its own, in what it shows."""
        core = self._frontier(crawl).core
        now = self.store.clock()
        window = core.recent_failures(limit=RECENT_FAILURES)
        reasons = Counter((_host(f.url), _label(f.status, f.reason)) for f in window)
        blocked = sorted(blocked_prefixes(core), key=lambda b: (-b.refused, b.prefix))
        return {
            "crawl": crawl,
            "failures": [asdict(f) for f in window[:FAILURES_SHOWN]],
            "window": len(window),
            "reasons": [{"host": host, "reason": label, "count": n} for (host, label), n
                        in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:SHOWN]],
            "traps": [asdict(b) for b in blocked[:SHOWN]],
            "traps_blocked": len(blocked),
            "revisits": {"overdue": core.revisits_due(now - REVISIT_SLOT),
                         "until": now + REVISITS_AHEAD, "due": self.revisits_due(crawl, now)},
        }  # fmt: skip

    def revisits_due(self, crawl: str, now: float | None = None) -> int:
        """The crawl's revisits due in the next ``REVISITS_AHEAD`` seconds (overdue ones too)."""
        now = self.store.clock() if now is None else now
        return int(self._frontier(crawl).core.revisits_due(now + REVISITS_AHEAD))

    def traps_blocked(self, crawl: str) -> int:
        """How many of the crawl's URL prefixes are at a trap budget (their keys only)."""
        return len(self._frontier(crawl).core.state(BLOCKED_NAMESPACE))

    def url(self, crawl: str, url: str) -> dict[str, Any]:
        """The ``url`` view of one URL: its state, queue, last outcome, seed."""
        try:
            status = self._frontier(crawl).url(url)
        except (InvalidArgument, InvalidSeed) as exc:
            return {"url": url, "state": "invalid", "error": str(exc)}
        outcome = status.outcome
        return {
            "url": status.url,
            "state": status.state,
            "queue": status.queue,
            "at": status.at,
            "kind": status.kind,
            "created": status.created,
            "outcome": None if outcome is None else asdict(outcome),
            "seed": None if status.seed is None else {"url": status.seed.url,
                                                      "depth": status.seed.depth,
                                                      "priority": status.seed.priority},
        }  # fmt: skip


def _stats(raw: dict[str, Any]) -> dict[str, Any]:
    raw["refused"] = dict(raw.get("refused", {}))
    return raw


def _host(url: str) -> str:
    """The host of a seed's URL (canonical: ``scheme://authority/...``), its authority parsed
    once a refresh reads it a thousand times."""
    return _authority_host(url.partition("://")[2].partition("/")[0]) or url


@functools.lru_cache(maxsize=4096)
def _authority_host(authority: str) -> str | None:
    return urlsplit(f"//{authority}").hostname


def _label(status: int | None, reason: str | None) -> str:
    """A failure's status and reason as one label (``(none)`` when it was given neither)."""
    return " ".join(str(part) for part in (status, reason) if part is not None) or "(none)"


def _cap(q: Any, crawl_cap: Any) -> float:
    """The queue's cap on seeds in flight (infinite: none, or "auto", which moves)."""
    cap = q.max_in_flight if q.max_in_flight is not None else crawl_cap
    return float("inf") if cap in (None, "auto", -1) else float(cap)


def _queue(q: Any) -> dict[str, Any]:
    return {"key": q.key, "queued": q.queued, "in_flight": q.in_flight,
            "scheduled": q.scheduled, "blocked_until": q.blocked_until or None,
            "max_in_flight": q.max_in_flight, "delay": q.delay}  # fmt: skip
