"""Group commit for the service: one thread runs every write of every call, as many as are
waiting in one transaction, and answers each only after that transaction has committed."""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from ..errors import TransactionConflict

_T = TypeVar("_T")
log = logging.getLogger("crawlstore.urlfrontier")

#: A write: ``run`` inside the transaction, then ``done(result, error)`` once it committed
#: (or failed).
Job = tuple[Callable[[], Any], Callable[[Any, BaseException | None], None]]

_STOP: Any = object()
#: Times a group whose transaction conflicted (a store in partitions on Redis: nothing was
#: written) is written again before its jobs fail.
_CONFLICTS = 200


class Committer:
    """Writes, grouped: each transaction holds the jobs waiting when it starts, up to
    ``group``. A job that raises fails alone: the group is written again without it; a group
    whose transaction conflicted is written again whole."""

    def __init__(
        self,
        transaction: Callable[[], Any],
        *,
        group: int = 512,
        name: str = "urlfrontier-writer",
    ) -> None:
        self._transaction = transaction
        self._group = group
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._closed = False
        self._thread.start()

    def submit(
        self, run: Callable[[], Any], done: Callable[[Any, BaseException | None], None]
    ) -> None:
        if self._closed:
            done(None, RuntimeError("the service is shutting down"))
            return
        self._jobs.put((run, done))

    def call(self, run: Callable[[], _T]) -> _T:
        """Run ``run`` in the next group and wait for its commit; its result, or its error."""
        future: Future[_T] = Future()

        def done(result: Any, error: BaseException | None) -> None:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        self.submit(run, done)
        return future.result()

    def close(self) -> None:
        """Write what was submitted, then stop."""
        if not self._closed:
            self._closed = True
            self._jobs.put(_STOP)
            self._thread.join()

    def _loop(self) -> None:
        while True:
            first = self._jobs.get()
            if first is _STOP:
                return
            jobs: list[Job] = [first]
            stop = False
            while len(jobs) < self._group:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                if job is _STOP:
                    stop = True
                    break
                jobs.append(job)
            self._write(jobs)
            if stop:
                return

    def _write(self, jobs: list[Job]) -> None:
        pause = 0.0005
        for attempt in range(_CONFLICTS):
            results: list[Any] = []
            failed: int | None = None
            try:
                with self._transaction():
                    for i, (run, _) in enumerate(jobs):
                        failed = i
                        results.append(run())
                    failed = None
            except TransactionConflict as exc:  # nothing was written: the group again
                if attempt + 1 < _CONFLICTS:
                    time.sleep(random.uniform(0, pause))
                    pause = min(pause * 2, 0.05)
                    continue
                self._failed(jobs, None, exc)
                return
            except BaseException as exc:
                self._failed(jobs, failed, exc)
                return
            for (_, done), result in zip(jobs, results, strict=True):
                done(result, None)
            return

    def _failed(self, jobs: list[Job], failed: int | None, exc: BaseException) -> None:
        """A group that did not commit: job ``failed`` raised (None: the commit did)."""
        if len(jobs) == 1:
            jobs[0][1](None, exc)
            return
        if failed is None:  # the commit itself failed: every job on its own
            for job in jobs:
                self._write([job])
            return
        log.debug("a write failed in a group; writing the group again without it")
        jobs[failed][1](None, exc)
        for part in (jobs[:failed], jobs[failed + 1 :]):
            if part:
                self._write(part)
