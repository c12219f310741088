"""Helpers the tests share (fixtures are in ``conftest.py``, which no test imports)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from crawlstore import Seed
from crawlstore.frontier import Frontier

#: The checkout, the tests' own files, their fixtures, and the shared fixtures beside the checkout.
ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
DATA = TESTS / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"


def digest(path: Path) -> str:
    """The file's SHA-256: a file that must stay unchanged, byte for byte."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: The ``make_frontier`` fixture: a frontier of each storage, made by the test.
MakeFrontier = Callable[..., Frontier]


def ordered_across_queues(frontier: Frontier) -> bool:
    """Whether the frontier's order across queues is exact: its storage has one partition
    (across partitions, pops take turns: ``frontier/partitioned.py``)."""
    return frontier.core.storage.capabilities.partitions == 1


def env_without(tmp_path: Path, module: str) -> dict[str, str]:
    """The environment of a child process in which importing ``module`` fails, as when the
    extra that brings it is not installed."""
    hidden = tmp_path / "hide" / module
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text(
        f"raise ModuleNotFoundError('No module named {module}', name={module!r})\n")  # fmt: skip
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(tmp_path / "hide"), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip


def seed(path: str, **fields: object) -> Seed:
    """``https://example.com/{path}`` with the given fields."""
    return Seed("GET", f"https://example.com/{path}", **fields)  # type: ignore[arg-type]


def path_of(popped: object) -> str | None:
    """The path of a ``Ready`` seed without its leading slash, or None for Wait and Empty."""
    from crawlstore import Ready

    if isinstance(popped, Ready):
        return popped.seed.url.split("/", 3)[3]
    return None


def drain(frontier: Frontier) -> list[str]:
    """Pop until nothing is ready, reporting each seed Done; the paths in pop order."""
    from crawlstore import Done, Ready

    out = []
    while isinstance(popped := frontier.pop(), Ready):
        out.append(path_of(popped) or "")
        frontier.report(Done(popped.seed))
    return out


def pop_seeds(frontier: Frontier, limit: int, **limits: object) -> list[Seed]:
    """The seeds of ``frontier.pop_many(limit, ...)`` (each carries its lease)."""
    return [ready.seed for ready in frontier.pop_many(limit, **limits)]  # type: ignore[arg-type]
