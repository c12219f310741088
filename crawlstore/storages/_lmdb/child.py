"""Running a piece of this package in a child process: where LMDB reading a damaged file
could abort, the child dies, not the caller."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["run_child"]


def run_child(function: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run ``function`` (``"module:name"``, called with ``args``) in a new interpreter that
    imports this very crawlstore; its output is captured as text."""
    module, name = function.split(":")
    root = str(Path(__file__).resolve().parents[3])  # the directory holding crawlstore/
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    code = f"import sys; from {module} import {name}; {name}(*sys.argv[1:])"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=timeout)  # fmt: skip
