"""Clocks: every time-dependent part of crawlstore takes one, so tests never sleep."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["Clock", "ManualClock", "SyncedClock", "system_clock"]

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


class SyncedClock:
    """Epoch seconds as ``reference`` (a server's clock, shared by every client of a store)
    tells them, read off this machine's clock: ``local`` plus the offset between the two,
    measured at the first call and again every ``every`` seconds, at the midpoint of the
    reference's call: of ``samples`` calls, the one with the shortest round trip (a call that
    a pause of this process or a slow reply stretched says least). Clients of one store then
    agree on the time to within half a round trip and what their clocks drift in ``every``
    seconds, whatever their own clocks say. It never goes back. When a measurement fails, the
    last offset stays in use (a first one raises)."""

    def __init__(self, reference: Clock, *, local: Clock = time.time, every: float = 30.0,
                 samples: int = 3) -> None:  # fmt: skip
        self._reference = reference
        self._local = local
        self.every = every
        self.samples = max(1, samples)
        #: Seconds to add to ``local``; and half the round trip it was measured in.
        self.offset = 0.0
        self.uncertainty = math.inf
        self._measured_at = -math.inf
        self._last = -math.inf
        self._lock = threading.Lock()

    def measure(self) -> float:
        """Measure the offset now; the new offset."""
        readings = []
        end = self._local()
        for _ in range(self.samples):
            before = self._local()
            at = self._reference()
            end = self._local()
            readings.append((max(0.0, end - before), before, at))
        trip, before, at = min(readings)
        with self._lock:
            self.offset = at - (before + trip / 2)
            self.uncertainty = trip / 2
            self._measured_at = end
            return self.offset

    def __call__(self) -> float:
        local = self._local()
        if local - self._measured_at >= self.every or local < self._measured_at:
            try:
                self.measure()
            except Exception:
                if self.uncertainty == math.inf:
                    raise  # never measured: no time to give
                self._measured_at = local  # the last offset, until the next measurement
            local = self._local()
        with self._lock:
            self._last = max(self._last, local + self.offset)
            return self._last
