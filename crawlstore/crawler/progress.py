"""What a running crawl shows: a live rich table on a terminal, or a log line every few
seconds (``quiet``, or output that is no terminal)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

__all__ = ["Counts", "Progress"]


@dataclass
class Counts:
    """What this run did so far (the store's counters say what the crawl did in all)."""

    fetched: int = 0
    done: int = 0
    unchanged: int = 0
    redirects: int = 0
    retries: int = 0
    failed: int = 0
    robots: int = 0
    errors: int = 0  # timeouts and connection errors (retried)
    cancelled: int = 0
    started: float = field(default_factory=time.monotonic)

    def rate(self) -> float:
        return self.fetched / max(time.monotonic() - self.started, 1e-9)


class Progress:
    """Shows ``Counts`` and the crawl's queued and in-flight totals while a crawl runs."""

    def __init__(self, *, live: bool, stream: TextIO | None = None, every: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.every = every
        self._last = 0.0
        self._live: Any = None
        if live:
            try:
                from rich.live import Live
            except ImportError:  # no rich: log lines
                pass
            else:
                self._live = Live(self._table(Counts(), 0, 0), refresh_per_second=4,
                                  transient=False)  # fmt: skip
                self._live.start()

    def show(self, counts: Counts, queued: int, in_flight: int) -> None:
        if self._live is not None:
            self._live.update(self._table(counts, queued, in_flight))
        elif time.monotonic() - self._last >= self.every:
            self._last = time.monotonic()
            print(self.line(counts, queued, in_flight), file=self.stream, flush=True)

    def close(self, counts: Counts, queued: int, in_flight: int) -> None:
        if self._live is not None:
            self._live.update(self._table(counts, queued, in_flight))
            self._live.stop()
        else:
            print(self.line(counts, queued, in_flight), file=self.stream, flush=True)

    @staticmethod
    def line(counts: Counts, queued: int, in_flight: int) -> str:
        c = counts
        return (f"crawl: {c.fetched} fetched ({c.rate():.1f}/s), {c.done} done, "
                f"{c.unchanged} unchanged, {queued} queued, {in_flight} in flight, "
                f"{c.retries} retries, {c.failed} failed, {c.errors} errors")  # fmt: skip

    @staticmethod
    def _table(counts: Counts, queued: int, in_flight: int) -> Any:
        from rich.table import Table

        table = Table(title="crawlstore crawl", show_header=False, min_width=40)
        rows = [("pages fetched", f"{counts.fetched}  ({counts.rate():.1f}/s)"),
                ("done", counts.done), ("unchanged (304)", counts.unchanged),
                ("queued", queued), ("in flight", in_flight), ("retries", counts.retries),
                ("failed", counts.failed), ("errors", counts.errors),
                ("refused by robots.txt", counts.robots)]  # fmt: skip
        for name, value in rows:
            table.add_row(name, str(value))
        return table
