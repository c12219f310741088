"""The hand-written SQLite frontier, done with care, and its contenders. The one copy of it:
``SqliteFrontier`` (which ``benchmarks.store`` and the suite's open workload drive directly),
and the suite's contenders ``SqliteNormal`` and ``SqliteFull`` over it.

WAL; one connection in autocommit mode with explicit ``BEGIN IMMEDIATE`` transactions (nested
use joins the outer one, as in crawlstore); cached statements; a 64 MiB page cache. The queue
is ordered by its rowid (``seq INTEGER PRIMARY KEY``); the seen set and the leases are
``WITHOUT ROWID`` tables keyed by the dedup key. ``synchronous``: ``"NORMAL"`` (no fsync per
commit in WAL mode, only at checkpoints) or ``"FULL"`` (the WAL is fsynced at every commit).
One FIFO queue: no host queues."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered

DB_FILE = "frontier.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS queue (seq INTEGER PRIMARY KEY, key BLOB NOT NULL, record BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS seen (key BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    key BLOB NOT NULL, seq INTEGER NOT NULL, record BLOB NOT NULL, PRIMARY KEY (key, seq)
) WITHOUT ROWID;
"""
#: A queued entry: its dedup key (a fingerprint, or the URL string) and its record (what a
#: crawler gets back: a seed's msgpack record, or the URL string).
Key = Any
Record = Any


class SqliteFrontier:
    """A FIFO frontier with dedup and leases in one SQLite file."""

    def __init__(self, path: str, synchronous: str = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL: {synchronous!r}")
        self.db = sqlite3.connect(path, isolation_level=None, cached_statements=32)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA cache_size=-65536")
        self.db.executescript(SCHEMA)
        self._open = False

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic step; nested use joins the outer one."""
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

    def push(self, key: Key, record: Record) -> bool:
        """Queue ``record`` unless ``key`` was seen, and record the key as seen."""
        with self.transaction():
            execute = self.db.execute
            if execute("INSERT OR IGNORE INTO seen (key) VALUES (?)", (key,)).rowcount < 1:
                return False
            execute("INSERT INTO queue (key, record) VALUES (?, ?)", (key, record))
            return True

    def fill(self, entries: Sequence[tuple[Key, Record]]) -> None:
        """Queue entries whose keys are new, without the dedup check (fast, untimed fills)."""
        with self.transaction():
            self.db.executemany("INSERT INTO seen (key) VALUES (?)", [(k,) for k, _ in entries])
            self.db.executemany("INSERT INTO queue (key, record) VALUES (?, ?)", entries)

    def pop(self) -> tuple[Key, Record] | None:
        """The oldest queued entry, now leased, as (key, record); None when empty."""
        with self.transaction():
            execute = self.db.execute
            # the smallest seq: one step down the rowid B-tree
            row = execute("SELECT seq, key, record FROM queue ORDER BY seq LIMIT 1").fetchone()
            if row is None:
                return None
            seq, key, record = row
            execute("DELETE FROM queue WHERE seq = ?", (seq,))
            execute("INSERT INTO leases (key, seq, record) VALUES (?, ?, ?)", (key, seq, record))
            return key, record

    def report(self, key: Key) -> None:
        """The leased entry's fetch ended: drop its lease."""
        with self.transaction():
            if self.db.execute("DELETE FROM leases WHERE key = ?", (key,)).rowcount < 1:
                raise LookupError(f"not in flight: {key!r}")

    def requeue_leases(self) -> None:
        """Put the leases of a dead run back in the queue, in their order (a user's startup
        code)."""
        with self.transaction():
            self.db.execute("INSERT INTO queue (seq, key, record) SELECT seq, key, record "
                            "FROM leases")  # fmt: skip
            self.db.execute("DELETE FROM leases")

    def __len__(self) -> int:
        """Entries queued or in flight."""
        row = self.db.execute(
            "SELECT (SELECT count(*) FROM queue) + (SELECT count(*) FROM leases)"
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self.db.close()


class SqliteNormal(Contender):
    """A page: pop (its own commit: the lease), then one transaction that reports it and
    pushes its links. It queues URL strings: the string is its dedup key and its request
    object. At startup a user's code puts the leases of a dead run back (``recover``)."""

    key = "sqlite-normal"
    synchronous = "NORMAL"
    label = "SQLite WAL, synchronous=NORMAL, hand-written frontier + seen table"
    note = "pop (commit), then report + 10 pushes in one transaction"

    def open(self, path: str) -> None:
        self.f = SqliteFrontier(os.path.join(path, DB_FILE), self.synchronous)

    def _pop(self) -> str:
        popped = self.f.pop()
        if popped is None:
            raise RuntimeError("sqlite: the queue is empty")
        return str(popped[1])

    def seed(self, urls: Sequence[str]) -> None:
        with self.f.transaction():
            for u in urls:
                self.f.push(u, u)

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        f = self.f
        pop, report, push, transaction = self._pop, f.report, f.push, f.transaction
        popped, acked = probe.popped, probe.acked
        for i in range(pages):
            url = pop()
            popped(url)
            with transaction():
                report(url)
                for u in links_of(i):
                    push(u, u)
            acked(i, url)

    def push(self, urls: Sequence[str], batch: int) -> None:
        f = self.f
        for i in range(0, len(urls), batch):
            with f.transaction():
                for u in urls[i : i + batch]:
                    f.push(u, u)

    def pop_report(self, k: int, batch: int) -> None:
        f, pop = self.f, self._pop
        for i in range(0, k, batch):
            with f.transaction():
                for _ in range(min(batch, k - i)):
                    f.report(pop())

    def close(self) -> None:
        self.f.close()

    def recover(self, path: str) -> Recovered:
        f = SqliteFrontier(os.path.join(path, DB_FILE), self.synchronous)
        f.requeue_leases()
        queued = {str(row[0]) for row in f.db.execute("SELECT record FROM queue")}

        def known(url: str) -> bool:
            row = f.db.execute("SELECT 1 FROM seen WHERE key = ?", (url,)).fetchone()
            return url in queued or row is not None

        return Recovered(queued, known)


class SqliteFull(SqliteNormal):
    key = "sqlite-full"
    synchronous = "FULL"
    label = "SQLite WAL, synchronous=FULL, hand-written frontier + seen table"
    syncs = True
