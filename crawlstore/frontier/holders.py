"""Who holds a lease: a process, named by its pid and its start time, so that a reused pid or a
zombie is not taken for the process that took the lease."""

from __future__ import annotations

import os

__all__ = ["REMOTE", "process_alive", "this_process"]

#: The holder of a lease taken for a remote client (through a service): it ends when it
#: expires, never because a process is gone.
REMOTE = (0, 0)


def _process_start(pid: int) -> int:
    """The process's start time in clock ticks since boot (Linux), or 0 where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return 0


def process_alive(pid: int, start: int) -> bool:
    """Whether the process that took a lease still runs (a reused pid or a zombie does not);
    always for ``REMOTE``."""
    if (pid, start) == REMOTE:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return True  # no /proc: trust the pid
    if fields[0] == b"Z":
        return False
    return start == 0 or int(fields[19]) == start


def this_process() -> tuple[int, int]:
    pid = os.getpid()
    return pid, _process_start(pid)
