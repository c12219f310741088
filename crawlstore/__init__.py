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
from .url import FINGERPRINT_VERSION, Fingerprint, canonicalize, fingerprint

__version__ = "0.1.0"

__all__ = [
    "FINGERPRINT_VERSION",
    "Admission",
    "Backoff",
    "BloomSeen",
    "Cancelled",
    "Clock",
    "Done",
    "Empty",
    "Failed",
    "Fingerprint",
    "Frontier",
    "InMemFrontier",
    "InMemSeen",
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
    "Wait",
    "canonicalize",
    "errors",
    "fingerprint",
]
