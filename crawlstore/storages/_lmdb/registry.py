"""The process's engines, one a file, and what a fork does to them: no transaction crosses
the fork, and the child drops what it inherited."""

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


def _before_fork() -> None:
    """No transaction may be under way in another thread when the process forks: the child
    would inherit it, and ending it there would end it in the lock file the parent shares. The
    engines' locks are taken before the registry's (a transaction may open a store)."""
    while True:
        with registry_lock:
            engines = list(registry.values())
        for engine in engines:
            engine.lock.acquire()
        registry_lock.acquire()
        if list(registry.values()) == engines:
            _forking[:] = engines
            return
        registry_lock.release()  # a store was opened or closed meanwhile: again
        for engine in reversed(engines):
            engine.lock.release()


def _after_fork_in_parent() -> None:
    registry_lock.release()
    for engine in reversed(_forking):
        engine.lock.release()
    _forking.clear()


def _after_fork_in_child() -> None:
    """Drop the environments inherited from the parent, so that the child opens the store
    afresh (LMDB refuses a second environment on a file in one process, and an inherited one
    must not be used). What the parent opened raises ``StoreError`` in the child."""
    for engine in reversed(_forking):
        engine.lock.release()
        with suppress(lmdb.Error):
            engine.env.close()  # no transaction is open (see _before_fork): touches no slot
    _forking.clear()
    registry.clear()
    registry_lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
