"""``Revisits``: the revisit facade. It goes first in a chain, on the frontier itself, which
keeps the schedule."""

from __future__ import annotations

from ..revisit import Adapt, Revisit
from ..seed import Seed
from .base import Frontier, register_facades
from .facades import Facade
from .protocol import Done, Empty, Failed, Pop, Report, Retry, Wait, check_report

__all__ = ["Revisits"]


class Revisits(Facade):
    """Schedules a page again when it is reported ``Done`` or ``Failed`` (or a ``Retry`` that no
    retry facade took) and its tag has an interval; ``Skipped`` and ``Cancelled`` are not.

    One revisit per page: a new schedule replaces the old one. Revisits come out of the storage
    like queued seeds, so facades above apply to them, and dedup never sees them. While only
    revisits remain, ``pop`` says ``Wait(next due)``: a revisiting crawl never runs out of work.
    """

    def __init__(self, inner: Frontier, intervals: Revisit, adapt: Adapt | None = None) -> None:
        if isinstance(inner, Facade):
            raise TypeError(
                f"revisit() goes first in the chain, on the frontier that keeps the schedule; it "
                f"was put on "
                f"{type(inner).__name__}. Chain it first: InMemFrontier.fifo().revisit(Page)"
                ".dedup() or store.frontier().revisit(Page).dedup_with(store.seen())"
            )
        if not isinstance(intervals, Revisit):
            raise TypeError(
                f"revisit() takes a RevisitTags enum or an object with interval(tag): {intervals!r}"
            )
        super().__init__(inner)
        self.intervals = intervals
        self.adapt = adapt
        self.pages = self.core.state("revisit") if adapt is not None else None

    def interval_of(self, seed: Seed, report: Report) -> float | None:
        """Seconds until ``seed`` is crawled again after ``report``; None: not again. With
        ``adapt``, the tag's interval times the page's factor, updated by this visit."""
        interval = self.intervals.interval(seed.tag)
        if interval is None or self.adapt is None or self.pages is None:
            return interval
        key = seed.fingerprint.hex()
        factor, last_hash = self.pages.get(key, (1.0, None))
        changed: bool | None = None  # None: this visit cannot tell (a failure, no evidence)
        content_hash = None
        if isinstance(report, Done):
            content_hash = report.content_hash
            if report.unchanged is not None:
                changed = not report.unchanged
            elif content_hash is not None and last_hash is not None:
                changed = content_hash != last_hash
        factor = self.adapt.next_factor(factor, changed)
        self.pages[key] = (factor, content_hash or last_hash)
        return interval * factor

    def report(self, report: Report) -> None:
        check_report(report)
        if not isinstance(report, (Done, Failed, Retry)):
            self.inner.report(report)
            return

        def write() -> None:
            interval = self.interval_of(report.seed, report)
            if interval is None:
                self.inner.report(report)
                return
            self.inner.report(report)
            self.core.schedule(report.seed.with_attempt(1), self.clock() + interval, kind="revisit")

        self.inner.atomic(write)

    def pop(self) -> Pop:
        popped = self.inner.pop()
        if popped is Empty:
            due = self.core.next_revisit()
            if due is not None:
                return Wait(due)
        return popped


register_facades(Revisits)
