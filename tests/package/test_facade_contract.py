"""Facades ask of the core only what ``FrontierCore`` publishes: a frontier's operations, the
crawl's name, clock and policy, its facade state, refusals, schedules and next revisit."""

from __future__ import annotations

import ast
import inspect

import pytest
from helpers import ROOT

from crawlstore.frontier import CoreFrontier, Frontier, FrontierCore

#: The modules of facades (each class there wraps another frontier).
FACADE_MODULES = ["facades.py", "traps.py", "revisits.py", "base.py"]


def _published() -> set[str]:
    names = {n for n in dir(FrontierCore) if not n.startswith("_")}
    return names | set(FrontierCore.__annotations__)


def _core_calls(source: str) -> set[str]:
    """Every ``<x>.core.<name>`` of a module."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                and node.value.attr == "core"):  # fmt: skip
            found.add(node.attr)
    return found


@pytest.mark.parametrize("module", FACADE_MODULES)
def test_a_facade_asks_the_core_only_what_is_published(module: str) -> None:
    source = (ROOT / "crawlstore" / "frontier" / module).read_text()
    assert _core_calls(source) - _published() == set()


def test_the_check_sees_a_call_outside_the_contract() -> None:
    assert _core_calls("self.core.unit(crawl)\nx = self.core.state('a')") == {"unit", "state"}
    assert "unit" not in _published() and "state" in _published()


def test_the_core_implements_the_contract() -> None:
    assert issubclass(CoreFrontier, FrontierCore) and issubclass(FrontierCore, Frontier)
    abstract = {n for n, v in vars(FrontierCore).items() if getattr(v, "__isabstractmethod__", 0)}
    assert {"policy", "state", "refuse", "refuse_many", "schedule", "next_revisit"} <= abstract
    assert not inspect.isabstract(CoreFrontier)
