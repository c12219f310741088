"""The hand-written SQLite frontier with host queues: what a careful user writes to get per-host
FIFO queues served round robin, dedup and leases from SQLite, in about 60 lines.

WAL; one connection in autocommit mode with explicit ``BEGIN IMMEDIATE`` transactions; cached
statements; a 64 MiB page cache. Tables:

- ``urls``: a URL's row, ``(host, seq)`` its key (``WITHOUT ROWID``: a host's queue is one key
  range, in push order), and a lease column (0 queued, 1 in flight);
- ``seen``: every URL ever admitted, the dedup table;
- ``ring``: the hosts with queued URLs, each with its turn (a counter: the smallest turn is
  served next, and a host served goes to the back) and how many it has queued.

A lease takes up to ``k`` hosts by turn, the first queued URL of each (one transaction); a
page's report deletes its row and its links go through ``seen`` (one transaction). No
politeness delay, canonical form, counters, lease expiry or URL states: less than crawlstore
does."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from urllib.parse import urlsplit

from . import NULL_PROBE, Contender, LinksOf, Probe, Recovered

DB_FILE = "hosts.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS urls (
    host TEXT NOT NULL, seq INTEGER NOT NULL, url TEXT NOT NULL, leased INTEGER NOT NULL,
    PRIMARY KEY (host, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS seen (url TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ring (host TEXT PRIMARY KEY, turn INTEGER NOT NULL,
                                 queued INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS ring_turn ON ring (turn);
"""
#: Pages leased at once, one of each host.
LEASE = 64


class SqliteHosts:
    """Per-host FIFO queues served round robin, a seen table and leases, in one SQLite file."""

    def __init__(self, path: str, synchronous: str = "NORMAL") -> None:
        self.db = sqlite3.connect(path, isolation_level=None, cached_statements=64)
        for pragma in ("journal_mode=WAL", f"synchronous={synchronous}", "cache_size=-65536"):
            self.db.execute(f"PRAGMA {pragma}")
        self.db.executescript(SCHEMA)
        row = self.db.execute("SELECT max(seq), (SELECT max(turn) FROM ring) FROM urls").fetchone()
        self.seq, self.turn = row[0] or 0, row[1] or 0

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def push(self, url: str) -> bool:
        """Queue ``url`` on its host's queue unless it was seen (inside a transaction)."""
        execute = self.db.execute
        if execute("INSERT OR IGNORE INTO seen VALUES (?)", (url,)).rowcount < 1:
            return False
        host, self.seq, self.turn = urlsplit(url).netloc, self.seq + 1, self.turn + 1
        execute("INSERT INTO urls VALUES (?, ?, ?, 0)", (host, self.seq, url))
        execute("INSERT INTO ring VALUES (?, ?, 1) ON CONFLICT (host) DO UPDATE SET "
                "queued = queued + 1", (host, self.turn))  # fmt: skip
        return True

    def lease(self, k: int) -> list[tuple[str, int, str]]:
        """Up to ``k`` queued URLs, one a host, hosts by turn: each now in flight."""
        out = []
        with self.transaction():
            execute = self.db.execute
            for host, queued in execute("SELECT host, queued FROM ring ORDER BY turn LIMIT ?",
                                        (k,)).fetchall():  # fmt: skip
                seq, url = execute("SELECT seq, url FROM urls WHERE host = ? AND leased = 0 "
                                   "ORDER BY seq LIMIT 1", (host,)).fetchone()  # fmt: skip
                execute("UPDATE urls SET leased = 1 WHERE host = ? AND seq = ?", (host, seq))
                if queued > 1:
                    self.turn += 1
                    execute("UPDATE ring SET turn = ?, queued = ? WHERE host = ?",
                            (self.turn, queued - 1, host))  # fmt: skip
                else:
                    execute("DELETE FROM ring WHERE host = ?", (host,))
                out.append((host, seq, url))
        return out

    def done(self, host: str, seq: int) -> None:
        """A leased URL's fetch ended (inside a transaction)."""
        self.db.execute("DELETE FROM urls WHERE host = ? AND seq = ?", (host, seq))

    def requeue_leases(self) -> None:
        """A user's startup code: the leases of a dead run go back to their queues."""
        with self.transaction():
            execute = self.db.execute
            for host, n in execute("SELECT host, count(*) FROM urls WHERE leased = 1 "
                                   "GROUP BY host").fetchall():  # fmt: skip
                self.turn += 1
                execute("INSERT INTO ring VALUES (?, ?, ?) ON CONFLICT (host) DO UPDATE SET "
                        "queued = queued + ?", (host, self.turn, n, n))  # fmt: skip
            execute("UPDATE urls SET leased = 0 WHERE leased = 1")

    def close(self) -> None:
        self.db.close()


class SqliteHostsNormal(Contender):
    """The crawl loop over ``SqliteHosts``: lease 64 (a transaction), then a transaction a page
    that deletes its row and pushes its links."""

    key = "sqlite-hosts-normal"
    synchronous = "NORMAL"
    label = "SQLite WAL, synchronous=NORMAL, hand-written host queues (round robin) + seen table"
    note = f"lease {LEASE} (commit), then report + 10 pushes a transaction a page"

    def open(self, path: str) -> None:
        self.f = SqliteHosts(os.path.join(path, DB_FILE), self.synchronous)

    def seed(self, urls: Sequence[str]) -> None:
        with self.f.transaction():
            for u in urls:
                self.f.push(u)

    def crawl(self, pages: int, links_of: LinksOf, probe: Probe = NULL_PROBE) -> None:
        f = self.f
        lease, done, push, transaction = f.lease, f.done, f.push, f.transaction
        popped, acked = probe.popped, probe.acked
        i = 0
        while i < pages:
            leased = lease(min(LEASE, pages - i))
            if not leased:
                raise RuntimeError("sqlite: the queue is empty")
            for _, _, url in leased:
                popped(url)
            for host, seq, url in leased:
                with transaction():
                    done(host, seq)
                    for u in links_of(i):
                        push(u)
                acked(i, url)
                i += 1

    def push(self, urls: Sequence[str], batch: int) -> None:
        f = self.f
        for i in range(0, len(urls), batch):
            with f.transaction():
                for u in urls[i : i + batch]:
                    f.push(u)

    def pop_report(self, k: int, batch: int) -> None:
        f, got = self.f, 0
        while got < k:
            leased = f.lease(min(LEASE, batch, k - got))
            if not leased:
                raise RuntimeError("sqlite: the queue is empty")
            for start in range(0, len(leased), batch):
                with f.transaction():
                    for host, seq, _ in leased[start : start + batch]:
                        f.done(host, seq)
            got += len(leased)

    def close(self) -> None:
        self.f.close()

    def recover(self, path: str) -> Recovered:
        f = SqliteHosts(os.path.join(path, DB_FILE), self.synchronous)
        f.requeue_leases()
        queued = {str(row[0]) for row in f.db.execute("SELECT url FROM urls")}

        def known(url: str) -> bool:
            return f.db.execute("SELECT 1 FROM seen WHERE url = ?", (url,)).fetchone() is not None

        return Recovered(queued, known)


class SqliteHostsFull(SqliteHostsNormal):
    key = "sqlite-hosts-full"
    synchronous = "FULL"
    label = "SQLite WAL, synchronous=FULL, hand-written host queues (round robin) + seen table"
    syncs = True
