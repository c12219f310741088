"""Group commit for a crawl loop with many pages in flight: ``Worker`` and ``AsyncWorker``.

A worker owns one writer thread. Callers (threads, or asyncio tasks) ask it for seeds and hand
it their pages' *units*: a report, the links found, and anything else to write with them. The
writer runs every unit waiting in one transaction of the frontier, and commits them together:
one commit, and in the store's default durability one fsync, for the group. A caller learns its
unit is durable when its future resolves (``Worker``) or its ``await`` returns
(``AsyncWorker``); what a unit returns (the links' admissions) arrives then too.

Each unit stays atomic: one that raises is rolled back alone (the group is run again without
it) and its caller gets the exception. A group whose commit conflicts with another client's (a
store that commits optimistically: Redis in partitions) wrote nothing, and runs again whole.
Seeds are leased ahead (``prefetch``), through the frontier's own ``pop_many``, so politeness
holds: a prefetched seed counts as popped for its queue's delay and in-flight cap. A killed
process loses only the units not yet committed; the seeds of those pages come back through
their leases.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import operator
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..errors import InvalidArgument, StoreError, StoreFull, TransactionConflict
from ..seed import Seed
from .protocol import Admission, Backoff, Cancelled, Ready, Report, Wait, check_limit, check_report

if TYPE_CHECKING:
    from ..url import Fingerprint
    from ..validators import Validator, Validators
    from .base import Frontier

__all__ = ["AsyncWorker", "Worker"]

_T = TypeVar("_T")
log = logging.getLogger("crawlstore.worker")

#: A group whose commit conflicts with another client's (a store that commits optimistically)
#: runs again after a random pause of up to ``_PAUSE`` seconds, doubling to ``_MAX_PAUSE``;
#: after ``_CONFLICTS`` conflicts in a row its callers get a ``StoreError``.
_PAUSE, _MAX_PAUSE, _CONFLICTS = 0.0005, 0.05, 200


def _checked(function: Callable[[], _T]) -> Callable[[], _T]:
    if not callable(function):
        raise TypeError(f"submit() takes a function of no arguments: {function!r}")
    return function


def _token(ready: Ready) -> bytes:
    lease = ready.lease
    assert lease is not None  # every seed a frontier hands out carries its lease
    return lease.token


class _Unfused(Exception):
    """A fused group of pages failed: it rolls back and runs again one unit at a time."""


def _segments(units: list[_Unit[Any]]) -> list[list[_Unit[Any]]] | None:
    """A group of pages cut into runs of consecutive pages, each of which can be written as one
    batch of reports and one of links with the admissions, URL states and counters of writing
    its pages one by one; None unless every unit is a page's. A run ends before a page whose
    seed an earlier page of the run links to: one by one, that link finds the seed still in
    flight (a link to a seed reported earlier, or by its own page, finds it finished either
    way). What may differ is the order in which queues ready at the same moment come up next:
    a run places the queues of its reports before those its links make ready."""
    if len(units) < 2 or not all(unit.page is not None for unit in units):
        return None
    runs: list[list[_Unit[Any]]] = [[]]
    linked: set[bytes] = set()
    for unit in units:
        page = unit.page
        assert page is not None
        if page.fp in linked:
            runs.append([])
            linked.clear()
        runs[-1].append(unit)
        linked.update(map(_FINGERPRINT, page.links))
    return runs


_FINGERPRINT = operator.attrgetter("fingerprint")


class _Failed(Exception):
    """A unit raised inside a group: the group rolls back and runs again without it."""

    def __init__(self, unit: _Unit[Any], exc: BaseException) -> None:
        self.unit, self.exc = unit, exc


class _Posted:
    """The result of an asyncio caller's future, set in its event loop: the writer posts the
    results of a whole group to a loop in one call (one wake-up of the loop, not one a unit)."""

    __slots__ = ("future", "loop", "outbox")

    def __init__(self, outbox: _Outbox) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.loop.create_future()
        self.outbox = outbox

    def set_running_or_notify_cancel(self) -> bool:
        return not self.future.cancelled()

    def set_result(self, value: Any) -> None:
        self.outbox.post(self, value, None)

    def set_exception(self, exc: BaseException) -> None:
        self.outbox.post(self, None, exc)


class _Outbox:
    """Results for asyncio callers, gathered under the worker's lock and posted per loop."""

    def __init__(self, give_back: Callable[[Ready | None], None]) -> None:
        self._items: dict[asyncio.AbstractEventLoop, list[tuple[_Posted, Any, Any]]] = {}
        self._give_back = give_back
        self._lock = threading.Lock()

    def post(self, slot: _Posted, value: Any, exc: BaseException | None) -> None:
        with self._lock:
            self._items.setdefault(slot.loop, []).append((slot, value, exc))

    def send(self) -> None:
        """Post what was gathered (call it without the worker's lock)."""
        if not self._items:
            return
        with self._lock:
            items, self._items = self._items, {}
        for loop, batch in items.items():
            try:
                loop.call_soon_threadsafe(self._settle, batch)
            except RuntimeError:  # the loop closed: its callers are gone
                for _, value, _ in batch:
                    if isinstance(value, Ready):
                        self._give_back(value)

    def _settle(self, batch: list[tuple[_Posted, Any, Any]]) -> None:
        for slot, value, exc in batch:
            if slot.future.cancelled():
                if isinstance(value, Ready):
                    self._give_back(value)  # its task stopped waiting: the seed is not its
            elif exc is not None:
                slot.future.set_exception(exc)
            else:
                slot.future.set_result(value)


class _Page:
    """What a page's unit writes: its report, its links, its validator."""

    __slots__ = ("fp", "links", "report", "validator")

    def __init__(
        self, report: Report, fp: Fingerprint, links: list[Seed], validator: Validator | None
    ) -> None:
        self.report, self.fp, self.links, self.validator = report, fp, links, validator


class _Unit(Generic[_T]):
    __slots__ = ("future", "page", "run", "token")

    def __init__(
        self, run: Callable[[], _T], token: bytes | None, future: Any, page: _Page | None = None
    ) -> None:
        self.run = run
        self.future: Future[_T] | _Posted = future
        self.token = token  # the lease of a seed this worker handed out, which the unit ends
        self.page = page  # a page's unit (finish), which a group may run fused with others


class Worker:
    """Group commit over a frontier (``frontier.worker()``): thread-safe, and a context manager.

    - ``next()`` hands out a leased seed (``Ready``), or None once the crawl has nothing left
      and nothing in flight; ``for ready in worker`` loops until then. With ``idle`` (seconds),
      also once nothing is in flight and the next seed is due more than ``idle`` seconds
      from now: one pass of a crawl that revisits, whose later seeds wait for the next run.
    - ``finish(report, links)`` queues the page's unit: the report and the push of its links;
      the future resolves to the links' admissions once the unit is committed.
    - ``submit(function)`` queues any unit (validators, facade state): ``function()`` runs in
      the group's transaction on the writer thread, and must not block.

    ``prefetch`` is how many seeds the worker holds at most, handed out or waiting; ``group``
    caps the units of one commit; ``linger`` is how long (real seconds) a group waits for the
    units of other callers holding seeds, so that more pages share its commit. ``poll`` is
    the longest the writer waits (real seconds) before it looks at the frontier again;
    ``wake()`` makes it look now (a test that moves a ``ManualClock`` calls it). ``close()``
    (the end of ``with``) commits what is queued and gives the seeds never handed out back to
    the front of their queues (as ``Cancelled``); seeds handed out and not finished keep their
    leases. ``notify``, when given, is called on the writer thread when it has leased seeds
    ahead that no caller waits for (a caller that polls with ``try_next`` can look again).
    """

    def __init__(
        self,
        frontier: Frontier,
        *,
        prefetch: int = 64,
        group: int = 256,
        lease_time: float | None = None,
        poll: float = 1.0,
        linger: float = 0.002,
        validators: Validators | None = None,
        idle: float | None = None,
        notify: Callable[[], None] | None = None,
    ) -> None:
        check_limit(prefetch)
        check_limit(group)
        if prefetch < 1 or group < 1:
            raise InvalidArgument(f"prefetch and group must be at least 1: {prefetch}, {group}")
        if poll <= 0:
            raise InvalidArgument(f"poll must be more than 0 seconds: {poll}")
        if not 0 <= linger <= 1:
            raise InvalidArgument(f"linger is 0 to 1 second: {linger}")
        if idle is not None and not idle >= 0:
            raise InvalidArgument(f"idle is None or at least 0 seconds: {idle}")
        self.idle = idle
        self._notify = notify
        self.frontier = frontier
        self.prefetch, self.group, self.poll, self.linger = prefetch, group, poll, linger
        self._lease_time = lease_time
        self.validators = validators
        self._cond = threading.Condition()
        self._units: collections.deque[_Unit[Any]] = collections.deque()
        self._ready: collections.deque[Ready] = collections.deque()
        self._waiters: collections.deque[Future[Ready | None] | _Posted] = collections.deque()
        self._outbox = _Outbox(self._give_back)
        self._held: set[bytes] = set()  # lease tokens handed out, not yet finished
        #: The stored validators of seeds leased ahead, by lease token (``stored_validator``).
        self._stored: dict[bytes, Validator] = {}
        self._finished = False  # the frontier said Empty, nothing in flight: until a unit
        self._polled = False  # try_next() was called: keep seeds leased ahead without waiters
        self._wait_until: float | None = None
        self._closing = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True, name="crawlstore-writer")
        self._thread.start()

    # -- callers --------------------------------------------------------------------------------

    def next_future(self) -> Future[Ready | None]:
        """A future of the next seed (``Ready``), or of None once the crawl is finished."""
        future: Future[Ready | None] = Future()
        self._wait_for_seed(future)
        return future

    def _wait_for_seed(self, slot: Future[Ready | None] | _Posted) -> None:
        with self._cond:
            self._check_open()
            if self._ready and not self._waiters:
                ready = self._ready.popleft()
                self._held.add(_token(ready))
                slot.set_result(ready)
            elif self._finished and not self._units and not self._held and not self._ready:
                slot.set_result(None)
            else:
                self._waiters.append(slot)
                self._cond.notify()
        self._outbox.send()

    def next(self, timeout: float | None = None) -> Ready | None:
        """Block until a seed is leased to this caller (``Ready``); None once the crawl has
        nothing queued and nothing in flight. ``TimeoutError`` after ``timeout`` seconds."""
        future = self.next_future()
        try:
            return future.result(timeout)
        except FutureTimeout:
            if not future.cancel() and future.exception() is None:
                self._give_back(future.result())
            raise

    def __iter__(self) -> Iterator[Ready]:
        while (ready := self.next()) is not None:
            yield ready

    def try_next(self) -> Ready | None:
        """A seed leased ahead, at once, or None when the worker holds none now; never
        waits. Once called, the worker keeps ``prefetch`` seeds leased ahead for the next polls
        (for callers that must not block, such as a Scrapy scheduler on the reactor thread)."""
        with self._cond:
            self._check_open()
            if self._error is not None:
                raise self._error
            self._polled = True
            ready = self._ready.popleft() if self._ready and not self._waiters else None
            if ready is not None:
                self._held.add(_token(ready))
            self._cond.notify()
        return ready

    def stored_validator(self, ready: Ready) -> Validator | None:
        """The validator stored for ``ready``'s page when this worker leased it (read in the
        lease's transaction, on the writer thread), when the worker has ``validators``: a
        caller that must not read the store, such as a Scrapy scheduler on the reactor
        thread, makes its conditional request from it. Once a seed: a second call, or one
        for a seed the worker did not lease, gives None."""
        with self._cond:
            return self._stored.pop(_token(ready), None)

    @property
    def ahead(self) -> int:
        """How many seeds the worker holds leased ahead, not handed out yet."""
        with self._cond:
            return len(self._ready)

    @property
    def finished(self) -> bool:
        """Whether the crawl has nothing left: nothing queued, nothing in flight, nothing held
        here, no unit waiting (as far as the writer last looked)."""
        with self._cond:
            return self._finished and not (self._units or self._held or self._ready)

    def finish(
        self, report: Report, links: Iterable[Seed] = (), *, validator: Validator | None = None
    ) -> Future[list[Admission]]:
        """Queue a page's unit: ``report``, the push of ``links`` and, when given, the page's
        ``validator`` (into the worker's ``validators``): one atomic unit, in the next group
        commit. The future resolves to the links' admissions once committed, or raises what
        the unit raised (nothing of it was written)."""
        run, token, page = self._page(report, links, validator)
        return self._queue(run, token, None, page)

    def _page(
        self, report: Report, links: Iterable[Seed], validator: Validator | None
    ) -> tuple[Callable[[], list[Admission]], bytes | None, _Page]:
        """A page's unit, the lease it ends, and what it writes."""
        check_report(report)
        if isinstance(report, Backoff):
            raise InvalidArgument(
                "finish() takes the report of a page (Done, Retry...), not Backoff"
            )
        page = _Page(report, report.seed.fingerprint, list(links), validator)
        if validator is not None and self.validators is None:
            raise InvalidArgument(
                "finish(validator=...) needs the worker's validators: "
                "frontier.worker(validators=store.validators())"
            )

        def unit() -> list[Admission]:
            return self._write_pages([page])[0]

        lease = report.seed.lease
        return unit, lease.token if lease is not None else None, page

    def _write_pages(self, pages: list[_Page]) -> list[list[Admission]]:
        """Write pages' units together: their reports in one batch, their validators, then
        their links in one batch; each page's admissions."""
        frontier, validators = self.frontier, self.validators
        frontier.report_many([page.report for page in pages])
        for page in pages:
            if page.validator is not None and validators is not None:
                validators.put(page.fp, page.validator)
        links = [seed for page in pages for seed in page.links]
        admissions = frontier.push_many(links) if links else []
        out, at = [], 0
        for page in pages:
            out.append(admissions[at : at + len(page.links)])
            at += len(page.links)
        return out

    def submit(self, function: Callable[[], _T]) -> Future[_T]:
        """Queue ``function()`` as a unit of its own, run in the next group's transaction on
        the writer thread; the future resolves to what it returns once committed."""
        return self._queue(_checked(function), None)

    def _queue(
        self,
        run: Callable[[], _T],
        token: bytes | None,
        slot: _Posted | None = None,
        page: _Page | None = None,
    ) -> Future[_T]:
        future: Any = slot if slot is not None else Future()
        unit = _Unit(run, token, future, page)
        with self._cond:
            self._check_open()
            self._units.append(unit)
            self._cond.notify()
        return future  # type: ignore[no-any-return]

    def wake(self) -> None:
        """Make the writer look at the frontier now (after a ``ManualClock`` moved, say)."""
        with self._cond:
            self._wait_until = None
            self._finished = False
            self._cond.notify()

    def _check_open(self) -> None:
        if self._error is not None:
            raise StoreError(f"the worker's writer stopped: {self._error!r}") from self._error
        if self._closing:
            raise StoreError("the worker is closed")

    def _give_back(self, ready: Ready | None) -> None:
        """A seed handed to a caller that stopped waiting: back to the front of the buffer."""
        if ready is not None:
            with self._cond:
                self._held.discard(_token(ready))
                self._ready.appendleft(ready)
                self._serve()
            self._outbox.send()

    # -- the writer -----------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._work():
                        if self._closing and not self._units:
                            return
                        self._cond.wait(self._timeout())
                    self._linger()
                    units = [
                        self._units.popleft() for _ in range(min(self.group, len(self._units)))
                    ]
                    finishing = sum(1 for unit in units if unit.token in self._held)
                    want = self._want(finishing) if not self._closing else 0
                self._commit(units, want)
        except BaseException as exc:  # the frontier or store failed: every caller hears it
            with self._cond:
                self._error = exc
                for unit in self._units:
                    unit.future.set_exception(exc)
                self._units.clear()
                for waiter in self._waiters:
                    waiter.set_exception(exc)
                self._waiters.clear()
        finally:
            self._outbox.send()
            self._give_back_all()

    def _linger(self) -> None:
        """Wait up to ``linger`` seconds for the units of more holders to join the group (one
        commit, one fsync, for more pages): only while callers hold seeds they have not
        finished, and the group has room."""
        if not self.linger or not self._units or self._closing:
            return
        deadline = time.monotonic() + self.linger
        while len(self._units) < min(len(self._held), self.group) and not self._closing:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _want(self, finishing: int = 0) -> int:
        """How many seeds to lease now: room under ``prefetch``, when a caller waits or, with
        ``finishing`` seeds whose units are about to be committed, will ask again."""
        if not (self._waiters or finishing or self._polled) or self._finished or self._closing:
            return 0
        if self._wait_until is not None and self.frontier.clock() < self._wait_until:
            return 0
        return max(0, self.prefetch - len(self._ready) - len(self._held) + finishing)

    def _over(self, wait: Wait) -> bool:
        """Whether the next seed is due later than ``idle`` allows: this pass is over."""
        return self.idle is not None and wait.until - self.frontier.clock() > self.idle

    def _work(self) -> bool:
        return bool(self._units) or self._want() > 0

    def _timeout(self) -> float | None:
        waiting = self._waiters or self._polled
        if not waiting or self._finished:
            return None if not waiting else self.poll
        if self._wait_until is None:
            return self.poll
        return max(0.0, min(self.poll, self._wait_until - self.frontier.clock()))

    def _commit(self, units: list[_Unit[Any]], want: int) -> None:
        frontier = self.frontier
        runs = _segments(units)
        grown = False
        conflicts, pause = 0, _PAUSE
        while True:
            results: list[tuple[_Unit[Any], Any]] = []
            got: list[Ready] = []
            stored: dict[bytes, Validator] = {}
            outlook: Any = None
            try:
                with frontier.transaction():
                    if runs is not None:  # pages only: a run's reports, then its links
                        try:
                            for run in runs:
                                pages = [unit.page for unit in run if unit.page is not None]
                                results += zip(run, self._write_pages(pages), strict=True)
                        except TransactionConflict:
                            raise  # the group's, not a page's
                        except Exception as exc:
                            raise _Unfused from exc
                    else:
                        for unit in units:
                            try:
                                results.append((unit, unit.run()))
                            except TransactionConflict:
                                raise  # the group's, not the unit's
                            except Exception as exc:
                                raise _Failed(unit, exc) from exc
                    if want:
                        got = frontier.pop_many(want, lease_time=self._lease_time)
                        if not got:
                            outlook = frontier.pop()
                            if isinstance(outlook, Ready):
                                got, outlook = [outlook], None
                            elif not isinstance(outlook, Wait) or self._over(outlook):
                                # Empty, or idle: unless in flight
                                quiet = frontier.stats().in_flight == 0
                                outlook = "empty" if quiet else Wait(frontier.clock() + self.poll)
                    stored = self._read_validators(got)
            except _Unfused:  # one of the pages fails: nothing was written; one unit at a time
                runs = None
                continue
            except _Failed as failed:  # nothing of the group was written: again, without it
                failed.unit.future.set_exception(failed.exc)
                units = [unit for unit in units if unit is not failed.unit]
                with self._cond:
                    if failed.unit.token is not None:
                        self._held.discard(failed.unit.token)
                continue
            except TransactionConflict as exc:  # another client's commit: nothing was written
                conflicts += 1
                if conflicts > _CONFLICTS:
                    self._fail_group(units, StoreError(
                        f"a group commit conflicted with other clients' {_CONFLICTS} times: "
                        f"{exc}"))  # fmt: skip
                    return
                time.sleep(random.uniform(0, pause))  # the group again, after a little while
                pause = min(pause * 2, _MAX_PAUSE)
                continue
            except StoreFull as exc:  # the group outgrew the map, which grew: once more
                if grown:
                    self._fail_group(units, exc)
                    return
                grown = True
                continue
            except Exception as exc:  # the store refused the group (closed, damaged)
                self._fail_group(units, exc)
                return
            break
        with self._cond:
            for unit, value in results:
                if unit.token is not None:
                    self._held.discard(unit.token)
                    self._stored.pop(unit.token, None)
                unit.future.set_result(value)
            self._stored.update(stored)
            if results:
                self._finished = False  # a unit may have pushed links: look again
                self._wait_until = None
            self._ready.extend(got)
            tell = bool(got) and self._notify is not None and not self._waiters
            if isinstance(outlook, Wait):
                self._wait_until = outlook.until
            elif outlook == "empty" and not self._units and not self._held and not self._ready:
                self._finished = True
            self._serve()
        self._outbox.send()
        if tell:
            self._notify()  # type: ignore[misc]

    def _read_validators(self, got: list[Ready]) -> dict[bytes, Validator]:
        """The stored validators of the seeds just leased, by lease token."""
        validators = self.validators
        if validators is None or not got:
            return {}
        found = ((_token(ready), validators.get(ready.seed.fingerprint)) for ready in got)
        return {token: validator for token, validator in found if validator is not None}

    def _fail_group(self, units: list[_Unit[Any]], exc: Exception) -> None:
        """The group's commit failed outside its units: nothing of it was written. Its
        callers, and those waiting for seeds, get the error; the writer goes on (a later
        group may commit: a map that grew, a disk with room again)."""
        log.warning("a group commit of %d units failed: %r", len(units), exc)
        with self._cond:
            for unit in units:
                if unit.token is not None:
                    self._held.discard(unit.token)
                unit.future.set_exception(exc)
            while self._waiters:
                waiter = self._waiters.popleft()
                if waiter.set_running_or_notify_cancel():
                    waiter.set_exception(exc)
        self._outbox.send()

    def _serve(self) -> None:
        """Hand buffered seeds to waiting callers; None to all once the crawl is finished."""
        while self._waiters and self._ready:
            waiter = self._waiters.popleft()
            ready = self._ready.popleft()
            if waiter.set_running_or_notify_cancel():
                self._held.add(_token(ready))
                waiter.set_result(ready)
            else:
                self._ready.appendleft(ready)
        if self._finished and not self._ready and not self._units and not self._held:
            while self._waiters:
                waiter = self._waiters.popleft()
                if waiter.set_running_or_notify_cancel():
                    waiter.set_result(None)

    def _give_back_all(self) -> None:
        """Seeds never handed out go back to the front of their queues."""
        with self._cond:
            left = list(self._ready)
            self._ready.clear()
        if left and self._error is None:
            try:
                self.frontier.report_many([Cancelled(ready.seed) for ready in left])
            except Exception:  # the store closed first, say: their leases bring them back
                log.warning("the worker could not give back %d prefetched seeds; they come "
                            "back when their leases expire", len(left), exc_info=True)  # fmt: skip

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Commit the units queued, give back the seeds never handed out, stop the writer."""
        with self._cond:
            self._closing = True
            for waiter in self._waiters:
                if waiter.set_running_or_notify_cancel():
                    waiter.set_result(None)
            self._waiters.clear()
            self._cond.notify()
        self._outbox.send()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def __enter__(self) -> Worker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Worker over {self.frontier!r}, prefetch={self.prefetch}>"


class AsyncWorker:
    """``Worker`` for asyncio (``frontier.async_worker()``): ``await next()``, ``async for``,
    ``await finish(...)``. The event loop never waits on a commit: every write runs on the
    writer thread, and the loop awaits its result, which arrives when the unit is committed."""

    def __init__(self, frontier: Frontier, **options: Any) -> None:
        self._worker = Worker(frontier, **options)

    @property
    def frontier(self) -> Frontier:
        return self._worker.frontier

    async def next(self) -> Ready | None:
        """The next seed leased to this task; None once the crawl is finished."""
        slot = _Posted(self._worker._outbox)
        self._worker._wait_for_seed(slot)
        result: Ready | None = await slot.future
        return result

    def __aiter__(self) -> AsyncIterator[Ready]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Ready]:
        while (ready := await self.next()) is not None:
            yield ready

    async def finish(
        self, report: Report, links: Iterable[Seed] = (), *, validator: Validator | None = None
    ) -> list[Admission]:
        """Queue the page's unit (``report``, its ``links``, its ``validator``) and wait until
        it is committed; the links' admissions."""
        slot = _Posted(self._worker._outbox)
        run, token, page = self._worker._page(report, links, validator)
        self._worker._queue(run, token, slot, page)
        result: list[Admission] = await slot.future
        return result

    async def submit(self, function: Callable[[], _T]) -> _T:
        """Run ``function()`` in the next group commit, on the writer thread; what it returned."""
        slot = _Posted(self._worker._outbox)
        self._worker._queue(_checked(function), None, slot)
        result: _T = await slot.future
        return result

    def wake(self) -> None:
        """Make the writer look at the frontier now (after a ``ManualClock`` moved, say)."""
        self._worker.wake()

    def stored_validator(self, ready: Ready) -> Validator | None:
        """``Worker.stored_validator``: the validator read with ``ready``'s lease, so that the
        event loop makes a conditional request without reading the store."""
        return self._worker.stored_validator(ready)

    async def aclose(self) -> None:
        """Commit the units queued and give back the seeds never handed out (``async with``)."""
        await asyncio.get_running_loop().run_in_executor(None, self._worker.close)

    async def __aenter__(self) -> AsyncWorker:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"<AsyncWorker over {self.frontier!r}, prefetch={self._worker.prefetch}>"
