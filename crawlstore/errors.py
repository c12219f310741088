"""Typed errors: every problem crawlstore reports is one of these, and names what was wrong."""

from __future__ import annotations


class CrawlstoreError(Exception):
    """Base class of every error crawlstore raises on purpose."""


class InvalidSeed(CrawlstoreError, ValueError):
    """A seed (URL, method, header, body, tag, priority or depth) that crawlstore refuses."""


class InvalidSnapshot(CrawlstoreError, ValueError):
    """Snapshot bytes that do not decode to a crawlstore snapshot."""


class NotInFlight(CrawlstoreError, LookupError):
    """A report for a seed that the frontier did not hand out (or whose lease already ended)."""
