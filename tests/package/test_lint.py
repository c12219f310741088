"""The package stays ``mypy --strict`` and ``ruff`` clean: part of the test command."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_mypy_strict() -> None:
    result = run(sys.executable, "-m", "mypy", "--strict", "crawlstore")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff() -> None:
    check = run(sys.executable, "-m", "ruff", "check", "crawlstore", "tests", "benchmarks")
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = run(sys.executable, "-m", "ruff", "format", "--check", "crawlstore", "tests")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
