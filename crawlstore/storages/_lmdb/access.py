"""What this process may do with a store's files: why it cannot write them, and whether another
process has the store open (LMDB holds a lock on its ``-lock`` file for as long as it does)."""

from __future__ import annotations

import fcntl
import os
import struct
import sys
from pathlib import Path

__all__ = ["lock_holder", "lock_path", "why_unwritable"]

#: Linux's ``struct flock``: type, whence, start, length, pid (and padding to 32 bytes).
_FLOCK = struct.Struct("hhqqi4x")


def lock_path(path: Path) -> Path:
    return Path(f"{path}-lock")


def lock_holder(path: Path) -> int | None:
    """The pid of a process that has the store at ``path`` open, if one does (Linux only: LMDB
    holds a shared lock on the first byte of the lock file from open to close)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        fd = os.open(lock_path(path), os.O_RDONLY)
    except OSError:
        return None  # no lock file (or none this process may read): nobody it can see
    try:
        probe = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        kind, _, _, _, pid = _FLOCK.unpack(fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(pid) if kind != fcntl.F_UNLCK else None


def _read_only_fs(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def why_unwritable(path: Path) -> str:
    """Why this process cannot write the store at ``path`` or its lock file, in words."""
    directory = path.parent
    lock = lock_path(path)
    if _read_only_fs(directory):
        return f"{directory} is on a read-only file system"
    if not path.exists():
        if not os.access(directory, os.W_OK):
            return f"its directory {directory} cannot be written (no permission)"
    elif not os.access(path, os.W_OK):
        return f"{path} cannot be written (no permission)"
    if lock.exists():
        if not os.access(lock, os.W_OK):
            return f"its lock file {lock} cannot be written (no permission)"
    elif not os.access(directory, os.W_OK):
        return f"its lock file {lock} cannot be created: {directory} cannot be written"
    return "permission denied"
