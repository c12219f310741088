"""``SyncedClock``: a server's time read off this machine's clock, through a measured offset."""

from __future__ import annotations

import pytest

from crawlstore import ManualClock, SyncedClock
from crawlstore.errors import StoreError

SAMPLES = 3  # SyncedClock's calls a measurement


class Server:
    """A reference clock ``ahead`` seconds from ``local``; each reading takes ``trip`` seconds
    of ``local``, the server reading at half of it."""

    def __init__(self, local: ManualClock, ahead: float, trip: float = 0.0) -> None:
        self.local, self.ahead, self.trip = local, ahead, trip
        self.calls = 0
        self.down = False
        #: Seconds the next call stalls before the server reads its clock (a pause).
        self.stall = 0.0

    @property
    def readings(self) -> int:
        """Measurements made (each of ``SAMPLES`` calls)."""
        return self.calls // SAMPLES

    def __call__(self) -> float:
        if self.down:
            raise StoreError("the server is gone")
        self.calls += 1
        self.local.advance(self.trip / 2 + self.stall)
        self.stall = 0.0
        at = self.local() + self.ahead
        self.local.advance(self.trip / 2)
        return at


def test_it_reads_the_server_time_off_the_local_clock() -> None:
    local = ManualClock(1000.0)
    server = Server(local, ahead=-60.0, trip=0.2)
    clock = SyncedClock(server, local=local, every=30)
    assert clock() == pytest.approx(local() - 60.0)
    assert clock.offset == pytest.approx(-60.0) and clock.uncertainty == pytest.approx(0.1)
    local.advance(10)
    assert clock() == pytest.approx(local() - 60.0) and server.readings == 1  # no round trip


def test_it_measures_again_every_interval_and_never_goes_back() -> None:
    local = ManualClock(1000.0)
    server = Server(local, ahead=5.0)
    clock = SyncedClock(server, local=local, every=30)
    first = clock()
    server.ahead = 3.0  # this machine's clock drifted 2 s ahead of the server's
    local.advance(29)
    assert clock() == pytest.approx(first + 29) and server.readings == 1
    local.advance(1)
    # measured again: the server's time is 28 s after the first reading, which would be back
    assert clock() == pytest.approx(first + 29)  # held, not back
    assert server.readings == 2 and clock.offset == pytest.approx(3.0)
    local.advance(3)
    assert clock() == pytest.approx(local() + 3.0) == pytest.approx(first + 31)


def test_a_failed_measurement_keeps_the_last_offset_and_a_first_one_raises() -> None:
    local = ManualClock(1000.0)
    server = Server(local, ahead=7.0)
    server.down = True
    clock = SyncedClock(server, local=local, every=30)
    with pytest.raises(StoreError):
        clock()
    server.down = False
    assert clock() == pytest.approx(local() + 7.0)
    server.down = True
    local.advance(45)
    assert clock() == pytest.approx(local() + 7.0)  # the server is gone: the last offset
    server.down, server.ahead = False, 8.0
    local.advance(29)
    assert clock() == pytest.approx(local() + 7.0)  # next measured 30 s after the failure
    local.advance(1)
    assert clock() == pytest.approx(local() + 8.0)


def test_a_local_clock_set_back_measures_again() -> None:
    local = ManualClock(1000.0)
    server = Server(local, ahead=0.0)
    clock = SyncedClock(server, local=local, every=30)
    before = clock()
    local.now -= 100  # someone set this machine's clock back: the server's did not move
    server.ahead = 100.0
    assert clock() == pytest.approx(before) and server.readings == 2


def test_a_reading_stretched_by_a_pause_is_outweighed() -> None:
    """A process stopped between its reading and the server's (SIGSTOP, a long GC) would
    put its clock half the pause ahead: of a measurement's calls, the shortest counts."""
    local = ManualClock(1000.0)
    server = Server(local, ahead=-2.0, trip=0.002)
    server.stall = 0.8
    clock = SyncedClock(server, local=local, every=30)
    assert clock() == pytest.approx(local() - 2.0, abs=0.002)
    assert clock.uncertainty == pytest.approx(0.001)
    one = SyncedClock(Server(local, ahead=-2.0, trip=0.002), local=local, samples=1)
    one._reference.stall = 0.8  # type: ignore[attr-defined]
    assert one() == pytest.approx(local() - 2.0 + 0.4, abs=0.002)  # (what one call gives)
