"""``crawlstore dashboard``: a live page of a running crawl, served locally from a store opened
read-only (``Dashboard``), with its panels as JSON and ``/metrics`` for Prometheus."""

from .server import Dashboard

__all__ = ["Dashboard"]
