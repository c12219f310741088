"""Times in text output, for people: ISO 8601 in local time, with how far from now
(``--json`` keeps the epoch seconds)."""

from __future__ import annotations

import datetime as dt


def span(seconds: float) -> str:
    """A length of time, rounded for a person: 1.5s, 30s, 12m, 2.5h, 3.0d."""
    s = abs(seconds)
    if s < 10:
        return f"{s:.1f}s"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    if s < 172800:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


def local(t: float) -> str:
    """Epoch seconds as ISO 8601 in local time, with its offset."""
    return dt.datetime.fromtimestamp(t).astimezone().isoformat(timespec="seconds")


def shown(t: float, now: float) -> str:
    """``local(t)`` with how far from ``now``: ``... (in 5m)``, ``... (3.0h ago)``."""
    delta = t - now
    hint = "now" if abs(delta) < 0.5 else f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"
    return f"{local(t)} ({hint})"
