"""The progress of a step of the demo: one line redrawn in place on a terminal; elsewhere (a
pipe, a log) a line at each quarter of the way."""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """``update(done)`` shows ``done`` of ``total`` (starting at ``done``); ``close()`` clears
    the line on a terminal, for the step's result."""

    def __init__(self, total: int, unit: str, *, done: int = 0, stream: TextIO | None = None):
        self.total, self.unit = total, unit
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty()
        self.quarter = self._quarter(done)

    def _quarter(self, done: int) -> int:
        return 4 * min(done, self.total) // max(self.total, 1)

    def update(self, done: int) -> None:
        text = f"   {done} of {self.total} {self.unit}"
        if self.live:
            self.stream.write(f"\r{text}\x1b[K")
        elif (quarter := self._quarter(done)) > self.quarter and quarter < 4:
            self.quarter = quarter
            self.stream.write(f"{text}\n")
        else:
            return
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
