"""The docs speak to users about the library: every public name is documented, and nothing in
them points at the project's own history or at files users do not have."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT

import crawlstore
from crawlstore import (
    AsyncWorker,
    BloomSeen,
    Frontier,
    InMemFrontier,
    InMemSeen,
    InMemValidators,
    ManualClock,
    Seed,
    Snapshot,
    Stats,
    Store,
    Validator,
    Worker,
)
from crawlstore.integrations import httpx as httpx_glue
from crawlstore.revalidate import Revalidate
from crawlstore.store import StoreBloomSeen, StoreSeen, StoreValidators

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
TEXT = "\n".join(p.read_text() for p in DOCS)

CLASSES = [Frontier, InMemFrontier, Store, StoreSeen, StoreBloomSeen,
           StoreValidators, InMemSeen, BloomSeen, InMemValidators, Revalidate, Snapshot, Stats,
           Validator, Seed, ManualClock, Worker, AsyncWorker]  # fmt: skip


def _public(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_public_method_is_documented(cls: type) -> None:
    missing = [n for n in _public(cls) if not re.search(rf"`[^`]*\b{n}\b[^`]*`", TEXT)]
    assert not missing, f"{cls.__name__}: {missing} appear in no code span of the docs"


def test_every_exported_name_is_documented() -> None:
    names = [*crawlstore.__all__, *httpx_glue.__all__]
    missing = [n for n in names if not re.search(rf"`[^`]*\b{n}\b[^`]*`", TEXT)]
    assert not missing, missing


@pytest.mark.parametrize(
    "pattern", [r"\bspire\b", r"shared/", r"\(issue \d+\)", r"\bissue \d+\b", r"this session"]
)
def test_no_history_and_no_outside_files(pattern: str) -> None:
    found = [(p.name, m.group(0)) for p in DOCS for m in re.finditer(pattern, p.read_text(), re.I)]
    assert not found, found


def test_what_len_and_stats_count_is_said() -> None:
    frontier = (ROOT / "docs" / "concepts" / "frontier.md").read_text()
    assert re.search(r"`len\(f\)`[^\n]*revisits", frontier)
    assert re.search(r"`stats\(\)`[^\n]*whole life", frontier)


def test_nothing_above_the_storages_names_one() -> None:
    """Views, facades and integrations test capabilities, never which storage they have."""
    package = ROOT / "crawlstore"
    above = [*sorted((package / "frontier").glob("*.py")),
             *sorted((package / "integrations").glob("*.py")),
             package / "revalidate.py", package / "revisit.py"]  # fmt: skip
    found = [
        (p.name, m.group(0))
        for p in above
        if p.name != "memory.py"  # the memory storage itself
        for m in re.finditer(
            r"isinstance\([^)]*(MemoryStorage|LmdbStorage|StoreFrontier|InMemFrontier)",
            p.read_text(),
        )
    ]
    assert not found, found


def test_capabilities_are_what_the_docs_say(tmp_path: Path) -> None:
    memory = InMemFrontier().storage.capabilities
    assert (memory.persistent, memory.shared, memory.durability) == (False, False, "memory")
    for mode, durability in (("safe", "disk"), ("full", "disk"), ("nosync", "os")):
        with Store.open(tmp_path / f"{mode}.lmdb", durability=mode) as store:
            caps = store.capabilities
            assert (caps.persistent, caps.shared, caps.atomic_views) == (True, True, True)
            assert caps.durability == durability
