"""Who holds a transaction, and all or nothing for state kept in memory.

A transaction belongs to a *flow*: the asyncio task that opened it or, outside any task, the
thread. Only that flow joins it. Another thread waits for it to end; another task of the same
thread cannot wait (it would block the event loop the owner needs to finish), so its write
raises ``TransactionBusy`` instead of slipping into the owner's transaction, where the owner's
rollback would take back what the other task was told was done.

In-memory structures (``InMemFrontier``, ``InMemSeen``, ``BloomSeen``, ``InMemValidators``, the
memory frontier's facade state) record how to undo each change while the calling flow has a
transaction open, whichever storage opened it: when it rolls back, the undos run newest first.
So ``store.frontier().dedup()`` (an in-memory seen set over the store) rolls back whole too.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar, Token

from .errors import TransactionBusy

__all__ = ["Journal", "Owner", "active", "check_owner", "flow", "owner"]

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


class Journal:
    """The undo log of one flow's open transaction."""

    __slots__ = ("owner", "undos")

    def __init__(self) -> None:
        self.owner = flow()
        self.undos: list[Callable[[], object]] = []

    def rollback(self) -> None:
        undos, self.undos = self.undos, []
        for undo in reversed(undos):
            undo()


_journal: ContextVar[Journal | None] = ContextVar("crawlstore_journal", default=None)


def active() -> list[Callable[[], object]] | None:
    """The undo list of the calling flow's open transaction; None outside one (a task
    started inside another's transaction inherits its context, but not its transaction)."""
    journal = _journal.get()
    if journal is None or journal.owner != flow():
        return None
    return journal.undos


def begin() -> tuple[Journal, Token[Journal | None]] | None:
    """Open the calling flow's journal; None when one is open already (the caller joins)."""
    if active() is not None:
        return None
    journal = Journal()
    return journal, _journal.set(journal)


def end(opened: tuple[Journal, Token[Journal | None]] | None, *, commit: bool) -> None:
    """Close a journal ``begin`` opened: drop its undos, or run them when rolling back."""
    if opened is None:
        return
    journal, token = opened
    _journal.reset(token)
    if not commit:
        journal.rollback()
