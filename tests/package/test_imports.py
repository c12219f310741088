"""The layers of crawlstore, read from its import graph: no cycle, storages that are leaves behind
the storage interface, and no module using another module's private name.

An edge is an import at module level or inside a function; one under ``if TYPE_CHECKING:``
counts for the layers but not for cycles.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "crawlstore"
#: What a storage may import besides its own package: the interface, the shared codecs and the
#: value modules.
STORAGE_MAY_IMPORT = {
    "crawlstore.frontier.spi", "crawlstore.frontier.policy", "crawlstore.storages._records",
    "crawlstore.seed", "crawlstore.url", "crawlstore.errors", "crawlstore.journal",
    "crawlstore.clock", "crawlstore.extras",
}  # fmt: skip
STORAGES = (
    "crawlstore.storages._memory",
    "crawlstore.storages._lmdb",
    "crawlstore.storages._redis",
)


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    names: tuple[str, ...]  # the names imported from ``target`` (``from target import names``)
    typing_only: bool
    line: int


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _typing_only_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines.update(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def _edges(module: str, path: Path) -> Iterator[Edge]:
    tree = ast.parse(path.read_text())
    typing_only = _typing_only_lines(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "crawlstore":
                    yield Edge(module, alias.name, (), node.lineno in typing_only, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "crawlstore":
                continue
            names = tuple(alias.name for alias in node.names)
            submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
            for sub in submodules:
                yield Edge(module, sub, (), node.lineno in typing_only, node.lineno)
            rest = tuple(n for n in names if f"{target}.{n}" not in MODULES)
            if rest or not submodules:
                yield Edge(module, target, rest, node.lineno in typing_only, node.lineno)


EDGES = [edge for module, path in MODULES.items() for edge in _edges(module, path)]


def _cycles() -> list[set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for edge in EDGES:
        if not edge.typing_only and edge.target in MODULES and edge.target != edge.source:
            graph[edge.source].add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_is_read() -> None:
    assert "crawlstore.store" in MODULES and "crawlstore.storages._lmdb.engine" in MODULES
    assert any(e.source == "crawlstore.store" and e.target == "crawlstore.views" for e in EDGES)


def test_no_import_cycle() -> None:
    assert not (cycles := _cycles()), f"import cycles: {[sorted(c) for c in cycles]}"


def _storage_of(module: str) -> str | None:
    return next((s for s in STORAGES if module == s or module.startswith(s + ".")), None)


@pytest.mark.parametrize("storage", STORAGES)
def test_a_storage_imports_only_the_interface_and_values(storage: str) -> None:
    wrong = [
        f"{e.source}:{e.line} imports {e.target}"
        for e in EDGES
        if _storage_of(e.source) == storage
        and _storage_of(e.target) != storage
        and e.target not in STORAGE_MAY_IMPORT
    ]
    assert not wrong, wrong


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _owner(module: str) -> str:
    """The package a private module belongs to (which may use it)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if _private(part):
            return ".".join(parts[:i])
    return module


def test_no_module_uses_another_module_s_private_names() -> None:
    wrong = []
    for e in EDGES:
        if e.target not in MODULES or e.target == e.source:
            continue
        owner = _owner(e.target)
        if owner != e.target and not (e.source == owner or e.source.startswith(owner + ".")):
            wrong.append(f"{e.source}:{e.line} imports the private module {e.target}")
        wrong.extend(f"{e.source}:{e.line} imports {e.target}.{n}" for n in e.names if _private(n))
    assert not wrong, wrong
