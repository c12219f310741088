"""crawlstore: an embedded, crash-safe crawl-state store for Python crawlers."""

from . import errors
from .clock import Clock, ManualClock
from .frontier import (
    Admission,
    Backoff,
    Cancelled,
    Done,
    Empty,
    Failed,
    Frontier,
    InMemFrontier,
    Ready,
    Reason,
    Reschedule,
    Retry,
    RetryPolicy,
    Skipped,
    Snapshot,
    Stats,
    Wait,
)
from .seed import Seed
from .seen import BloomSeen, InMemSeen, SeenSet
from .store import Durability, Store, StoreFrontier
from .url import FINGERPRINT_VERSION, Fingerprint, canonicalize, fingerprint
from .validators import InMemValidators, Validator

__version__ = "0.1.0"

__all__ = [
    "FINGERPRINT_VERSION",
    "Admission",
    "Backoff",
    "BloomSeen",
    "Cancelled",
    "Clock",
    "Done",
    "Durability",
    "Empty",
    "Failed",
    "Fingerprint",
    "Frontier",
    "InMemFrontier",
    "InMemSeen",
    "InMemValidators",
    "ManualClock",
    "Ready",
    "Reason",
    "Reschedule",
    "Retry",
    "RetryPolicy",
    "Seed",
    "SeenSet",
    "Skipped",
    "Snapshot",
    "Stats",
    "Store",
    "StoreFrontier",
    "Validator",
    "Wait",
    "canonicalize",
    "errors",
    "fingerprint",
]
