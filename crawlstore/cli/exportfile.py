"""An export as a file of JSON lines, one record a line, strict JSON (RFC 8259); and reading
one back, naming the line of whatever is wrong.

What JSON has no form for travels as an object of one key that starts with ``$``:

- bytes: ``{"$b": base64}``;
- a float that is not finite: ``{"$f": "Infinity"}``, ``{"$f": "-Infinity"}``, ``{"$f": "NaN"}``;
- a map whose keys are not all strings: ``{"$m": [[key, value], ...]}``;
- an object of the record's own with one key that starts with ``$``: ``{"$": object}``.

Reading also takes the bare ``Infinity``, ``-Infinity`` and ``NaN`` of exports written before
(which no strict JSON parser reads).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from ..errors import InvalidSnapshot
from ..textfiles import open_bytes

__all__ = ["ExportFile", "read_export", "to_line"]

_NON_FINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}
#: What each key of the form holds.
_FORM = {"$b": "base64", "$f": "Infinity, -Infinity or NaN", "$m": "[key, value] pairs",
         "$": "an object"}  # fmt: skip


def to_line(record: dict[str, Any]) -> str:
    """A record's line, without its newline."""
    return json.dumps(_encode(record), separators=(",", ":"), allow_nan=False)


def _encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        return {"$f": "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"}
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            return {"$m": [[_encode(k), _encode(v)] for k, v in value.items()]}
        out = {k: _encode(v) for k, v in value.items()}
        return {"$": out} if len(out) == 1 and next(iter(out)).startswith("$") else out
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


class _NotTheForm(ValueError):
    """A value that no export holds: a one-key object of the form that does not hold what its
    key says, an integer that does not fit in 64 bits."""


def _int(text: str) -> int:
    value = int(text)
    if not -(2**63) <= value < 2**64:
        raise _NotTheForm(f"{text:.40} is out of the range of a 64-bit integer")
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and next(iter(value)) in _FORM:
        ((key, inner),) = value.items()
        try:
            if key == "$b":
                return base64.b64decode(inner, validate=True)
            if key == "$f":
                return _NON_FINITE[inner]
            if key == "$m":
                return {_decode(k): _decode(v) for k, v in inner}
            return {k: _decode(v) for k, v in inner.items()}
        except _NotTheForm:
            raise
        except (TypeError, ValueError, KeyError, AttributeError):
            raise _NotTheForm(f'"{key}" holds {inner!r:.60}, not {_FORM[key]}') from None
    return {k: _decode(v) for k, v in value.items()}


@contextmanager
def read_export(path: str) -> Iterator[ExportFile]:
    """An export file (``-``: stdin), open to read, gzip or not by its first bytes."""
    with open_bytes(path) as source:
        yield ExportFile(path, source)


class ExportFile:
    """The records of an open export file, read a line at a time. An error of a record names
    its place in the stream (``InvalidSnapshot``'s ``record``), which ``line_of`` turns into
    its line."""

    def __init__(self, path: str, source: IO[bytes] | gzip.GzipFile) -> None:
        self.path, self._source = path, source
        self._place = 0  # of the latest record read
        self._blanks: list[int] = []  # the numbers of the lines that hold no record

    def records(self) -> Iterator[dict[str, Any]]:
        """The records; the end record once the rest of the file is read, which must hold
        nothing more."""
        end = None
        for number, text in enumerate(self._lines(), 1):
            if not text.strip():
                self._blanks.append(number)
                continue
            self._place += 1
            if end is not None:
                raise InvalidSnapshot("a record after the end record", record=self._place)
            record = self._parse(text)
            if record.get("type") != "end":
                yield record
            else:
                end = record
        if end is not None:
            yield end

    def _parse(self, text: str) -> dict[str, Any]:
        """The record of a line."""
        try:
            record = _decode(json.loads(text.rstrip("\r\n"), parse_int=_int))
        except json.JSONDecodeError as exc:
            raise InvalidSnapshot(f"not JSON ({exc.msg}, column {exc.colno})",
                                  record=self._place) from None  # fmt: skip
        except _NotTheForm as exc:
            raise InvalidSnapshot(str(exc), record=self._place) from None
        except RecursionError:
            raise InvalidSnapshot("not a record: nested too deep", record=self._place) from None
        if not isinstance(record, dict):
            raise InvalidSnapshot(f"not a record: {text[:80]!r}", record=self._place)
        return record

    def _lines(self) -> Iterator[str]:
        """The lines as text; one that cannot be read is named as the place of the record it
        would hold."""
        while True:
            try:
                line = self._source.readline().decode("utf-8")
            except EOFError:
                raise InvalidSnapshot("the gzip data ends before its end: the file is cut short",
                                      record=self._place + 1) from None  # fmt: skip
            except (gzip.BadGzipFile, zlib.error) as exc:
                raise InvalidSnapshot(f"the gzip data is damaged ({exc})",
                                      record=self._place + 1) from None  # fmt: skip
            except UnicodeDecodeError as exc:
                raise InvalidSnapshot(f"not UTF-8 text (byte {exc.start + 1} of the line)",
                                      record=self._place + 1) from None  # fmt: skip
            if not line:
                return
            yield line

    def line_of(self, place: int) -> int:
        """The line of the record at ``place`` in the stream (1 for the first)."""
        line = place
        for blank in self._blanks:
            if blank > line:
                break
            line += 1
        return line
