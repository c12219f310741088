"""Clocks: every time-dependent part of crawlstore takes one, so tests never sleep."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock", "ManualClock", "system_clock"]

#: A callable returning the current time in epoch seconds.
Clock = Callable[[], float]

system_clock: Clock = time.time


class ManualClock:
    """A clock that moves only when told to: for tests and simulations."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = float(now)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward."""
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        """A drop-in for ``time.sleep`` that advances this clock instead of waiting."""
        self.now += max(0.0, seconds)

    async def async_sleep(self, seconds: float) -> None:
        """A drop-in for ``asyncio.sleep`` that advances this clock instead of waiting."""
        self.now += max(0.0, seconds)
