"""The frontier: protocol, in-memory storage, facades and waiting helpers."""

from .base import Frontier, StateMap
from .facades import (
    AllowHosts,
    Dedup,
    Facade,
    Filter,
    MaxDepth,
    RetryFacade,
    RetryPolicy,
    Scored,
    TagBackoff,
)
from .memory import InMemFrontier
from .protocol import (
    Admission,
    Backoff,
    Cancelled,
    Done,
    Empty,
    Failed,
    Pop,
    Ready,
    Reason,
    Report,
    Reschedule,
    Retry,
    Skipped,
    Stats,
    Wait,
)
from .snapshot import Snapshot
from .waiting import anext_seed, next_seed

__all__ = [
    "Admission",
    "AllowHosts",
    "Backoff",
    "Cancelled",
    "Dedup",
    "Done",
    "Empty",
    "Facade",
    "Failed",
    "Filter",
    "Frontier",
    "InMemFrontier",
    "MaxDepth",
    "Pop",
    "Ready",
    "Reason",
    "Report",
    "Reschedule",
    "Retry",
    "RetryFacade",
    "RetryPolicy",
    "Scored",
    "Skipped",
    "Snapshot",
    "StateMap",
    "Stats",
    "TagBackoff",
    "Wait",
    "anext_seed",
    "next_seed",
]
