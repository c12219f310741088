"""A careful hand-written SQLite frontier: WAL, ``synchronous=NORMAL`` or ``FULL``, explicit
``BEGIN IMMEDIATE`` transactions, cached statements. Tables: ``queue`` (rowid order),
``seen`` and ``leases`` (``WITHOUT ROWID``, keyed by URL). A page: pop (its own commit: the
lease), then one transaction that drops the lease and pushes the links. One FIFO queue: no
host queues. At startup a user's code puts the leases of a dead run back (``recover``)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence

from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered

DB_FILE = "frontier.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (seq INTEGER PRIMARY KEY, url TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS seen (url TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (url TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
"""


class UrlFrontier:
    def __init__(self, path: str, synchronous: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, cached_statements=32)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA cache_size=-65536")
        self.db.executescript(SCHEMA)
        self._open = False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._open:
            yield
            return
        self.db.execute("BEGIN IMMEDIATE")
        self._open = True
        try:
            yield
        except BaseException:
            self._open = False
            self.db.execute("ROLLBACK")
            raise
        self._open = False
        self.db.execute("COMMIT")

    def push(self, url: str) -> bool:
        with self.transaction():
            execute = self.db.execute
            if execute("INSERT OR IGNORE INTO seen (url) VALUES (?)", (url,)).rowcount < 1:
                return False
            execute("INSERT INTO queue (url) VALUES (?)", (url,))
            return True

    def pop(self) -> str:
        with self.transaction():
            execute = self.db.execute
            row = execute("SELECT seq, url FROM queue ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                raise RuntimeError("sqlite: the queue is empty")
            execute("DELETE FROM queue WHERE seq = ?", (row[0],))
            execute("INSERT INTO leases (url, seq) VALUES (?, ?)", (row[1], row[0]))
            return str(row[1])

    def report(self, url: str) -> None:
        with self.transaction():
            self.db.execute("DELETE FROM leases WHERE url = ?", (url,))

    def requeue_leases(self) -> None:
        with self.transaction():
            self.db.execute("INSERT INTO queue (seq, url) SELECT seq, url FROM leases")
            self.db.execute("DELETE FROM leases")

    def close(self) -> None:
        self.db.close()


class SqliteNormal(Contender):
    key = "sqlite-normal"
    synchronous = "NORMAL"
    label = "SQLite WAL, synchronous=NORMAL, hand-written frontier + seen table"
    note = "pop (commit), then report + 10 pushes in one transaction"

    def open(self, path: str) -> None:
        self.f = UrlFrontier(os.path.join(path, DB_FILE), self.synchronous)

    def seed(self, urls: Sequence[str]) -> None:
        with self.f.transaction():
            for u in urls:
                self.f.push(u)

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        f = self.f
        pop, report, push, transaction = f.pop, f.report, f.push, f.transaction
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            url = pop()
            popped(url)
            with transaction():
                report(url)
                for u in links_of(i):
                    push(u)
            acked(i, url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        f = self.f
        for i in range(0, len(urls), batch):
            with f.transaction():
                for u in urls[i : i + batch]:
                    f.push(u)

    def pop_report(self, k: int, batch: int) -> None:
        f = self.f
        for i in range(0, k, batch):
            with f.transaction():
                for _ in range(min(batch, k - i)):
                    f.report(f.pop())

    def close(self) -> None:
        self.f.close()

    def recover(self, path: str) -> Recovered:
        f = UrlFrontier(os.path.join(path, DB_FILE), self.synchronous)
        f.requeue_leases()
        queued = {row[0] for row in f.db.execute("SELECT url FROM queue")}

        def known(url: str) -> bool:
            row = f.db.execute("SELECT 1 FROM seen WHERE url = ?", (url,)).fetchone()
            return url in queued or row is not None

        return Recovered(queued, known)


class SqliteFull(SqliteNormal):
    key = "sqlite-full"
    synchronous = "FULL"
    label = "SQLite WAL, synchronous=FULL, hand-written frontier + seen table"
    syncs = True
