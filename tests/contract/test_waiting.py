"""The blocking and asyncio waiting helpers, on an injected clock (no real sleeping)."""

from __future__ import annotations

import asyncio
import threading

from helpers import MakeFrontier, seed

from crawlstore import Done, ManualClock, Retry, RetryPolicy


def test_returns_a_ready_seed_at_once(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    f.push(seed("a"))
    got = f.next_seed(sleep=clock.sleep)
    assert got is not None and got.url.endswith("/a") and clock() == 1_700_000_000


def test_waits_through_wait_until_due(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    start = clock()
    f.core.schedule(seed("later"), start + 42)
    got = f.next_seed(sleep=clock.sleep)
    assert got is not None and clock() == start + 42


def test_returns_none_when_the_crawl_is_over(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier()
    assert f.next_seed(sleep=clock.sleep) is None


def test_empty_with_seeds_in_flight_keeps_waiting(
    make_frontier: MakeFrontier, clock: ManualClock
) -> None:
    f = make_frontier().retry_with(RetryPolicy(1, jitter=0))
    f.push(seed("a"))
    held = f.next_seed(sleep=clock.sleep)
    assert held is not None
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        clock.sleep(seconds)
        if len(sleeps) == 3:  # meanwhile another worker asks for a retry
            f.report(Retry(held))

    again = f.next_seed(sleep=sleep, poll=0.25)
    assert again is not None and again.attempt == 2
    assert sleeps[:3] == [0.25, 0.25, 0.25]


def test_timeout_on_the_frontier_clock(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    start = clock()
    f.core.schedule(seed("later"), start + 100)
    assert f.next_seed(timeout=10, sleep=clock.sleep) is None
    assert clock() == start + 10


def test_stop_event_ends_the_wait(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    f.core.schedule(seed("later"), clock() + 100)
    stop = threading.Event()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        stop.set()

    assert f.next_seed(stop=stop, sleep=sleep) is None
    f.push(seed("now"))
    assert f.next_seed(stop=stop) is None  # already stopped


def test_stop_wakes_a_real_wait(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    f.core.schedule(seed("later"), clock() + 3600)
    stop = threading.Event()
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(f.next_seed(stop=stop, poll=3600)))
    worker.start()
    stop.set()
    worker.join(timeout=10)
    assert not worker.is_alive() and result == [None]


def test_async_helper(make_frontier: MakeFrontier, clock: ManualClock) -> None:
    f = make_frontier()
    f.core.schedule(seed("later"), clock() + 5)

    async def main() -> None:
        got = await f.anext_seed(sleep=clock.async_sleep)
        assert got is not None
        f.report(Done(got))
        assert await f.anext_seed(sleep=clock.async_sleep) is None
        f.core.schedule(seed("much-later"), clock() + 500)
        assert await f.anext_seed(timeout=1, sleep=clock.async_sleep) is None
        stop = asyncio.Event()
        stop.set()
        assert await f.anext_seed(stop=stop) is None
        stop2 = asyncio.Event()
        task = asyncio.ensure_future(f.anext_seed(stop=stop2, poll=3600))
        await asyncio.sleep(0)
        stop2.set()
        assert await asyncio.wait_for(task, 10) is None

    asyncio.run(main())
