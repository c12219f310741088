"""Prometheus metrics under the reference service's names, so that its Grafana dashboard
works (``pip install -e '.[urlfrontier]'`` brings ``prometheus_client``); without a
metrics port they are counted nowhere."""

from __future__ import annotations

from typing import Any

__all__ = ["Metrics"]


class _Nothing:
    def inc(self, amount: float = 1) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass

    def labels(self, *values: str) -> _Nothing:
        return self


class Metrics:
    """The service's counters; ``registry``: a ``prometheus_client`` registry to count them
    in (None: not counted)."""

    def __init__(self, registry: Any = None) -> None:
        if registry is None:
            nothing: Any = _Nothing()
            self.get_calls = self.got = self.get_latency = nothing
            self.put_calls = self.discovered_calls = self.put = nothing
            self.discovered = self.ignored = self.completed = nothing
            return
        from prometheus_client import Counter, Summary

        def counter(name: str, doc: str, *labels: str) -> Any:
            return Counter(name, doc, labels, registry=registry)

        self.get_calls = counter("frontier_getURLs_calls", "GetURLs calls")
        self.got = counter("frontier_getURLs", "URLs handed out by GetURLs")
        self.get_latency = Summary("frontier_getURLs_latency_seconds", "GetURLs latency",
                                   registry=registry)  # fmt: skip
        self.put_calls = counter("frontier_putURLs_calls", "PutURLs calls")
        self.discovered_calls = counter("frontier_putDiscovered_calls", "PutDiscovered calls")
        self.put = counter("frontier_putURLs", "URLs received")
        self.discovered = counter("frontier_putURLs_discovered", "URLs received, discovered "
                                  "or known", "discovered")  # fmt: skip
        self.ignored = counter("frontier_putURLs_ignored", "URLs acknowledged SKIPPED unread")
        self.completed = counter("frontier_putURLs_completed", "known URLs marked completed")
