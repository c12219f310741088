"""The frontier: protocol, in-memory storage, facades and waiting helpers."""

from . import revisits, traps  # noqa: F401 (their facades register for the chain methods)
from .base import Frontier, FrontierCore, StateMap
from .core import CoreFrontier
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
from .policy import CrawlPolicy, Defaults, register_queue_key
from .protocol import (
    Admission,
    Backoff,
    Cancelled,
    Done,
    Empty,
    Failed,
    LastOutcome,
    Lease,
    Pop,
    QueueInfo,
    Ready,
    Reason,
    RecentFailure,
    Report,
    Reschedule,
    Retry,
    Skipped,
    Stats,
    Upcoming,
    URLStatus,
    Wait,
)
from .snapshot import Snapshot
from .waiting import anext_seed, next_seed
from .worker import AsyncWorker, Worker

__all__ = [
    "Admission",
    "AllowHosts",
    "AsyncWorker",
    "Backoff",
    "Cancelled",
    "CoreFrontier",
    "CrawlPolicy",
    "Dedup",
    "Defaults",
    "Done",
    "Empty",
    "Facade",
    "Failed",
    "Filter",
    "Frontier",
    "FrontierCore",
    "LastOutcome",
    "Lease",
    "MaxDepth",
    "Pop",
    "QueueInfo",
    "Ready",
    "Reason",
    "RecentFailure",
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
    "URLStatus",
    "Upcoming",
    "Wait",
    "Worker",
    "anext_seed",
    "next_seed",
    "register_queue_key",
]


def __getattr__(name: str) -> object:
    """``InMemFrontier`` and ``MemoryStorage``, which left this package, for one release."""
    if name in ("InMemFrontier", "MemoryStorage"):
        import importlib
        import warnings

        home = "crawlstore" if name == "InMemFrontier" else "crawlstore.storages"
        warnings.warn(f"import {name} from {home}: crawlstore.frontier holds the core and its "
                      "facades; the old place goes in the next release", DeprecationWarning,
                      stacklevel=2)  # fmt: skip
        # by name: the frontier is below both, and imports neither
        return getattr(importlib.import_module(home), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
