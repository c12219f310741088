"""The worked examples run as documented."""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import ROOT


def test_recrawl_example_gets_304s_on_the_second_pass() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "recrawl_httpx.py")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout's package, installed or not
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pass 2: fetched 21 pages, 19 unchanged (304), 2 changed" in done.stdout
