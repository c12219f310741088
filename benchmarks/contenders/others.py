"""Queue libraries a Python crawler might reach for, each with the seen set a user would pair
with it. They queue URL strings: the string is their request object."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence

from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered


class PersistQueue(Contender):
    """persist-queue's ``SQLiteAckQueue`` as it ships (``auto_commit=True``: a commit per call,
    WAL, sqlite3's default ``synchronous``), with the same library's ``PDict`` (a SQLite
    table) as the seen set: both persist. A page: ``get``, for each link a ``PDict``
    check + set and a ``put``, then ``ack``."""

    key = "persist-queue"
    label = "persist-queue SQLiteAckQueue + PDict as seen"
    requires = ("persistqueue",)
    syncs = True
    grouping = False
    note = "a commit per call (auto_commit)"

    def _open(self, path: str) -> None:
        import persistqueue

        self.q = persistqueue.SQLiteAckQueue(os.path.join(path, "queue"))
        self.seen = persistqueue.PDict(os.path.join(path, "seen"), "seen")

    def open(self, path: str) -> None:
        self._open(path)

    def seed(self, urls: Sequence[str]) -> None:
        self.push(urls, 1)

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        q, seen = self.q, self.seen
        get, ack, put = q.get, q.ack, q.put
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            url = get(block=False)
            popped(url)
            for u in links_of(i):
                if u not in seen:
                    seen[u] = 1
                    put(u)
            ack(url)  # after its links: a kill before it gives the page back
            acked(i, url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        seen, put = self.seen, self.q.put
        for u in urls:
            if u not in seen:
                seen[u] = 1
                put(u)

    def pop_report(self, k: int, batch: int) -> None:
        get, ack = self.q.get, self.q.ack
        for _ in range(k):
            ack(get(block=False))

    def close(self) -> None:
        self.q.close() if hasattr(self.q, "close") else None

    def recover(self, path: str) -> Recovered:
        self._open(path)  # auto_resume: the unacked items are ready again
        queued = set()
        while self.q.qsize():
            item = self.q.get(block=False)
            queued.add(item)
        seen = self.seen
        return Recovered(queued, lambda url: url in queued or url in seen)


class Queuelib(Contender):
    """queuelib's ``FifoSQLiteQueue`` (sqlite3's defaults: a rollback journal, an fsync per
    commit, a commit per push and per pop) with a Python ``set`` as the seen set: the set is
    NOT persisted. A page: ``pop``, and for each new link a ``push``."""

    key = "queuelib"
    label = "queuelib FifoSQLiteQueue + Python set as seen (set not persisted)"
    requires = ("queuelib",)
    syncs = True
    grouping = False
    note = "a commit per call; the seen set is in memory"
    FILE = "queue.sqlite"

    def open(self, path: str) -> None:
        from queuelib.queue import FifoSQLiteQueue

        self.q = FifoSQLiteQueue(os.path.join(path, self.FILE))
        self.seen: set[str] = set()

    def seed(self, urls: Sequence[str]) -> None:
        self.push(urls, 1)

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        pop, push, seen, add = self.q.pop, self.q.push, self.seen, self.seen.add
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            raw = pop()
            if raw is None:
                raise RuntimeError("queuelib: the queue is empty")
            url = raw.decode()
            popped(url)
            for u in links_of(i):
                if u not in seen:
                    add(u)
                    push(u.encode())
            acked(i, url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        push, seen, add = self.q.push, self.seen, self.seen.add
        for u in urls:
            if u not in seen:
                add(u)
                push(u.encode())

    def pop_report(self, k: int, batch: int) -> None:
        pop = self.q.pop
        for _ in range(k):
            if pop() is None:
                raise RuntimeError("queuelib: the queue is empty")

    def close(self) -> None:
        self.q.close()

    def recover(self, path: str) -> Recovered:
        db = sqlite3.connect(os.path.join(path, self.FILE))
        queued = {bytes(row[0]).decode() for row in db.execute("SELECT item FROM queue")}
        return Recovered(queued, lambda url: url in queued)  # the seen set died with it


class DiskcacheCrawler(Contender):
    """diskcache's "web crawler" case study: a ``Deque`` of URLs and an ``Index`` as the seen
    set (SQLite underneath: WAL, ``synchronous=NORMAL``; a commit per call)."""

    key = "diskcache"
    label = "diskcache Deque + Index as seen (its web-crawler case study)"
    requires = ("diskcache",)
    grouping = False
    note = "a commit per call; popleft removes the URL"

    def open(self, path: str) -> None:
        import diskcache

        self.q = diskcache.Deque(directory=os.path.join(path, "deque"))
        self.seen = diskcache.Index(os.path.join(path, "index"))

    def seed(self, urls: Sequence[str]) -> None:
        self.push(urls, 1)

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        popleft, append, seen = self.q.popleft, self.q.append, self.seen
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            url = popleft()
            popped(url)
            for u in links_of(i):
                if u not in seen:
                    seen[u] = None
                    append(u)
            acked(i, url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        append, seen = self.q.append, self.seen
        for u in urls:
            if u not in seen:
                seen[u] = None
                append(u)

    def pop_report(self, k: int, batch: int) -> None:
        popleft = self.q.popleft
        for _ in range(k):
            popleft()

    def close(self) -> None:
        self.q._cache.close()  # Deque has no close of its own; its cache does
        self.seen.cache.close()

    def recover(self, path: str) -> Recovered:
        self.open(path)
        queued = set(self.q)
        seen = self.seen
        return Recovered(queued, lambda url: url in queued or url in seen)
