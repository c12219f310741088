"""The process's engines, one a file, and what a fork does to them: no transaction or flush
crosses the fork, and the child drops what it inherited."""

from __future__ import annotations

import os
import threading
from contextlib import suppress
from typing import TYPE_CHECKING

import lmdb

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["registry", "registry_lock"]

registry: dict[str, Engine] = {}
registry_lock = threading.Lock()


_forking: list[Engine] = []
#: How long a forked child waits for an inherited environment to close (see ``_drop``).
CLOSE_WAIT = 5.0
#: Environments a forked child inherited with a parent's read snapshot open: never freed.
_KEPT: list[lmdb.Environment] = []


def _before_fork() -> None:
    """No transaction or flush may be under way in another thread when the process forks: the
    child would inherit it, and ending it there would end it in the lock file the parent
    shares. The engines' locks are taken before the registry's (a transaction may open a
    store), each engine's flush lock after its writer lock."""
    while True:
        with registry_lock:
            engines = list(registry.values())
        for engine in engines:
            engine.lock.acquire()
            engine.syncing.acquire()
        registry_lock.acquire()
        if list(registry.values()) == engines:
            _forking[:] = engines
            return
        registry_lock.release()  # a store was opened or closed meanwhile: again
        _release(engines)


def _release(engines: list[Engine]) -> None:
    for engine in reversed(engines):
        engine.syncing.release()
        engine.lock.release()


def _after_fork_in_parent() -> None:
    registry_lock.release()
    _release(_forking)
    _forking.clear()


def _drop(envs: list[lmdb.Environment]) -> None:
    """Close environments a child inherited: no transaction is open in them (see
    ``_before_fork``), so closing touches no reader slot of the parent's."""
    for env in envs:
        with suppress(lmdb.Error):
            env.close()


def _after_fork_in_child() -> None:
    """Drop the environments inherited from the parent, so that the child opens the store
    afresh (LMDB refuses a second environment on a file in one process, and an inherited one
    must not be used). What the parent opened raises ``StoreError`` in the child.

    An environment in which the parent holds a read snapshot across calls (an export) is never
    closed here, nor freed: closing it would end that snapshot in the reader table the parent
    shares, and a writer could then reuse the pages the parent's export still reads. The child
    cannot open that file again (it says so). The others are closed in a thread of their own:
    py-lmdb's ``close()`` waits for the environment's calls under way in other threads of the
    parent that no lock here holds off (a size query, say), which a child counts forever; a
    child whose close has not ended after ``CLOSE_WAIT`` goes on without it."""
    envs: list[lmdb.Environment] = []
    for engine in reversed(_forking):
        (_KEPT if engine.readers else envs).append(engine.env)
    _release(_forking)
    _forking.clear()
    registry.clear()
    registry_lock.release()
    if envs:
        closing = threading.Thread(target=_drop, args=(envs,), daemon=True, name="crawlstore-drop")
        closing.start()
        closing.join(CLOSE_WAIT)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
