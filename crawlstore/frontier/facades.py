"""Facades: policy wrapped around any frontier. Each keeps its state in the storage below it.

Order matters, since a push flows from the outermost facade (the last one chained) inwards:

    InMemFrontier.fifo().dedup().allow_hosts([...]).max_depth(5).retry(3).tag_backoff()

Scope and depth filters refuse before the seed reaches ``dedup`` either way, because ``Dedup``
records a fingerprint only once the frontier under it admitted the seed: a seed refused further
in is never burnt.
"""

from __future__ import annotations

import contextlib
import operator
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..seed import PRIORITY_MAX, PRIORITY_MIN, Seed, tag_name
from ..seen import SeenSet, contains_many, insert_many
from ..url import parse_http_url
from .base import Frontier, register_facades
from .protocol import (
    Admission,
    Backoff,
    Failed,
    Pop,
    Ready,
    Reason,
    Report,
    Reschedule,
    Retry,
    check_limit,
    check_seed,
    check_seeds,
)

if TYPE_CHECKING:
    from .core import CoreFrontier

__all__ = [
    "AllowHosts",
    "Dedup",
    "Facade",
    "Filter",
    "MaxDepth",
    "RetryFacade",
    "RetryPolicy",
    "Scored",
    "TagBackoff",
]


#: Methods a facade hands to its inner frontier when it overrides none of ``needs``; the
#: batch calls of a facade that changes single calls are ``Frontier``'s, one call each.
_DELEGATED = [
    ("push", ("push",)),
    ("push_many", ("push", "push_many")),
    ("pop", ("pop", "_taken_back")),
    ("pop_many", ("pop", "pop_many", "_taken_back")),
    ("report", ("report",)),
    ("report_many", ("report", "report_many")),
]

_FINGERPRINT = operator.attrgetter("fingerprint")


class Facade(Frontier):
    """A frontier that wraps ``inner`` and delegates everything it does not change; what it
    needs of the storage (refusals, schedules, its state) it asks the ``core`` for.

    The push, pop and report methods it does not change are the inner frontier's own, bound
    when the facade is made: patch an inner frontier before wrapping it, not after."""

    def __init__(self, inner: Frontier) -> None:
        if not isinstance(inner, Frontier):
            raise TypeError(f"a facade wraps a Frontier, not {type(inner).__name__}")
        self.inner = inner
        self._core = inner.core
        # What this facade does not change goes straight to the inner frontier's method: a
        # chain of facades then costs no call per layer on the hot paths.
        cls = type(self)
        for name, needs in _DELEGATED:
            if all(getattr(cls, n) is getattr(Facade, n) for n in needs):
                setattr(self, name, getattr(inner, name))

    @property
    def core(self) -> CoreFrontier:
        return self._core

    def push(self, seed: Seed) -> Admission:
        return self.inner.push(seed)

    def pop(self) -> Pop:
        while True:
            popped = self.inner.pop()
            if not isinstance(popped, Ready) or not self._taken_back(popped):
                return popped

    def _taken_back(self, ready: Ready) -> bool:
        """Whether this facade takes a seed the frontier inside handed out back (it reports
        it itself), so that it is not handed on."""
        return False

    def _through(self, ready: Ready) -> list[Ready]:
        return [r for r in self.inner._through(ready) if not self._taken_back(r)]

    def pop_many(
        self,
        limit: int,
        *,
        per_queue: int | None = None,
        queues: int | None = None,
        queue: str | None = None,
        lease_time: float | None = None,
    ) -> list[Ready]:
        """The core's batch, less what facades took back, topped up while seeds come."""
        check_limit(limit)

        def pop() -> list[Ready]:
            popped: list[Ready] = []
            while len(popped) < limit:
                batch = self.core.pop_many(
                    limit - len(popped),
                    per_queue=per_queue,
                    queues=queues,
                    queue=queue,
                    lease_time=lease_time,
                )
                if not batch:
                    break
                kept = [r for ready in batch for r in self._through(ready)]
                popped.extend(kept)
                if len(kept) == len(batch) or queues is not None:
                    break
            return popped

        return self.atomic(pop)

    def report(self, report: Report) -> None:
        self.inner.report(report)

    def report_many(self, reports: Iterable[Report]) -> None:
        if type(self).report is Facade.report:  # reports pass through unchanged: as a batch
            self.inner.report_many(reports)
        else:
            super().report_many(reports)

    def __repr__(self) -> str:
        return f"{self.inner!r}.{type(self).__name__}"


class Dedup(Facade):
    """Refuse a seed whose fingerprint is in ``seen``; record it once the inner frontier admits.

    Check, push and record are one transaction, so a crash cannot separate them.
    """

    def __init__(self, inner: Frontier, seen: SeenSet) -> None:
        super().__init__(inner)
        self.seen = seen

    def push(self, seed: Seed) -> Admission:
        check_seed(seed)
        fp = seed.fingerprint

        def push() -> Admission:
            if fp in self.seen:
                return self.core.refuse(seed, Reason.DUPLICATE)
            admission = self.inner.push(seed)
            if admission:
                self.seen.insert(fp)
            return admission

        return self.inner.atomic(push)

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        """The unseen seeds go inwards as one batch, checked against ``seen`` in one read and
        recorded in one write. A fingerprint repeated within the batch is a duplicate when its
        first copy was seen or admitted; when the inner frontier refused the first copy, the
        repeat is pushed after it, on its own (it may differ, in depth say)."""
        seeds = check_seeds(seeds)
        n = len(seeds)
        fps: list[bytes] = list(map(_FINGERPRINT, seeds))
        # a fingerprint's first index in the batch (a later one overwritten by an earlier one)
        first = dict(zip(reversed(fps), range(n - 1, -1, -1), strict=True))
        repeats = [] if len(first) == n else [i for i, fp in enumerate(fps) if first[fp] != i]

        def push_batch() -> list[Admission]:
            results: list[Admission | None] = [None] * n
            order = sorted(first.values())
            found = contains_many(self.seen, fps if not repeats else [fps[i] for i in order])
            fresh = [i for i, known in zip(order, found, strict=True) if not known]
            admissions = self.inner.push_many([seeds[i] for i in fresh]) if fresh else []
            admitted = []
            for i, admission in zip(fresh, admissions, strict=True):
                results[i] = admission
                if admission.reason is None:
                    admitted.append(fps[i])
            insert_many(self.seen, admitted)
            # seen, a repeat of one seen, a repeat of one admitted: duplicates
            repeated = set(repeats)
            duplicates = [i for i in range(n) if results[i] is None and (
                i not in repeated or results[first[fps[i]]] is None
                or results[first[fps[i]]])]  # fmt: skip
            if duplicates:
                refused = self.core.refuse_many([Reason.DUPLICATE] * len(duplicates))
                for i, admission in zip(duplicates, refused, strict=True):
                    results[i] = admission
            for i in repeats:
                if results[i] is None:  # its first copy refused by the inner frontier
                    results[i] = self.push(seeds[i])
            return [r for r in results if r is not None]

        return self.inner.atomic(push_batch)


class _Gate(Facade):
    """A facade that refuses some seeds at push and changes nothing else."""

    def refusal(self, seed: Seed) -> Reason | None:
        """Why ``seed`` is refused, or None to let it in."""
        raise NotImplementedError

    def push(self, seed: Seed) -> Admission:
        check_seed(seed)
        reason = self.refusal(seed)
        if reason is not None:
            return self.core.refuse(seed, reason)
        return self.inner.push(seed)

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        seeds = check_seeds(seeds)
        reasons = [self.refusal(seed) for seed in seeds]

        def push() -> list[Admission]:
            passed = iter(
                self.inner.push_many([s for s, r in zip(seeds, reasons, strict=True) if r is None])
            )
            refused = iter(self.core.refuse_many([r for r in reasons if r is not None]))
            return [next(passed) if r is None else next(refused) for r in reasons]

        return self.inner.atomic(push)


class Filter(_Gate):
    """Refuse seeds for which the predicate is false."""

    reason = Reason.FILTERED

    def __init__(self, inner: Frontier, predicate: Callable[[Seed], bool]) -> None:
        super().__init__(inner)
        self.predicate = predicate

    def refusal(self, seed: Seed) -> Reason | None:
        return None if self.predicate(seed) else self.reason


def _normalise_host(host: str) -> str:
    return parse_http_url(f"http://{host.strip().rstrip('.')}/").hostname


class AllowHosts(Filter):
    """Admit only these hosts and their subdomains; case-insensitive, ports ignored."""

    reason = Reason.OUT_OF_SCOPE

    def __init__(self, inner: Frontier, hosts: Iterable[str]) -> None:
        if isinstance(hosts, str):
            raise TypeError("allow_hosts takes a list of hosts, not one string")
        self.hosts = frozenset(_normalise_host(h) for h in hosts)
        super().__init__(inner, self._allowed)

    def _allowed(self, seed: Seed) -> bool:
        host: str = parse_http_url(seed.url).hostname
        while True:
            if host in self.hosts:
                return True
            _, dot, host = host.partition(".")
            if not dot:
                return False


class MaxDepth(_Gate):
    """Refuse seeds deeper than ``depth``; a seed at exactly ``depth`` is admitted."""

    def __init__(self, inner: Frontier, depth: int) -> None:
        super().__init__(inner)
        if depth < 0:
            raise ValueError(f"max_depth must be >= 0: {depth}")
        self.depth = depth

    def refusal(self, seed: Seed) -> Reason | None:
        return Reason.TOO_DEEP if seed.depth > self.depth else None


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon to retry: ``base_delay`` doubling (``multiplier``) up to
    ``max_delay``, each delay shortened by up to ``jitter`` (a fraction, 0.2 = 20%).
    """

    max_retries: int
    base_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 30.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0: {self.max_retries}")
        if self.base_delay < 0 or self.max_delay < 0 or self.multiplier < 1:
            raise ValueError("delays must be >= 0 and the multiplier >= 1")
        object.__setattr__(self, "jitter", min(1.0, max(0.0, self.jitter)))

    def with_base_delay(self, seconds: float) -> RetryPolicy:
        """The delay before the first retry (0.5 s by default)."""
        return replace(self, base_delay=seconds)

    def with_max_delay(self, seconds: float) -> RetryPolicy:
        """The longest delay between two tries (30 s by default)."""
        return replace(self, max_delay=seconds)

    def with_multiplier(self, multiplier: float) -> RetryPolicy:
        """How much each delay grows over the one before (2 by default)."""
        return replace(self, multiplier=multiplier)

    def with_jitter(self, fraction: float) -> RetryPolicy:
        """Clamped to [0, 1]."""
        return replace(self, jitter=fraction)

    def with_rng(self, rng: random.Random) -> RetryPolicy:
        """The random source of the jitter (a seeded one makes delays repeatable)."""
        return replace(self, rng=rng)

    def delay(self, retry: int) -> float:
        """Seconds before retry number ``retry`` (1 is the first retry)."""
        full = min(self.base_delay * self.multiplier ** (retry - 1), self.max_delay)
        return full * (1.0 - self.rng.uniform(0.0, self.jitter))


class RetryFacade(Facade):
    """Turns ``Retry`` reports into schedules on the storage, and into ``Failed`` once a seed
    has used its retries. Retried seeds are never pushed again, so dedup never refuses them.
    """

    def __init__(self, inner: Frontier, policy: RetryPolicy) -> None:
        super().__init__(inner)
        self.policy = policy

    def report(self, report: Report) -> None:
        if not isinstance(report, Retry):
            self.inner.report(report)
            return
        check_seed(report.seed)
        seed = report.seed
        retry = seed.attempt  # the attempt that failed is followed by retry number `attempt`
        if retry > self.policy.max_retries:
            self.inner.report(Failed(seed))
            return
        delay = report.after if report.after is not None else self.policy.delay(retry)
        next_seed = seed.with_attempt(seed.attempt + 1)
        self.inner.report(Reschedule(next_seed, self.clock() + delay, retried=True, kind="retry"))


_UNTAGGED = ""


class TagBackoff(Facade):
    """``Backoff(tag, until)`` pauses a tag: its seeds are parked, in order, on the storage's
    schedule until the pause ends, while other tags go on. The pauses live in the storage.
    """

    def __init__(self, inner: Frontier) -> None:
        super().__init__(inner)
        self.pauses = self.core.state("tag_backoff")

    def report(self, report: Report) -> None:
        if not isinstance(report, Backoff):
            self.inner.report(report)
            return
        key = tag_name(report.tag) or _UNTAGGED

        def pause() -> None:
            if report.until > self.pauses.get(key, float("-inf")):
                self.pauses[key] = report.until

        self.inner.atomic(pause)

    def _taken_back(self, ready: Ready) -> bool:
        key = ready.seed.tag or _UNTAGGED
        until = self.pauses.get(key)
        if until is None:
            return False
        if until <= self.clock():
            with contextlib.suppress(KeyError):
                del self.pauses[key]
            return False
        self.inner.report(Reschedule(ready.seed, until, kind="pause"))
        return True


class Scored(Facade):
    """Best-first crawling: each pushed seed's priority gains ``scorer(seed)``, saturating at
    the 32-bit bounds. Retried and revisited seeds keep their stored priority.
    """

    def __init__(self, inner: Frontier, scorer: Callable[[Seed], int]) -> None:
        super().__init__(inner)
        self.scorer = scorer

    def _scored(self, seed: Seed) -> Seed:
        check_seed(seed)
        priority = min(PRIORITY_MAX, max(PRIORITY_MIN, seed.priority + int(self.scorer(seed))))
        return seed.with_priority(priority)

    def push(self, seed: Seed) -> Admission:
        return self.inner.push(self._scored(seed))

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        return self.inner.push_many([self._scored(seed) for seed in seeds])


register_facades(Dedup, Filter, AllowHosts, MaxDepth, RetryPolicy, RetryFacade, TagBackoff, Scored)
