"""``/metrics``: every crawl's counters and gauges in the Prometheus text format, read at each
scrape (``prometheus_client``, the ``dashboard`` extra)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..extras import install_hint
from .panels import Panels

__all__ = ["exposition"]

#: The gauges of a crawl (``crawlstore_urls{state=...}``) and its counters since it began
#: (``crawlstore_<name>_total``).
GAUGES = ("queued", "in_flight", "scheduled")
COUNTERS = ("admitted", "popped", "done", "failed", "retried", "skipped", "cancelled",
            "unchanged")  # fmt: skip


def exposition(panels: Panels) -> bytes:
    """The metrics of every crawl of the store, now."""
    try:
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
    except ImportError:
        return f"# /metrics needs prometheus_client: {install_hint('dashboard')}\n".encode()

    class Crawls:
        def collect(self) -> Iterator[Any]:
            urls = GaugeMetricFamily("crawlstore_urls", "URLs of a crawl in a state, now",
                                     labels=["crawl", "state"])  # fmt: skip
            counters = {name: CounterMetricFamily(f"crawlstore_{name}", f"URLs {name} since "
                                                  "the crawl began", labels=["crawl"])
                        for name in COUNTERS}  # fmt: skip
            refused = CounterMetricFamily("crawlstore_refused", "pushes refused, by reason",
                                          labels=["crawl", "reason"])  # fmt: skip
            size = GaugeMetricFamily("crawlstore_file_bytes", "the store file's size")
            revisits = GaugeMetricFamily(
                "crawlstore_revisits_due",
                "revisits due in the next hour (overdue ones too)",
                labels=["crawl"],
            )
            traps = GaugeMetricFamily("crawlstore_trap_prefixes_blocked", "URL prefixes at a "
                                      "trap budget", labels=["crawl"])  # fmt: skip
            for crawl in panels.crawls():
                summary = panels.summary(crawl)
                stats = summary["stats"]
                for state in GAUGES:
                    urls.add_metric([crawl, state], stats[state])
                for name, family in counters.items():
                    family.add_metric([crawl], stats[name])
                for reason, n in stats["refused"].items():
                    refused.add_metric([crawl, reason], n)
                revisits.add_metric([crawl], panels.revisits_due(crawl))
                traps.add_metric([crawl], panels.traps_blocked(crawl))
                if summary["store"]["file_bytes"] is not None:
                    size.samples.clear()
                    size.add_metric([], summary["store"]["file_bytes"])
            yield urls
            yield from counters.values()
            yield refused
            yield revisits
            yield traps
            if size.samples:
                yield size

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Crawls())
    return bytes(generate_latest(registry))
