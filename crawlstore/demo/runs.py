"""The demo's crawls: ``crawlstore crawl`` in a child process, its page lines read as they come
(and kept in a log file), stopped by the demo once its step is over: with SIGKILL part way,
or with SIGTERM (the crawler's clean stop) once what the step waits for is in the store."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from .site import DemoSite

__all__ = ["COMMITTED", "STALL", "Crawl", "DemoError", "Page", "command", "run_crawl", "when"]

Page = dict[str, Any]

#: The outcomes of a page line whose visit the store counts as done.
COMMITTED = ("done", "unchanged", "redirect")

#: Seconds without a page line after which a crawl is taken for stuck.
STALL = 60.0


def when(page: Page) -> float:
    """When the crawler began to fetch a page (epoch seconds, to the millisecond)."""
    return datetime.fromisoformat(page["at"]).timestamp()


class DemoError(Exception):
    """A step of the demo could not run; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class Crawl:
    """One run of the crawler: its page lines, the JSON summary it ended with (None when it
    was killed), and how long it ran."""

    pages: list[Page]
    summary: dict[str, Any] | None
    seconds: float


def command(site: DemoSite, store: Path, revisit: float, budget: int, *extra: str) -> list[str]:
    """The crawl of the demo's site into ``store``: page lines and the summary on stdout."""
    hosts = sorted({origin.split("//")[1].split(":")[0] for origin in site.origins})
    return [sys.executable, "-m", "crawlstore", "crawl", site.url(site.page_path(0)),
            "--store", str(store), *(a for h in hosts for a in ("--allow-host", h)),
            "--delay", "0.02", "--concurrency", "8", "--retry-delay", "0.2", "--idle", "2",
            "--trap-budget", str(budget), "--tag", r"/\d+$=page",
            "--revisit", f"page={revisit:g}s", "--out", "-", "--quiet", "--json",
            *extra]  # fmt: skip


def run_crawl(args: list[str], log: Path, step: Callable[[Page], bool], *, kill: bool) -> Crawl:
    """Run the crawl ``args``, appending each page line to ``log`` and passing it to ``step``,
    which says when the step is over; then stop the crawl: with SIGKILL when ``kill`` (the
    lines it wrote before are read to the end), with SIGTERM otherwise. A crawl that fails,
    ends before its kill or writes no page for ``STALL`` seconds raises ``DemoError``."""
    started = time.monotonic()
    pages: list[Page] = []
    summary: dict[str, Any] | None = None
    sent: signal.Signals | None = None
    with tempfile.TemporaryFile() as errors, log.open("a", encoding="utf-8") as out:
        child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=errors, env=_env(),
                                 text=True)  # fmt: skip
        assert child.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read, args=(child.stdout, lines), daemon=True).start()
        try:
            while (line := _next(lines)) is not None:
                if (record := _record(line)) is None:
                    continue
                if "url" not in record:
                    summary = record
                    continue
                out.write(line)
                pages.append(record)
                if sent is None and step(record):
                    sent = signal.SIGKILL if kill else signal.SIGTERM
                    child.send_signal(sent)
            code = child.wait()
        finally:
            if child.poll() is None:  # stuck, or the demo interrupted
                child.kill()
                child.wait()
        if kill and code != -signal.SIGKILL:
            raise DemoError(f"the crawl ended before the kill (exit {code}){_said(errors)}")
        stopped = (130, -signal.SIGTERM) if sent else ()  # SIGTERM in its run, or as it ended
        if not kill and code != 0 and code not in stopped:
            raise DemoError(f"the crawl failed (exit {code}){_said(errors)}")
    return Crawl(pages, summary, time.monotonic() - started)


def _next(lines: queue.Queue[str | None]) -> str | None:
    try:
        return lines.get(timeout=STALL)
    except queue.Empty:
        raise DemoError(f"the crawl wrote no page for {STALL:g} seconds: stopped it") from None


def _record(line: str) -> dict[str, Any] | None:
    """A line's JSON object; None for a line cut by the kill."""
    with suppress(json.JSONDecodeError):
        record = json.loads(line)
        return record if isinstance(record, dict) and line.endswith("\n") else None
    return None


def _read(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _said(errors: IO[bytes]) -> str:
    """The last line the crawl wrote to stderr, to end the demo's one-line error with."""
    errors.seek(0)
    said = [line for line in errors.read().decode(errors="replace").splitlines() if line.strip()]
    return f": {said[-1].strip()}" if said else ""


def _env() -> dict[str, str]:
    """The environment, with the loopback addresses kept away from any proxy."""
    loopback = ",".join(f"127.0.0.{i}" for i in range(1, 20))
    no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY"), loopback]))
    return {**os.environ, "NO_PROXY": no_proxy, "no_proxy": no_proxy}
