"""Named points of a unit's commit, where a test stops its process to see what a pause there
does (``hook``, set in the process to stop). The names say what has happened, not which
server call did it, so they hold whatever the calls are.

- ``FIRST_WRITE``: the unit's first write reached a server (on a cluster its journal; on one
  server its whole commit), and nothing after it was sent.
- ``BETWEEN_SLOTS``: some of the slots the unit writes have its writes, others not yet.
- ``POSTED``: a push's posts are in their inboxes (a store in partitions), not folded yet.
- ``FOLDING``: a unit read its bucket's inbox to fold it, and sent nothing of its commit.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["BETWEEN_SLOTS", "FIRST_WRITE", "FOLDING", "POSTED", "hook", "reached"]

FIRST_WRITE = "first-write"
BETWEEN_SLOTS = "between-slots"
POSTED = "posted"
FOLDING = "folding"

#: Called with the point's name at each point (None: nothing to do).
hook: Callable[[str], object] | None = None


def reached(point: str) -> None:
    if hook is not None:
        hook(point)
