"""The ```python blocks of README.md and docs/**/*.md run as they are written.

CONTRIBUTING, for code in the docs:

- A ```python block is a complete example by default. This test writes it to a file in an
  empty temporary directory and runs it with this checkout's package; it must exit 0 within
  ``TIMEOUT`` seconds. Write it so that it can: define what it needs in a few lines (a dict of
  pages standing in for a fetch), start a server on 127.0.0.1 if it needs one, and prefer an
  ``assert`` to a comment where it shows a result, since asserts are checked.
- A block that cannot run on its own (it continues the block before it, or stands for code of
  the reader's) is a fragment: put ``<!-- fragment -->`` on its own line above the opening
  fence (blank lines may separate them). Fragments are compiled, not run, so they stay valid
  Python. Keep them few.
- A block that only includes a file (``--8<-- "examples/x.py"``, the snippets extension) is
  that file, which tests/docs/test_examples.py runs with its expected output.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
FRAGMENT = "<!-- fragment -->"
INCLUDE = re.compile(r'--8<-- "([^"]+)"')
TIMEOUT = 60


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    code: str
    fragment: bool

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def includes(self) -> list[str]:
        lines = [line.strip() for line in self.code.splitlines() if line.strip()]
        found = [INCLUDE.fullmatch(line) for line in lines]
        return [m.group(1) for m in found if m] if all(found) else []


def blocks(path: Path) -> list[Block]:
    found, lines = [], path.read_text().splitlines()
    at = 0
    while at < len(lines):
        fence = re.fullmatch(r"(\s*)(`{3,})python\s*", lines[at])
        if not fence:
            at += 1
            continue
        indent, ticks = fence.group(1), fence.group(2)
        end = next(i for i in range(at + 1, len(lines)) if lines[i].strip() == ticks)
        above = next((lines[i].strip() for i in range(at - 1, -1, -1) if lines[i].strip()), "")
        code = "\n".join(line.removeprefix(indent) for line in lines[at + 1 : end]) + "\n"
        found.append(Block(path, at + 1, code, above == FRAGMENT))
        at = end + 1
    return found


BLOCKS = [block for path in DOCS for block in blocks(path)]


def test_the_docs_have_examples() -> None:
    """The extraction finds the blocks (a broken glob or fence pattern would pass silently)."""
    assert len([b for b in BLOCKS if not b.fragment and not b.includes]) >= 20


def test_every_fragment_marker_marks_a_python_block() -> None:
    marked = {(b.path, b.line) for b in BLOCKS if b.fragment}
    stray = []
    for path in DOCS:
        lines = path.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if line.strip() != FRAGMENT:
                continue
            fence = next((i for i in range(number, len(lines)) if lines[i].strip()), None)
            if fence is None or (path, fence + 1) not in marked:
                stray.append(f"{path.relative_to(ROOT)}:{number}")
    assert not stray, f"{FRAGMENT} must stand right above a ```python block: {stray}"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.name)
def test_example(block: Block, tmp_path: Path) -> None:
    if block.includes:
        runner = (ROOT / "tests" / "docs" / "test_examples.py").read_text()
        for included in block.includes:
            assert (ROOT / included).is_file(), included
            assert Path(included).name in runner, f"tests/docs/test_examples.py runs no {included}"
        return
    if block.fragment:
        compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        return
    script = tmp_path / "example.py"
    script.write_text(block.code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=TIMEOUT, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, f"{block.name} failed:\n{done.stdout}\n{done.stderr}"


def test_the_first_crawl_resumes_as_the_introduction_shows(tmp_path: Path) -> None:
    """docs/index.md runs its first crawl, kills it with SIGKILL after its first page and runs
    it again: the two runs print what its transcript shows, each page once."""
    doc = ROOT / "docs" / "index.md"
    [crawl] = [block for block in blocks(doc) if not block.fragment]
    text = doc.read_text()
    transcript = text[text.index("```text\n$ python first_crawl.py") :].split("```")[1]
    lines = transcript.splitlines()[1:]
    assert lines.count("$ python first_crawl.py") == 2 and "Killed" in lines
    shown = [line for line in lines if not line.startswith("$") and line != "Killed"]
    script = tmp_path / "first_crawl.py"
    script.write_text(crawl.code)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}  # as on a terminal
    first = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert first.stdout is not None
    printed = [first.stdout.readline().rstrip("\n")]  # its first page: then the kill
    first.kill()
    printed += first.stdout.read().splitlines()
    assert first.wait(TIMEOUT) == -signal.SIGKILL, "the first run ended before the kill"
    second = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT)  # fmt: skip
    assert second.returncode == 0, second.stderr
    assert printed + second.stdout.splitlines() == shown
