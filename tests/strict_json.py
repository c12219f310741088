"""Every line of an export, read by a strict JSON parser (RFC 8259): what other tools (``jq``,
JavaScript's ``JSON.parse``) read."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

__all__ = ["strict_lines"]


def _refuse(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def strict_lines(export: Path | str) -> list[Any]:
    """The values of an export's lines, a file (gzip by its magic bytes) or the text itself;
    a line that is not strict JSON (``NaN``, ``Infinity``, ``-Infinity``) fails the test."""
    if isinstance(export, Path):
        data = export.read_bytes()
        export = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    lines = export.splitlines()
    assert lines, "an export has at least its crawl and end records"
    return [json.loads(line, parse_constant=_refuse) for line in lines]
