"""The benchmark suite runs to completion: ``python -m benchmarks --smoke`` (every workload
once, at toy sizes) exits 0 and writes results.json and results.md with every workload. It
checks completion, not numbers. Deselect with ``-m "not bench"``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

WORKLOADS = ["crawl", "calls", "push-each", "push-grouped", "pop-each", "pop-grouped", "seen-1e4",
             "open", "scaling", "seeds", "validators", "scrapy-scheduler", "scrapy-resume",
             "scrapy-crawl", "urlfrontier-put", "urlfrontier-get",
             "urlfrontier-processes", "redis-push", "redis-pop", "redis-spread",
             "redis-memory", "redis-scaling"]  # fmt: skip
#: A guard against a hung suite, not a speed: about 90 s on an idle 2-core machine.
SECONDS = 1200


@pytest.mark.bench
def test_the_smoke_suite_completes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["BENCH_TMP"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SECONDS,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["stamp"]["git_commit"] is not None
    names = [w["workload"] for w in results["workloads"]]
    assert names == WORKLOADS
    for workload in results["workloads"]:
        assert workload["rows"], workload["workload"]
        for row in workload["rows"]:  # measured (counted, in untimed tables), or skipped
            counted = row["crash"] or any(row["extra"].values())
            measured = row["median_per_op"] if workload["timed"] else counted
            assert measured or row["skipped"], (workload["workload"], row["key"])
    markdown = (out / "results.md").read_text()
    for workload in results["workloads"]:
        assert f"## {workload['title']}" in markdown
