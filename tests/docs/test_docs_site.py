"""The documentation site builds with ``mkdocs build --strict``: every page of the nav exists,
every link and anchor resolves, and the API reference renders from the docstrings without a
warning (mkdocs.yml, docs/)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="mkdocs is not installed: pip install -e '.[docs]' (the test extra has it too)",
)
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,  # 8 s idle, 38 s beside hogs
        # this checkout's package, installed or not; no banner about MkDocs 2
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    store = (site / "reference" / "store" / "index.html").read_text()
    assert 'id="crawlstore.Store.open"' in store  # the reference is rendered from the code
    assert "fsync data and meta page at every commit" in store  # and from its #: comments
    # signatures are laid out one parameter a line (the docs extra brings the formatter)
    assert '<span class="nf">open</span><span class="p">(</span>\n    <span class="n">path' in store
    recipe = (site / "recipes" / "recrawl-etags" / "index.html").read_text()
    assert "ThreadingHTTPServer" in recipe  # the example file is included, not a link to it


def test_the_docs_extra_brings_the_signature_formatter() -> None:
    """mkdocstrings-python formats signatures with ruff or black, or leaves them on one line:
    the docs extra alone must bring one."""
    text = (ROOT / "pyproject.toml").read_text()
    docs = text[text.index("\ndocs = [") : text.index("\n]", text.index("\ndocs = ["))]
    assert '"ruff' in docs or '"black' in docs
