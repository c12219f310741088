"""Worker processes for the Redis Cluster tests, and the parent's handle on them.

A worker is forked; it opens its own store and writes one line to its pipe after each call
returned (never before), so the parent knows what the store acknowledged:

- ``P url...``: pushed and admitted; ``L url expires [returned]``: handed out with a lease
  until ``expires`` (by a pop that had returned at ``returned``, on the store's clock);
  ``D url expires``: reported Done (the lease it ended); ``N url``: the report came after
  the lease ended (``NotInFlight``); ``E text``: a call raised ``StoreError``; ``END``: the
  worker finished; ``X error at where``: it failed (and exits 1).
"""

from __future__ import annotations

import os
import select
import signal
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from crawlstore import Done, Ready, Seed, Store, SyncedClock, Wait
from crawlstore.errors import NotInFlight, StoreError
from crawlstore.storages._redis import points

__all__ = [
    "DIED",
    "LINKS",
    "Child",
    "crawl",
    "die_at",
    "die_mid_commit",
    "hold_lock",
    "pause_in_commit",
    "read_acks",
    "spawn",
]


def _ack(fd: int, *words: object) -> None:
    os.write(fd, (" ".join(map(str, words)) + "\n").encode())


def crawl(url: str, fd: int, *, me: int, stop: Path | None = None, push: bool = True,
          lease_time: float | None = None, batch: int = 5, skew: float = 0.0) -> None:  # fmt: skip
    """Push ``batch`` new URLs (with ``push``), pop up to ``batch`` and report each Done, in a
    loop: until ``stop`` exists, or, without ``stop``, until the frontier is empty. ``skew``:
    this machine's clock is that many seconds ahead (the store reads the server's time off
    it, as a ``SyncedClock``)."""
    store = Store.open(url) if not skew else _skewed(url, skew)
    policy = {} if lease_time is None else {"lease_time": lease_time}
    frontier = store.frontier(crawl="c", reap_interval=0.1, **policy)
    made = 0
    while stop is None or not stop.exists():
        try:
            if push:
                seeds = [Seed.get(f"https://h{(made + i) % 40}.w{me}.test/{made + i}")
                         for i in range(batch)]  # fmt: skip
                made += batch  # never again: a push that failed may yet be replayed
                admitted = frontier.push_many(seeds)
                _ack(fd, "P", *[s.url for s, a in zip(seeds, admitted, strict=True) if a])
            popped = frontier.pop_many(batch)
            if not popped and stop is None:
                waiting = frontier.pop()
                if not isinstance(waiting, (Ready, Wait)):
                    break  # empty: nothing queued, in flight or scheduled
                popped = [waiting] if isinstance(waiting, Ready) else []
                if isinstance(waiting, Wait):
                    time.sleep(min(0.05, max(0.0, waiting.until - time.time())))
            returned = store.clock()  # (the pop committed before: its leases held since)
            for ready in popped:
                _ack(fd, "L", ready.seed.url, _expiry(ready.seed), returned)
            for ready in popped:
                try:
                    frontier.report(Done(ready.seed))
                    _ack(fd, "D", ready.seed.url, _expiry(ready.seed))
                except NotInFlight:
                    _ack(fd, "N", ready.seed.url)
        except StoreError as exc:
            _ack(fd, "E", str(exc).replace("\n", " "))
    store.close()
    _ack(fd, "END")


#: The exit status of ``die_mid_commit``, and how many URLs its commit pushes.
DIED = 7
LINKS = 10


def hold_lock(url: str, fd: int) -> None:
    """Push inside a transaction, say ``IN``, and wait there to be killed."""
    store = Store.open(url)
    with store.transaction():
        store.frontier(crawl="c").push(Seed.get("https://held.test/"))
        _ack(fd, "IN")
        time.sleep(60)


def die_mid_commit(url: str, fd: int) -> None:
    """Pop a seed, then report it Done and push ``LINKS`` URLs in one transaction, and die
    (exit ``DIED``) once some of the slots have its writes and others not."""
    store = Store.open(url)
    frontier = store.frontier(crawl="c")
    (ready,) = frontier.pop_many(1)
    _ack(fd, "L", ready.seed.url, _expiry(ready.seed))
    points.hook = lambda point: os._exit(DIED) if point == points.BETWEEN_SLOTS else None
    with store.transaction():
        frontier.report(Done(ready.seed))
        frontier.push_many(Seed.get(f"https://link{i}.test/") for i in range(LINKS))


def die_at(url: str, fd: int, *, point: str) -> None:
    """Push a seed, then push ``LINKS`` URLs and die (exit ``DIED``) when the push reaches
    ``point`` (``storages._redis.points``)."""
    store = Store.open(url)
    frontier = store.frontier(crawl="c", queues="host", delay=0, max_in_flight=None)
    frontier.push(Seed.get("https://first.test/"))
    points.hook = lambda name: os._exit(DIED) if name == point else None
    frontier.push_many(Seed.get(f"https://link{i}.test/") for i in range(LINKS))
    _ack(fd, "PUSHED")


def pause_in_commit(url: str, fd: int, *, point: str, push: list[str], report: bool = False,
                    ) -> None:  # fmt: skip
    """With ``report``, pop a seed first. Then, in one unit, report it Done and push ``push``,
    stopping (SIGSTOP, after saying ``PAUSED``) when the unit's commit reaches ``point``
    (``storages._redis.points``); say ``OK`` once the unit returned, ``E text`` if it raised."""
    store = Store.open(url)
    frontier = store.frontier(crawl="c")
    ready = None
    if report:
        (ready,) = frontier.pop_many(1)
        _ack(fd, "L", ready.seed.url, _expiry(ready.seed))

    def stop(name: str) -> None:
        if name == point:
            points.hook = None
            _ack(fd, "PAUSED")
            os.kill(os.getpid(), signal.SIGSTOP)

    points.hook = stop
    try:
        with store.transaction():
            if ready is not None:
                frontier.report(Done(ready.seed))
            frontier.push_many(Seed.get(u) for u in push)
        _ack(fd, "OK")
    except StoreError as exc:
        _ack(fd, "E", str(exc).replace("\n", " "))


def _skewed(url: str, skew: float) -> Store:
    """The store at ``url`` on a machine whose clock is ``skew`` seconds ahead."""
    clock: list[Callable[[], float]] = [time.time]
    store = Store.open(url, clock=lambda: clock[0]())
    server = store._storage.server_clock()  # type: ignore[attr-defined]
    clock[0] = SyncedClock(server, local=lambda: time.time() + skew)
    return store


def _where(exc: BaseException) -> str:
    """Where ``exc`` was raised: the last frames in crawlstore, redis-py and these tests."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "crawlstore" in f.filename or "redis" in f.filename][-6:]  # fmt: skip
    return " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(frames))


def _expiry(seed: Seed) -> float:
    return seed.lease.expires if seed.lease is not None else 0.0


class Child:
    """A forked worker: its pid, its pipe, the lines it sent."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self.lines: list[str] = []
        self._buffer = b""
        self.status: int | None = None
        self.closed = False

    def read(self) -> bool:
        """Read what is there; False at the end of the pipe."""
        chunk = os.read(self.fd, 65536)
        self._buffer += chunk
        *complete, self._buffer = self._buffer.split(b"\n")
        self.lines.extend(line.decode() for line in complete)
        return bool(chunk)

    def running(self) -> bool:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status
        return self.status is None

    def kill(self) -> None:
        """SIGKILL it (if it runs), collect it, and read what it sent before."""
        if self.running():
            os.kill(self.pid, signal.SIGKILL)
        self.wait(10)

    def wait(self, timeout: float) -> int:
        """Its exit status, once it ended and its pipe is read to the end."""
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() > deadline:
                raise AssertionError(f"worker {self.pid} did not end in {timeout} s")
            read_acks([self], 0.05)
        if not self.closed:
            while self.read():
                pass
            os.close(self.fd)
            self.closed = True
        assert self.status is not None
        return self.status

    def count(self, kind: str) -> int:
        return sum(line.startswith(kind + " ") for line in self.lines)


def spawn(target: Callable[..., None], *args: Any, **kwargs: Any) -> Child:
    """Fork a worker running ``target(*args, fd, **kwargs)``; it exits 0, or 1 on an error."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        code = 0
        try:
            target(*args, write_fd, **kwargs)
        except BaseException as exc:
            _ack(write_fd, "X", repr(exc).replace("\n", " "), "at", _where(exc))
            code = 1
        os._exit(code)
    os.close(write_fd)
    return Child(pid, read_fd)


def read_acks(children: Iterable[Child], timeout: float) -> None:
    """Read the lines the children sent within ``timeout`` seconds."""
    by_fd = {child.fd: child for child in children if child.status is None}
    if by_fd:
        ready, _, _ = select.select(list(by_fd), [], [], timeout)
        for fd in ready:
            by_fd[fd].read()
