"""Running the ``crawlstore`` command as users run it: the installed console script (or
``python -m crawlstore``) in a subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from strict_json import strict_lines

_SCRIPT = shutil.which("crawlstore", path=os.path.dirname(sys.executable))
COMMAND = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "crawlstore"]


def cli(
    *args: str | Path, check: int | None = 0, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The command with ``args``, its exit code checked (``check=None``: not)."""
    done = subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip
    if check is not None:
        assert done.returncode == check, (done.returncode, done.stdout, done.stderr)
    return done


def export(store: Path | str, *args: str | Path) -> str:
    """``crawlstore export`` of ``store``: its stdout; every line it writes (to stdout, or to
    the file of ``-o``) read by a strict JSON parser, as other tools read it."""
    done = cli("export", store, *args)
    strict_lines(Path(args[args.index("-o") + 1]) if "-o" in args else done.stdout)
    return done.stdout
