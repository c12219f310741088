"""Scrapy JOBDIR migration: the requests a stopped Scrapy job would resume and the request
fingerprints its dupefilter saw, read with Scrapy's own loaders; ``import_jobdir`` puts them
into a new crawl of a store.

A request becomes a seed (method, URL, headers, body, priority, depth), with everything else
``Request.to_dict()`` holds under ``seed.meta["scrapy"]``; ``seed_to_dict`` gives the dict
back for ``request_from_dict``. The seen set gets the first 16 bytes of each fingerprint.

Needs Scrapy (``pip install -e '.[scrapy]'``). A JOBDIR's queues are pickles: import only
a JOBDIR whose code you would run, as Scrapy itself warns.
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import pickle
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..extras import install_hint

try:
    import scrapy
    from queuelib import queue
    from scrapy import dupefilters, squeues
    from scrapy.pqueues import ScrapyPriorityQueue, _path_safe
except ImportError as exc:  # the CLI names the extra
    raise ImportError(f"reading a Scrapy JOBDIR needs {install_hint('scrapy')}: {exc}") from exc

from ..errors import InvalidSeed, JobdirError
from ..seed import Seed
from .requests import FINGERPRINT_BYTES as _FP
from .requests import SCHEME, seed_from_dict

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.pqueues import QueueProtocol

    from ..frontier.core import CoreFrontier
    from ..store import Store

__all__ = ["JobdirImport", "import_jobdir", "read_fingerprints", "read_requests"]

log = logging.getLogger("crawlstore.scrapy")

#: Seeds pushed a transaction, fingerprints inserted a transaction.
_BATCH, _SEEN_BATCH = 1000, 4096
_SQLITE = b"SQLite format 3\x00"


# -- reading a JOBDIR -----------------------------------------------------------------------------


def _loads(data: bytes) -> Any:
    """A queue record: pickled (Scrapy's default disk queues) or marshalled."""
    return pickle.loads(data) if data[:1] == b"\x80" else marshal.loads(data)


#: Scrapy's disk queues, reading pickle or marshal records as they come.
_LIFO: Any = squeues._serializable_queue(queue.LifoDiskQueue, pickle.dumps, _loads)  # type: ignore[arg-type]
_FIFO: Any = squeues._serializable_queue(queue.FifoDiskQueue, pickle.dumps, _loads)  # type: ignore[arg-type]


class _Reader:
    """A copy of a JOBDIR's ``requests.queue``, and the queue files opened in it."""

    def __init__(self, original: Path, copy: Path) -> None:
        self.original, self.copy = original, copy
        self.opened: set[Path] = set()

    def name(self, path: Path) -> str:
        """The path in the JOBDIR of a path in the copy (what messages name)."""
        return str(self.original / path.relative_to(self.copy))

    def priority_queue(self, key: Path, priorities: object) -> ScrapyPriorityQueue:
        """Scrapy's own priority queue over the downstream queues at ``key``."""
        if not isinstance(priorities, list) or not all(type(p) is int for p in priorities):
            raise JobdirError(f"{self.name(self.copy)}/active.json: not lists of priorities")
        for p in priorities:
            if not (key / str(p)).exists() and not (key / f"{p}s").exists():
                raise JobdirError(f"{self.name(key / str(p))}: named by active.json but not "
                                  "there (the job did not stop cleanly)")  # fmt: skip
        downstream = cast("type[QueueProtocol]", _Queue)
        return ScrapyPriorityQueue(cast("Crawler", self), downstream, str(key), priorities,
                                   start_queue_cls=downstream)  # fmt: skip

    def queues(self) -> list[ScrapyPriorityQueue]:
        """The priority queues active.json names (one, or one a download slot in slot order),
        each queue file they open checked; files nothing opens are refused."""
        active = self.copy / "active.json"
        if not active.exists():
            if any(p.is_file() for p in self.copy.rglob("*")):
                raise JobdirError(f"{self.name(active)} is missing, but queues are there: the "
                                  "job did not stop cleanly, and Scrapy would resume none of "
                                  "them")  # fmt: skip
            return []
        try:
            state = json.loads(active.read_text(encoding="utf-8"))
        except (ValueError, OSError) as exc:
            raise JobdirError(f"{self.name(active)}: not JSON ({exc})") from None
        if isinstance(state, dict):  # DownloaderAwarePriorityQueue: one a download slot
            found = [self.priority_queue(self.copy / _path_safe(str(slot)), state[slot])
                     for slot in sorted(state)]  # fmt: skip
        else:
            found = [self.priority_queue(self.copy, state)]
        for path in sorted(self.copy.rglob("*")):
            if path.is_file() and path != active and not {path, path.parent} & self.opened:
                raise JobdirError(f"{self.name(path)}: a queue active.json does not name (the "
                                  "job did not stop cleanly, and Scrapy would not resume "
                                  "it)")  # fmt: skip
        return found


class _Queue:
    """One downstream queue, opened with Scrapy's class for what is on disk (LIFO: a file,
    FIFO: a directory); what goes wrong is a ``JobdirError`` naming the file. Scrapy's
    priority queue builds it with ``from_crawler(crawler, key)``: the "crawler" is the
    ``_Reader``."""

    def __init__(self, reader: _Reader, path: Path) -> None:
        self.path, self.name, self.read = path, reader.name(path), 0
        self._lifo = path.is_file()
        if not path.exists():  # a priority with no queue of this kind
            self._q: Any = queue.FifoMemoryQueue()
            self.total = 0
            return
        reader.opened.add(path)  # a LIFO file, or a FIFO directory of chunks and info.json
        if self._lifo and _starts_with(path, _SQLITE):
            raise JobdirError(f"{self.name}: a SQLite queue, which this import does not read "
                              "(its file does not say whether it is FIFO or LIFO)")  # fmt: skip
        try:
            self._q = _LIFO(str(path)) if self._lifo else _FIFO(str(path))
        except Exception as exc:  # a header or info.json that does not read
            raise JobdirError(f"{self.name}: a queue that does not open ({exc!r})") from None
        self.total = len(self._q)

    @classmethod
    def from_crawler(cls, crawler: Any, key: str) -> _Queue:
        return cls(crawler, Path(key))

    def pop(self) -> Any:
        try:
            request = self._q.pop()
        except (ImportError, AttributeError) as exc:
            raise JobdirError(f"{self.name}: request {self.read + 1} needs code that does not "
                              f"import here ({exc}): run the import where the Scrapy project "
                              "imports") from None  # fmt: skip
        except Exception as exc:  # whatever a damaged record makes queuelib or pickle raise
            raise self._damaged(f"request {self.read + 1} does not read ({exc!r})") from None
        if request is None and len(self._q):
            raise self._damaged("it ends early")
        if request is not None and not (isinstance(request, dict) and "url" in request):
            raise self._damaged(f"request {self.read + 1} is not a request dict")
        self.read += 1
        return request

    def _damaged(self, problem: str) -> JobdirError:
        header = "count header" if self._lifo else "info.json"
        return JobdirError(f"{self.name}: damaged: {problem}; its {header} counts {self.total} "
                           f"requests, {self.read} were read")  # fmt: skip

    def _left(self) -> bool:
        """Whether the queue, popped empty, still holds data (pushed after its last close)."""
        if self._lifo:
            return os.path.getsize(self.path) > 4  # only the count header is left
        tail, _, offset = self._q.info["tail"]
        chunks = [int(p.name[1:]) for p in self.path.glob("q*") if p.name[1:].isdigit()]
        head = self.path / f"q{tail:05d}"
        return any(n > tail for n in chunks) or (head.exists() and head.stat().st_size > offset)

    def close(self) -> None:
        """Scrapy's priority queue closes a queue once it is empty: nothing may be left."""
        if self.path.exists() and not len(self._q) and self._left():
            raise self._damaged("it holds more requests than that (the job did not stop "
                                "cleanly)")  # fmt: skip
        self._q.close()

    def __len__(self) -> int:
        return len(self._q)


def read_requests(jobdir: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The request dicts (``Request.to_dict(spider=...)``) a Scrapy job stopped cleanly in
    ``jobdir`` resumes, in the order its scheduler hands them out while nothing downloads.
    ``JobdirError`` names a queue that is damaged or was left by an unclean stop. It reads a
    copy of the queues (in the temporary directory): the JOBDIR is left as it is."""
    original = Path(jobdir, "requests.queue")
    if not original.is_dir():
        return
    with tempfile.TemporaryDirectory(prefix="crawlstore-jobdir-") as tmp:
        copied = Path(tmp, "requests.queue")
        shutil.copytree(original, copied)
        queues = _Reader(original, copied).queues()
        slots = [q for q in queues if len(q)]
        at = 0
        while slots:  # DownloaderAwarePriorityQueue's order: the next slot after the last one
            at %= len(slots)
            request = slots[at].pop()
            if request is None or not len(slots[at]):
                del slots[at]
            else:
                at += 1
            if request is not None:
                yield cast("dict[str, Any]", request)


def read_fingerprints(jobdir: str | os.PathLike[str]) -> Iterator[bytes]:
    """The request fingerprints of ``jobdir``'s ``requests.seen``, as raw bytes: Scrapy's
    binary form (2.19 on, read with its own reader) or the hex lines of earlier versions; a
    last one cut short by an unclean stop is left out, with a warning."""
    path = Path(jobdir, "requests.seen")
    if not path.exists():
        return
    if _starts_with(path, b"\x00"):  # a length prefix: hex lines start with a hex digit
        yield from _binary(path)
        return
    with path.open("rb") as lines:
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if not text:
                continue
            if not line.endswith(b"\n"):  # the last line, cut by an unclean stop
                log.warning("%s, line %d: the last fingerprint is cut short (an unclean "
                            "stop): left out", path, number)  # fmt: skip
                return
            try:
                fp = bytes.fromhex(text.decode("ascii"))
            except ValueError:
                raise JobdirError(f"{path}, line {number}: not a hex fingerprint: "
                                  f"{text[:60]!r}") from None  # fmt: skip
            yield fp


def _binary(path: Path) -> Iterator[bytes]:
    read = getattr(dupefilters, "_read_fingerprints", None)
    if read is None:
        raise JobdirError(f"{path} is in the binary form of Scrapy 2.19 and later, which this "
                          f"Scrapy ({scrapy.__version__}) does not read")  # fmt: skip
    data = path.read_bytes()  # as Scrapy reads it
    used = 0
    for fp in read(data):
        used += 2 + len(fp)
        yield fp
    if used < len(data):
        log.warning("%s: its last fingerprint is cut short (an unclean stop): left out, as "
                    "Scrapy does", path)  # fmt: skip


def _starts_with(path: Path, magic: bytes) -> bool:
    with path.open("rb") as file:
        return file.read(len(magic)) == magic


# -- the import -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobdirImport:
    """What ``import_jobdir`` did: requests read from the queues, seeds queued, requests
    skipped (a seed cannot hold them) and left out as duplicates (their URL was queued
    already), both named in warnings; fingerprints put in the seen set."""

    crawl: str
    requests: int
    queued: int
    skipped: int
    duplicates: int
    fingerprints: int


def import_jobdir(
    store: Store, jobdir: str | os.PathLike[str], *, crawl: str = "default"
) -> JobdirImport:
    """Put what a Scrapy job stopped in ``jobdir`` would resume into ``crawl``, a new crawl of
    ``store``: each queued request as a seed, pushed straight into its frontier (not through
    dedup), and the first 16 bytes of each of ``requests.seen``'s fingerprints into its seen
    set, which the crawl's state records as keyed by Scrapy's fingerprints. All or nothing:
    a ``JobdirError`` (a damaged queue, one an unclean stop left) leaves no trace."""
    root = Path(jobdir)
    if not (root / "requests.queue").is_dir() and not (root / "requests.seen").is_file():
        raise JobdirError(f"{root} is not a Scrapy JOBDIR: no requests.queue/, no "
                          "requests.seen")  # fmt: skip
    counts: Counter[str] = Counter()
    with store.new_crawl(crawl) as frontier:
        frontier.core.state("seen")["fingerprints"] = SCHEME
        batch: list[Seed] = []
        for request in read_requests(root):
            counts["requests"] += 1
            try:
                batch.append(seed_from_dict(request))
            except InvalidSeed as exc:
                counts["skipped"] += 1
                log.warning("skipped %s: %s", request.get("url"), exc)
            if len(batch) >= _BATCH:
                _push(frontier, batch, counts)
        _push(frontier, batch, counts)
        seen, fps = store.seen(crawl=crawl), []
        for fp in read_fingerprints(root):
            if len(fp) < _FP:
                raise JobdirError(f"{root / 'requests.seen'}: a fingerprint of {len(fp)} "
                                  f"bytes; the seen set keeps {_FP} of each")  # fmt: skip
            fps.append(fp[:_FP])
            if len(fps) >= _SEEN_BATCH:
                counts["fingerprints"] += len(fps)
                seen.insert_many(fps)
                fps = []
        counts["fingerprints"] += len(fps)
        seen.insert_many(fps)
    return JobdirImport(crawl, counts["requests"], counts["queued"], counts["skipped"],
                        counts["duplicates"], counts["fingerprints"])  # fmt: skip


def _push(frontier: CoreFrontier, batch: list[Seed], counts: Counter[str]) -> None:
    for seed, admission in zip(batch, frontier.push_many(batch), strict=True):
        if admission:
            counts["queued"] += 1
        else:
            counts["duplicates"] += 1
            log.warning("left out %s %s: queued already (the same method, canonical URL and "
                        "body)", seed.method, seed.url)  # fmt: skip
    batch.clear()
