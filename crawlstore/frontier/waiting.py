"""Helpers that wait through ``Wait`` until a seed is ready, the crawl is over, or a stop."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..seed import Seed
from .protocol import Ready, Wait

if TYPE_CHECKING:
    from .base import Frontier

__all__ = ["anext_seed", "next_seed"]


def _step(frontier: Frontier, deadline: float | None, poll: float) -> Seed | float | None:
    """Pop once: a seed, or how long to wait before trying again, or None when finished.

    ``Empty`` while seeds are in flight is not the end: their reports may bring new links or
    retries, so the caller polls until nothing is in flight either.
    """
    popped = frontier.pop()
    if isinstance(popped, Ready):
        return popped.seed
    now = frontier.clock()
    if isinstance(popped, Wait):
        delay = popped.until - now
    elif frontier.stats().in_flight:
        delay = poll
    else:
        return None
    if deadline is not None:
        if now >= deadline:
            return None
        delay = min(delay, deadline - now)
    return max(0.0, min(delay, poll))


def next_seed(
    frontier: Frontier,
    *,
    timeout: float | None = None,
    stop: threading.Event | None = None,
    sleep: Callable[[float], Any] | None = None,
    poll: float = 1.0,
) -> Seed | None:
    """Block until a seed is ready and return it (it is in flight).

    Returns ``None`` when nothing is queued, scheduled or in flight, when ``timeout`` seconds
    (on the frontier's clock) have passed, or once ``stop`` is set. Waits at most ``poll``
    seconds between pops, so seeds pushed meanwhile by others are picked up.
    """
    deadline = None if timeout is None else frontier.clock() + timeout
    while stop is None or not stop.is_set():
        step = _step(frontier, deadline, poll)
        if not isinstance(step, float):
            return step
        if sleep is not None:
            sleep(step)
        elif stop is not None:
            stop.wait(step)
        else:
            time.sleep(step)
    return None


async def anext_seed(
    frontier: Frontier,
    *,
    timeout: float | None = None,
    stop: asyncio.Event | None = None,
    sleep: Callable[[float], Any] | None = None,
    poll: float = 1.0,
) -> Seed | None:
    """The asyncio twin of ``next_seed``; ``sleep`` must then return an awaitable."""
    deadline = None if timeout is None else frontier.clock() + timeout
    while stop is None or not stop.is_set():
        step = _step(frontier, deadline, poll)
        if not isinstance(step, float):
            return step
        if sleep is not None:
            await sleep(step)
        elif stop is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), step)
        else:
            await asyncio.sleep(step)
    return None
