"""The core's operations over a partitioned storage (``spi.Partitioned``): one unit a partition.

The policy is the core's, as over any storage: these functions only plan which partition each
part of an operation belongs to and run the core's own unit for it there, so that units on two
partitions never wait on each other. What it means to a caller:

- a push is atomic per partition; each URL's queue is claimed first (``claim_queues``), so two
  pushes of one URL with two different queue keys queue it once, in the queue claimed first;
- a pop takes from the due partitions one unit at a time, starting at a different one each
  call: the round robin is exact among the queues of one partition, and across partitions
  only as exact as the partitions' turns;
- a ``report_many`` is atomic per partition: a report whose seed is not in flight fails the
  unit of its partition, and the units of the others may have committed.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

from ..errors import NotInFlight, ReadOnlyStore
from ..seed import Seed
from .protocol import Admission, Empty, Pop, Ready, Reason, SeedReport
from .spi import Post

if TYPE_CHECKING:
    from .core import CoreFrontier
    from .spi import CrawlRecord, Inboxes, Partitioned

__all__ = [
    "each",
    "fold_all",
    "fold_posts",
    "pop",
    "pop_many",
    "push_many",
    "report_many",
    "run_on",
    "units",
]

_T = TypeVar("_T")
_DUPLICATE = Admission(Reason.DUPLICATE)
#: The due partitions a pop reads ahead for.
_AHEAD = 8


def _storage(core: CoreFrontier) -> Partitioned:
    return cast("Partitioned", core.storage)


def _settled(core: CoreFrontier) -> CrawlRecord:
    """The crawl as the core last read it; created (by a unit over every partition) when it
    does not exist yet. Read without a unit: a partition's unit reads it again."""
    crawl = core.storage.crawl(core.name)
    if crawl is None or not crawl.settled:
        crawl = core.storage.run(core.crawl_for_write)
    return crawl


class _Gone(Exception):
    """The crawl was deleted after the plan read it: the unit changed nothing."""


def _in_unit(core: CoreFrontier) -> CrawlRecord:
    """The crawl, read again inside a partition's unit (where only a unit over every
    partition may create it)."""
    crawl = core.existing_crawl()
    if crawl is None or not crawl.settled:
        raise _Gone
    _fold(core, crawl)
    return crawl


def _run_in(core: CoreFrontier, p: int, operation: Callable[[], _T]) -> _T:
    """``operation`` in a unit on ``p``; when the crawl is gone meanwhile, made again first."""
    try:
        return _storage(core).run_in(p, operation)
    except _Gone:
        core.storage.run(core.crawl_for_write)
        return _storage(core).run_in(p, operation)


def _run_each(core: CoreFrontier, units: list[tuple[int, Callable[[], _T]]]) -> list[_T]:
    """Each operation in a unit on its partition (``run_each``: independent units, which a
    storage on a server commits together); those that found the crawl gone meanwhile (its
    ``_in_unit`` raises before they write) run again once it is made again."""
    storage = _storage(core)
    gone = object()

    def guarded(operation: Callable[[], _T]) -> Callable[[], _T | object]:
        def run() -> _T | object:
            try:
                return operation()
            except _Gone:
                return gone

        return run

    results = storage.run_each([(p, guarded(operation)) for p, operation in units])
    again = [i for i, result in enumerate(results) if result is gone]
    if again:
        core.storage.run(core.crawl_for_write)
        for i, result in zip(again, storage.run_each([units[i] for i in again]), strict=True):
            results[i] = result
    return cast("list[_T]", results)


def push_many(core: CoreFrontier, batch: list[Seed], new_only: bool) -> list[Admission]:
    storage = _storage(core)
    crawl = _settled(core)
    keys = storage.claim_queues(crawl, [seed.fingerprint for seed in batch],
                                core._keys_for(crawl, batch))  # fmt: skip
    if storage.capabilities.inboxes:
        return _post_many(core, crawl, batch, keys, new_only)
    groups: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(storage.partition_of(crawl, key), []).append(i)
    if len(groups) > 1:  # (read ahead for every partition's unit at once)
        storage.prefetch(crawl, [seed.fingerprint for seed in batch], keys)
    units: list[tuple[int, Callable[[], list[Admission]]]] = []
    for p, indexes in groups.items():

        def admit(indexes: list[int] = indexes) -> list[Admission]:
            seeds, chosen = [batch[i] for i in indexes], [keys[i] for i in indexes]
            return core._admit_many(_in_unit(core), seeds, core._clock(), new_only, chosen)

        units.append((p, admit))
    answers: dict[int, Admission] = {}
    for indexes, admitted in zip(groups.values(), _run_each(core, units), strict=True):
        answers.update(zip(indexes, admitted, strict=True))
    return [answers[i] for i in range(len(batch))]


def _post_many(core: CoreFrontier, crawl: CrawlRecord, batch: list[Seed], keys: list[str],
               new_only: bool) -> list[Admission]:  # fmt: skip
    """A push into the inboxes of its URLs' partitions (``spi.Inboxes``): each URL admitted
    or refused now, from its record and its inbox as they are, the admitted ones posted, then
    folded into their queues before the push returns; in a transaction, by later units on
    their partitions (a pop folds first), not by the transaction. A URL posted twice
    meanwhile, by two clients at one instant, is folded once."""
    storage = cast("Inboxes", core.storage)
    fps = [seed.fingerprint for seed in batch]
    answers: list[Admission] = []
    posts: list[Post] = []
    refused: list[str] = []
    taken: set[bytes] = set()
    for seed, fp, key, (url, posted) in zip(batch, fps, keys, storage.look(crawl, fps, keys),
                                            strict=True):  # fmt: skip
        answer = _DUPLICATE if posted or fp in taken else core._admission(url, new_only)
        if answer:
            taken.add(fp)
            posts.append(Post(key, seed if seed.lease is None else seed.with_lease(None),
                              new_only))  # fmt: skip
        else:
            refused.append(key)
        answers.append(answer)
    storage.post(crawl, posts, refused)
    if storage.in_transaction():  # folded by the next unit there, or this frontier's next read
        for key in keys:
            core._unfolded.setdefault(storage.partition_of(crawl, key), key)
    else:
        fold_posts(core, fps, keys)
    return answers


def fold_all(core: CoreFrontier) -> None:
    """Fold every inbox of the crawl that holds anything, each in a unit of its own."""
    storage = cast("Inboxes", core.storage)
    crawl = storage.crawl(core.name)
    if crawl is None or not crawl.settled or storage.in_transaction():
        return

    with contextlib.suppress(ReadOnlyStore):  # (a store opened read-only: they stay posted)
        _fold_units(core, storage.posted_partitions(crawl))


def fold_posts(core: CoreFrontier, fps: Sequence[bytes], keys: Sequence[str]) -> None:
    """Fold the inboxes of the partitions of these queues, each in a unit of its own
    (``_in_unit`` folds), reading ahead for them all at once."""
    storage = _storage(core)
    crawl = storage.crawl(core.name)
    if crawl is None or not crawl.settled:
        return
    partitions = sorted({storage.partition_of(crawl, key) for key in keys})
    if len(partitions) > 1:
        storage.prefetch(crawl, fps, keys)
    _fold_units(core, partitions)


def _fold_units(core: CoreFrontier, partitions: Sequence[int]) -> None:
    """A unit on each of these partitions that does nothing but fold (``_in_unit`` folds)."""

    def fold() -> None:
        _in_unit(core)

    _run_each(core, [(p, fold) for p in partitions])


def _fold(core: CoreFrontier, crawl: CrawlRecord) -> None:
    """In a unit on a partition of a storage with inboxes: queue what its inbox holds, as the
    push would have in this unit (the same policy: ``_admit_many``), and empty it with the
    unit's commit. A URL pushed meanwhile is a duplicate here as anywhere."""
    if not core.storage.capabilities.inboxes:
        return
    storage = cast("Inboxes", core.storage)
    posts, refused = storage.posted(crawl)
    if not posts and not refused:
        return
    now = core._clock()
    for new_only, run in itertools.groupby(posts, key=lambda post: post.new_only):
        group = list(run)
        core._admit_many(crawl, [post.seed for post in group], now, new_only,
                         [post.key for post in group])  # fmt: skip
    if refused:
        storage.add_totals(crawl, {"refused:duplicate": refused})
    storage.unpost(crawl, [post.seed.fingerprint for post in posts], refused)


def pop_many(
    core: CoreFrontier,
    limit: int,
    per_queue: int | None,
    queues: int | None,
    only: str | None,
    lease_time: float | None,
    max_in_flight: int | None,
    holder: tuple[int, int],
) -> list[Ready]:
    storage = _storage(core)
    crawl = storage.crawl(core.name)
    if crawl is None or limit == 0:
        return []
    now = core._clock()
    if only is not None:
        partitions = [storage.partition_of(crawl, only)]
        _reap(core, crawl, now, partitions)
    else:
        if storage.capabilities.local_holders:  # (else leases end by time only: no reaping)
            _reap(core, crawl, now, storage.partitions(crawl))
        partitions = storage.due_partitions(crawl, now)
        if len(partitions) > 1:  # (read ahead for the first ones' units at once)
            storage.prefetch_partitions(crawl, partitions[:_AHEAD])
    out: list[Ready] = []
    served: set[str] = set()
    for p in partitions:
        left = None if queues is None else queues - len(served)

        def take(p: int = p, left: int | None = left, room: int = limit - len(out)) -> list[Ready]:
            crawl = core.existing_crawl()
            if crawl is None:
                return []
            _fold(core, crawl)
            return core._pop(crawl, now, room, per_queue, left, only, lease_time, max_in_flight,
                             holder, served, reap=False)  # fmt: skip

        out += storage.run_in(p, take)
        if len(out) >= limit or (queues is not None and len(served) >= queues):
            break
    return out


def _reap(core: CoreFrontier, crawl: CrawlRecord, now: float, partitions: list[int]) -> None:
    """End the leases of holders known dead (``local_holders``), in each of these partitions
    whose turn has come, due or not: a partition whose only work is held by a dead process is
    not due until the leases expire."""
    storage = _storage(core)
    if not storage.capabilities.local_holders:
        return
    turns = [p for p in partitions if now >= core._next_reaps.get(p, -math.inf)]
    for p in turns:
        core._next_reaps[p] = now + core.reap_interval

    def reap() -> None:
        crawl = core.existing_crawl()
        if crawl is not None:
            core._reap(crawl, now)

    storage.run_each([(p, reap) for p in turns])


def pop(core: CoreFrontier) -> Pop:
    popped = pop_many(core, 1, None, None, None, None, None, core._owner)
    if popped:
        return popped[0]

    def wait() -> Pop:
        crawl = core.existing_crawl()
        return Empty if crawl is None else core._wait(crawl, core._clock())

    return core.storage.view(wait)


def report_many(core: CoreFrontier, todo: list[SeedReport]) -> None:
    """(The core's ``_report_unit`` reads the crawl for write: it exists, so nothing spans.)"""
    storage = _storage(core)
    crawl = storage.crawl(core.name)
    if crawl is None or not crawl.settled:  # no lease to report: refused, nothing created
        storage.run(lambda: core._report_unit(todo))  # (none to report: the crawl is made)
        return
    groups: dict[int, list[SeedReport]] = {}
    seen_tokens = set()
    for report in todo:
        lease = report.seed.lease
        p = storage.lease_partition(crawl, lease.token) if lease is not None else None
        if lease is None or p is None:
            core._lease_of(crawl, report.seed)  # raises NotInFlight, naming why
            continue
        if lease.token in seen_tokens:
            raise NotInFlight("a seed is reported twice in one report_many")
        seen_tokens.add(lease.token)
        groups.setdefault(p, []).append(report)
    if not groups:
        storage.run(lambda: core._report_unit([]))  # (creates the crawl, as a report does)
    if len(groups) > 1:  # (read ahead for every partition's unit at once)
        tokens = [r.seed.lease.token for r in todo if r.seed.lease is not None]
        storage.prefetch(crawl, [r.seed.fingerprint for r in todo], (), tokens)
    units: list[tuple[int, Callable[[], None]]] = []
    for p, reports in groups.items():

        def apply(reports: list[SeedReport] = reports) -> None:
            _in_unit(core)
            core._report_unit(reports)

        units.append((p, apply))
    _run_each(core, units)


def run_on(
    core: CoreFrontier,
    operation: Callable[[], _T],
    key: str | None = None,
    token: bytes | None = None,
    seed: Seed | None = None,
    key_of: Seed | None = None,
    fp: bytes | None = None,
    create: bool = True,
) -> _T:
    """``operation`` in a unit on the partition of the queue ``key``, of the lease ``token``,
    of the queue ``seed`` is claimed by (claimed now when it has none), of the queue the
    crawl's queue mode gives ``key_of``, or of the queue that claims the URL ``fp``. The
    crawl is created first (``create``), else a unit over every partition runs an operation
    on a crawl that does not exist (it changes nothing); one runs it too where the token or
    URL names no partition (the operation raises ``NotInFlight``, or finds nothing)."""
    storage = _storage(core)
    crawl = _settled(core) if create else storage.crawl(core.name)
    p: int | None = None
    if crawl is not None and crawl.settled:
        if seed is not None:
            key = storage.claim_queues(crawl, [seed.fingerprint], [core._key_for(crawl, seed)])[0]
        elif key_of is not None:
            key = core._key_for(crawl, key_of)
        elif fp is not None:
            key = storage.claimed(crawl, [fp])[0]
        if key is not None:
            p = storage.partition_of(crawl, key)
        elif token is not None:
            p = storage.lease_partition(crawl, token)
    if p is None:
        return storage.run(operation)

    def confined() -> _T:
        _in_unit(core)
        return operation()

    return _run_in(core, p, confined)


def each(core: CoreFrontier, operation: Callable[[], int]) -> int:
    """``operation`` in a unit on each partition of the crawl; the sum of what they return."""
    storage = _storage(core)
    crawl = storage.crawl(core.name)
    if crawl is None:
        return 0
    return sum(storage.run_each([(p, operation) for p in storage.partitions(crawl)]))


def units(core: CoreFrontier, key: str | None) -> list[Callable[[Callable[[], _T]], _T]]:
    storage = _storage(core)
    crawl = storage.crawl(core.name)
    if crawl is None:
        return []
    if key is not None:
        return [functools.partial(storage.run_in, storage.partition_of(crawl, key))]
    return [functools.partial(storage.run_in, p) for p in storage.partitions(crawl)]
