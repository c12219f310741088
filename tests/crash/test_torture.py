"""The short run of the crash torture (``python -m crawlstore.torture`` runs the long one):
hundreds of SIGKILLs of crawl workers using every view, 0 violations."""

from __future__ import annotations

import os
from pathlib import Path

from crawlstore.torture import torture

SECONDS = float(os.environ.get("CRAWLSTORE_TORTURE_SECONDS", "45"))


def test_crash_torture(tmp_path: Path) -> None:
    rounds, kills, operations, violations = torture(
        tmp_path / "torture.lmdb", seconds=SECONDS, workers=4, seed=20261130, min_kills=200
    )
    print(f"rounds {rounds}, kills {kills}, operations verified {operations}, "
          f"violations {len(violations)}")  # fmt: skip
    assert violations == []
    assert kills >= 200 and operations > 0
