"""crawlstore: an embedded, crash-safe crawl-state store for Python crawlers."""

from . import errors
from .clock import Clock, ManualClock, SyncedClock
from .frontier import (
    Admission,
    AsyncWorker,
    Backoff,
    Cancelled,
    Defaults,
    Done,
    Empty,
    Failed,
    Frontier,
    LastOutcome,
    Lease,
    QueueInfo,
    Ready,
    Reason,
    RecentFailure,
    Retry,
    RetryPolicy,
    Skipped,
    Snapshot,
    Stats,
    Upcoming,
    URLStatus,
    Wait,
    Worker,
    register_queue_key,
)
from .memory import InMemFrontier
from .seed import Seed
from .seen import BloomSeen, InMemSeen, SeenSet
from .store import Durability, Store
from .url import FINGERPRINT_VERSION, Fingerprint, canonicalize, fingerprint
from .validators import InMemValidators, Validator

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    if name == "StoreFrontier":
        from . import store

        return store.__getattr__(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FINGERPRINT_VERSION",
    "Admission",
    "AsyncWorker",
    "Backoff",
    "BloomSeen",
    "Cancelled",
    "Clock",
    "Defaults",
    "Done",
    "Durability",
    "Empty",
    "Failed",
    "Fingerprint",
    "Frontier",
    "InMemFrontier",
    "InMemSeen",
    "InMemValidators",
    "LastOutcome",
    "Lease",
    "ManualClock",
    "QueueInfo",
    "Ready",
    "Reason",
    "RecentFailure",
    "Retry",
    "RetryPolicy",
    "Seed",
    "SeenSet",
    "Skipped",
    "Snapshot",
    "Stats",
    "Store",
    "SyncedClock",
    "URLStatus",
    "Upcoming",
    "Validator",
    "Wait",
    "Worker",
    "canonicalize",
    "errors",
    "fingerprint",
    "register_queue_key",
]
