"""What the Redis tests check a store against: its invariants, and what worker processes
were told (``redis_worker.py``); helpers to wait for workers and to drain a crawl."""

from __future__ import annotations

import itertools
import math
import os
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from redis_servers import Cluster, Node
from redis_worker import Child, read_acks

from crawlstore import Done, ManualClock, Ready, Seed, Store, Wait
from crawlstore.frontier import Frontier, partitioned

try:
    from redis.crc import key_slot as _key_slot
except ModuleNotFoundError:  # the Redis tests skip
    _key_slot = None

__all__ = [
    "Acks",
    "Sends",
    "check",
    "deployment_url",
    "drain_held",
    "pause",
    "pop_all",
    "role",
    "seeds",
    "slot_of",
    "stop_all",
    "store_slot",
    "wait_acks",
    "wait_for",
]


def seeds(n: int, hosts: int, tag: str = "") -> list[Seed]:
    return [Seed.get(f"https://h{i % hosts}.test/{tag}{i}") for i in range(n)]


def check(frontier: Frontier) -> dict[str, str]:
    """The invariants (each URL listed once, in one state; the crawl's and each queue's
    gauges equal the states of their URLs); each URL's state. Posts are folded first: a post
    is kept in its inbox until a unit folds it, and the fold of a post a failover kept may
    have died with its master."""
    if frontier.core.storage.capabilities.inboxes:
        partitioned.fold_all(frontier.core)
    urls: dict[str, str] = {}
    per_queue: Counter[tuple[str | None, str]] = Counter()
    after = None
    while page := frontier.urls(after=after, limit=1000):
        for status in page:
            assert status.url not in urls, f"{status.url} is listed twice"
            urls[status.url] = status.state
            per_queue[status.queue, status.state] += 1
        after = page[-1].fingerprint
    states = Counter(urls.values())
    stats = frontier.stats()
    assert stats.admitted >= len(urls), (stats, len(urls))  # (a URL done, pushed again: twice)
    assert (stats.queued, stats.in_flight, stats.scheduled, stats.done) == (
        states["queued"], states["in_flight"], states["scheduled"], states["done"]), (
        stats, states)  # fmt: skip
    assert len(frontier) == stats.queued + stats.in_flight + stats.scheduled
    queues, last = [], None
    while page_q := frontier.queues(after=last, limit=500):
        queues += page_q
        last = page_q[-1].key
    for q in queues:
        assert (q.queued, q.in_flight, q.scheduled) == (per_queue[q.key, "queued"],
            per_queue[q.key, "in_flight"], per_queue[q.key, "scheduled"]), q  # fmt: skip
    return urls


def pop_all(store: Store, frontier: Frontier, clock: ManualClock | None = None) -> list[str]:
    """Pop until nothing is ready, reporting Done a batch a transaction; the URLs popped. With
    the store's ``clock``: until nothing is left, the clock moved on to each ``Wait``."""
    out: list[str] = []
    while True:
        popped = frontier.pop_many(200)
        if not popped and clock is not None:
            waiting = frontier.pop()
            if isinstance(waiting, Wait):
                assert waiting.until > clock(), waiting  # (a wait that never ends: a bug)
                clock.now = waiting.until
                continue
            popped = [waiting] if isinstance(waiting, Ready) else []
        if not popped:
            return out
        with store.transaction():
            for ready in popped:
                frontier.report(Done(ready.seed))
        out += [ready.seed.url for ready in popped]


def drain_held(url: str) -> None:
    """Every seed the crawl holds, in flight ones too (on a clock past every lease), pops
    exactly once."""
    clock = ManualClock(time.time() + 86400)
    with Store.open(url, clock=clock) as store:
        frontier = store.frontier(crawl="c")
        held = {u for u, state in check(frontier).items() if state in ("queued", "in_flight")}
        frontier.core.reap()
        popped = pop_all(store, frontier, clock)
        assert len(popped) == len(set(popped)), [u for u, n in Counter(popped).items() if n > 1]
        assert set(popped) == held, (set(popped) - held, held - set(popped))
        assert len(frontier) == 0


def wait_for(children: list[Child], done: Callable[[], bool], timeout: float, what: str) -> None:
    """Read the workers' lines until ``done()``; fails if a worker not killed ended, or if it
    takes longer."""
    deadline = time.monotonic() + timeout
    while not done():
        for child in children:
            assert child.status is not None or child.running(), f"ended: {child.lines[-5:]}"
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        read_acks(children, 0.05)


def wait_acks(children: list[Child], kind: str, more: int, what: str, *, each: bool = True,
              timeout: float = 60) -> None:  # fmt: skip
    """Read until each worker (not ``each``: all together) sent ``more`` lines of ``kind``."""
    start = [c.count(kind) for c in children]

    def counts() -> list[int]:
        return [c.count(kind) - n for c, n in zip(children, start, strict=True)]

    wait_for(children, lambda: min(counts()) >= more if each else sum(counts()) >= more,
             timeout, what)  # fmt: skip


@dataclass
class Acks:
    """What the workers were told: URLs pushed, each lease's expiry by URL, URLs done (with
    the expiry of the lease they ended), and errors."""

    pushed: set[str] = field(default_factory=set)
    leases: dict[str, list[float]] = field(default_factory=dict)
    #: When the pop that handed out a lease (URL, expiry) had returned, where it was said.
    returned: dict[tuple[str, float], float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, children: list[Child]) -> Acks:
        return cls.parse(line for child in children for line in child.lines)

    @classmethod
    def parse(cls, lines: Iterable[str]) -> Acks:
        acks = cls()
        for line in lines:
            kind, _, rest = line.partition(" ")
            if kind == "P":
                acks.pushed.update(rest.split())
            elif kind in ("L", "D"):
                url, expires, *returned = rest.split()
                if kind == "L":
                    acks.leases.setdefault(url, []).append(float(expires))
                    if returned:
                        acks.returned[url, float(expires)] = float(returned[0])
                else:
                    acks.done[url] = float(expires)
            elif kind in ("E", "X"):
                acks.errors.append(rest)
        return acks

    def check_errors(self, *expected: str) -> None:
        """Every error a worker met is one of those ``expected``."""
        assert [e for e in self.errors if not any(x in e for x in expected)] == []

    def check_kept(self, states: dict[str, str], *, handed_out_again: bool = False) -> None:
        """Nothing acknowledged is lost, and no URL was handed out twice (unless
        ``handed_out_again``: leases ended under their holders)."""
        assert self.pushed and self.pushed <= states.keys(), self.pushed - states.keys()
        assert all(states[url] == "done" for url in self.done), {
            url: states[url] for url in self.done if states[url] != "done"}  # fmt: skip
        again = {url for url, leases in self.leases.items() if len(leases) > 1}
        assert bool(again) == handed_out_again, again

    def check_history(self, frontier: Frontier, *, lease_time: float, delay: float,
                      cap: int, slack: float = 0.02) -> None:  # fmt: skip
        """The history the workers saw, on the store's clock (the server's, as each client
        reads it): per URL, a lease starts only once the one before ended, and none follows
        the lease that was reported done; per host, pops ``delay`` apart, and at most ``cap``
        leases surely held at once: from when their pops had returned (a unit reads the clock
        before the bucket, so a pop's time may precede a report it saw) until they were
        reported done or expired. ``slack``: how far the clients' readings of the server's
        clock may disagree."""
        per_host: dict[str, list[tuple[float, float, float, str]]] = {}
        for url, leases in self.leases.items():
            leases = sorted(leases)
            assert len(set(leases)) == len(leases), f"{url}: one lease handed out twice"
            ends = dict.fromkeys(leases, math.inf)
            outcome = frontier.url(url).outcome
            if url in self.done:
                assert self.done[url] == leases[-1], f"{url} was popped after it was done"
                assert outcome is not None and outcome.state == "done", (url, outcome)
            if outcome is not None and outcome.state == "done":  # (a worker may have died
                ends[leases[-1]] = outcome.at  # between the report and its acknowledgement)
            for a, b in itertools.pairwise(leases):
                assert b - lease_time >= a - slack, f"{url}: leases until {a} and {b} overlap"
            host = urlsplit(url).hostname or ""
            for expires in leases:
                start = expires - lease_time
                held = max(start, self.returned.get((url, expires), start))
                per_host.setdefault(host, []).append(
                    (start, held, min(expires, ends[expires]), url)
                )
        for host, spans in per_host.items():
            spans.sort()
            for (a, *_), (b, *_) in itertools.pairwise(spans):
                assert b >= a + delay - slack, f"{host}: pops at {a} and {b}, closer than {delay}"
            for _, at, _, _ in spans:  # (each lease's first sure instant: how many held then)
                live = sum(held <= at < end - slack for _, held, end, _ in spans)
                assert live <= cap, f"{host}: {live} leases held at {at}, over {cap}: {spans}"


def store_slot(ns: str) -> int:
    """The slot of the store's own keys (its lock, epoch, journal)."""
    return slot_of(b"{" + ns.encode() + b"}")


def slot_of(key: bytes) -> int:
    return int(_key_slot(key))


def role(node: Node) -> str:
    return str(node.client().info("replication")["role"])


def pause(children: list[Child], seconds: float) -> None:
    """Stop these workers (SIGSTOP) for ``seconds`` of wall time, as a GC, a swapped-out
    process or a migrated VM would, then let them go on."""
    for child in children:
        os.kill(child.pid, signal.SIGSTOP)
    time.sleep(seconds)  # (the pause itself, not a wait for something)
    for child in children:
        os.kill(child.pid, signal.SIGCONT)


def stop_all(children: list[Child], stop: Path) -> None:
    stop.touch()
    for child in children:
        assert child.wait(60) == 0, child.lines[-5:]


class Sends:
    """How many times redis-py sent on a connection (a command, or a whole pipeline), from
    ``count(monkeypatch)`` on."""

    def __init__(self) -> None:
        self.count = 0
        #: What the last ``during`` operation returned.
        self.result: Any = None

    def during(self, operation: Callable[[], Any]) -> int:
        """How many sends ``operation`` made."""
        before = self.count
        self.result = operation()
        return self.count - before

    @classmethod
    def counting(cls, monkeypatch: Any) -> Sends:
        import redis

        counter = cls()
        original = redis.connection.AbstractConnection.send_packed_command

        def counted(self: Any, command: Any, check_health: bool = True) -> None:
            counter.count += 1
            original(self, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counted)
        return counter


def deployment_url(request: Any, ns: str, query: str = "") -> str:
    """The URL of a store in namespace ``ns`` (``query``: more options, ``&a=b...``) on the
    session's cluster when ``request.param`` is "cluster", else on its standalone node."""
    if request.param == "cluster":
        cluster: Cluster = request.getfixturevalue("cluster")
        return f"{cluster.url}?ns={ns}{query}"
    node: Node = request.getfixturevalue("redis_node")
    return f"redis://127.0.0.1:{node.port}/0?ns={ns}{query}"
