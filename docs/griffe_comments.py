"""A griffe extension for the API reference: ``#:`` comments document the attribute below them.

The code documents constants, enum members and fields with ``#:`` comments (as Sphinx reads
them); griffe reads only docstrings, so this turns the comment lines right above an attribute
into its docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import griffe


class HashColonComments(griffe.Extension):
    def on_attribute_instance(
        self, *, node: ast.AST | griffe.ObjectNode, attr: griffe.Attribute, **kwargs: Any
    ) -> None:
        if attr.docstring is not None or attr.lineno is None or not isinstance(attr.filepath, Path):
            return
        lines = attr.lines_collection[attr.filepath]
        comment: list[str] = []
        at = attr.lineno - 2  # the line above the assignment, 0-based
        while at >= 0 and lines[at].strip().startswith("#:"):
            comment.insert(0, lines[at].strip()[2:].strip())
            at -= 1
        if comment:
            attr.docstring = griffe.Docstring(
                "\n".join(comment), lineno=at + 2, endlineno=attr.lineno - 1, parent=attr
            )
