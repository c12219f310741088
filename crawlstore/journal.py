"""Who holds a transaction, and all or nothing for state kept in memory.

A transaction belongs to a *flow*: the asyncio task that opened it or, outside any task, the
thread. Only that flow joins it. Another thread waits for it to end; another task of the same
thread cannot wait (it would block the event loop the owner needs to finish), so its write
raises ``TransactionBusy`` instead of slipping into the owner's transaction, where the owner's
rollback would take back what the other task was told was done.

The flow's open transaction has a ``Journal``, whichever storage opened it:

- ``InMemFrontier`` (locked for the length of the transaction) records how to undo each change;
  a rollback runs the undos, newest first;
- in-memory seen sets and validators, which other threads may share, keep a transaction's
  writes aside and apply them when it commits (``on_commit``), so no other flow ever sees them
  before, and a rollback takes back nothing another flow relies on;
- a store written to inside a memory transaction joins it (``enlist``): its write transaction
  commits or rolls back with the journal.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Generic, Protocol, TypeVar

from .errors import TransactionBusy

__all__ = ["Aside", "Journal", "Owner", "begin", "check_owner", "current", "end", "flow", "owner"]

_T = TypeVar("_T")

#: A flow (the asyncio task, else the thread id) and the thread it runs on.
Owner = tuple[object, int]


def flow() -> object:
    """The calling flow: the running asyncio task, or the thread's id outside any task."""
    asyncio = sys.modules.get("asyncio")  # no event loop runs where asyncio was never imported
    if asyncio is not None:
        loop = asyncio.events._get_running_loop()
        if loop is not None:
            task = asyncio.current_task(loop)
            if task is not None:
                return task
    return threading.get_ident()


def owner() -> Owner:
    return flow(), threading.get_ident()


def check_owner(holder: Owner | None, what: object) -> bool:
    """Whether the calling flow holds the transaction that ``holder`` owns (it joins it).

    Raises ``TransactionBusy`` when another task of this thread holds it; False when nobody
    or another thread does (the caller then waits for the lock)."""
    if holder is None:
        return False
    me = flow()
    if holder[0] == me:
        return True
    if holder[1] == threading.get_ident():
        name = holder[0].get_name() if hasattr(holder[0], "get_name") else holder[0]
        raise TransactionBusy(
            f"{what} is inside a transaction of another asyncio task ({name}) on this thread; "
            "this task cannot write until it ends, and waiting would block the event loop. "
            "Never await inside a transaction (or give each writing task its own thread)"
        )
    return False


class Participant(Protocol):
    """A transaction of another storage that commits or rolls back with a journal."""

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class Journal:
    """The calling flow's open transaction: undos, commit hooks and enlisted transactions."""

    __slots__ = ("closed", "commits", "owner", "participants", "storage", "undos")

    def __init__(self, storage: object = None) -> None:
        self.owner = flow()
        self.closed = False
        #: The store whose transaction opened it (None: a memory frontier's). Another store's
        #: writes join only a memory transaction: two stores are two files, never one commit.
        self.storage = storage
        self.undos: list[Callable[[], object]] = []
        self.commits: list[Callable[[], object]] = []
        self.participants: list[Participant] = []

    def undo(self, undo: Callable[[], object]) -> None:
        """Run ``undo`` if the transaction rolls back."""
        self.undos.append(undo)

    def on_commit(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` once the transaction committed."""
        self.commits.append(callback)

    def enlist(self, participant: Participant) -> None:
        self.participants.append(participant)

    def mark(self) -> int:
        """A savepoint: ``undo_to(mark)`` takes back what was changed after it."""
        return len(self.undos)

    def undo_to(self, mark: int) -> None:
        """Run the undos recorded since ``mark``, newest first (all of them, even when one
        raises); the transaction goes on as it was at the mark."""
        undos, self.undos = self.undos[mark:], self.undos[:mark]
        _run_all(undos[::-1])

    def commit(self) -> None:
        """Commit the enlisted transactions, then run the commit hooks; when an enlisted one
        fails, roll back everything and raise its error."""
        for done, participant in enumerate(self.participants):
            try:
                participant.commit()
            except BaseException:
                self.participants = self.participants[done + 1 :]  # it rolled back by itself
                self.rollback()
                raise
        commits, self.commits = self.commits, []
        self.undos = []
        _run_all(commits)

    def rollback(self) -> None:
        """Roll back the enlisted transactions and run the undos, newest first: all of them,
        even when one raises (the first error is raised after)."""
        participants, self.participants = self.participants, []
        undos, self.undos = self.undos, []
        self.commits = []
        _run_all([p.rollback for p in participants] + undos[::-1])


def _run_all(calls: list[Callable[[], object]]) -> None:
    error: BaseException | None = None
    for call in calls:
        try:
            call()
        except BaseException as exc:  # the others must run all the same
            error = error or exc
    if error is not None:
        raise error


_journal: ContextVar[Journal | None] = ContextVar("crawlstore_journal", default=None)


def current() -> Journal | None:
    """The calling flow's open journal; None outside a transaction (a task started inside
    another's transaction inherits its context, but not its transaction)."""
    journal = _journal.get()
    if journal is None or journal.closed or journal.owner != flow():
        return None
    return journal


#: What ``begin`` hands to ``end``: the journal opened, and the value it replaced.
Opened = tuple[Journal, Journal | None]


def begin(storage: object = None) -> Opened | None:
    """Open the calling flow's journal for ``storage``'s transaction (None: in memory); None
    when one is open already (the caller joins)."""
    if current() is not None:
        return None
    journal = Journal(storage)
    previous = _journal.get()
    _journal.set(journal)
    return journal, previous


def end(opened: Opened | None, *, commit: bool) -> None:
    """Close a journal ``begin`` opened: commit it, or roll it back. Safe from another context
    (an abandoned async generator is closed by a task of its own)."""
    if opened is None:
        return
    journal, previous = opened
    journal.closed = True  # wherever else its context was copied to, it is over
    if _journal.get() is journal:
        _journal.set(previous)
    if commit:
        journal.commit()
    else:
        journal.rollback()


class Aside(Generic[_T]):
    """The writes that each open transaction keeps aside for one shared in-memory structure:
    applied (``apply(writes)``, under the caller's lock) when it commits, dropped when it rolls
    back, seen before that by the transaction's own flow only."""

    def __init__(self, new: Callable[[], _T], apply: Callable[[_T], object]) -> None:
        self._new, self._apply = new, apply
        self._writes: dict[Journal, _T] = {}

    def of(self, journal: Journal | None) -> _T | None:
        """What ``journal`` kept aside so far (None: nothing, or no transaction)."""
        return self._writes.get(journal) if journal is not None else None

    def for_write(self, journal: Journal) -> _T:
        """``journal``'s writes, to add to."""
        writes = self._writes.get(journal)
        if writes is None:
            writes = self._writes[journal] = self._new()
            journal.on_commit(lambda: self._apply(self._writes.pop(journal)))
            journal.undo(lambda: self._writes.pop(journal, None))
        return writes
