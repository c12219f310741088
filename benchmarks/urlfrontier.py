"""The ``urlfrontier`` workload: the URL Frontier service (``crawlstore serve`` in a process of
its own, a Python gRPC client over loopback) against the same work done in this process on the
same kind of store: the crawl the service makes (``frontier("fifo", queues="meta")``), seeds
built by ``seed_of`` as the service builds them, ``push_many(new_only=True)`` of the same
batches and ``pop_many`` with the same limits as a ``GetURLs`` call."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from crawlstore import Store

from .harness import timed
from .suite import ROOT, Plan, Progress, Row, Scratch, Table, alternate

HOSTS = 1000  # of the URLs put
BATCH = 256  # URLs a PutDiscovered batch, and a push_many of the in-process baselines
GROUPED = 8  # batches a commit, about what the service's group commit puts in one
LEASE = 3600  # delay_requestable of the GetURLs calls: nothing comes back during a run
STORE_FILE = "frontier.lmdb"


def _missing() -> str:
    try:
        import grpc  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError as exc:
        return f"skipped: {exc.name} not installed (the urlfrontier extra)"
    return ""


def _urls(n: int, salt: str) -> list[str]:
    return [f"https://h{i % HOSTS}.example/{salt}/p/{i}" for i in range(n)]


class Served:
    """``crawlstore serve`` processes on one store file (several: ``--reuse-port`` on one
    port), each with a ``--node`` of its own so that ``ListNodes`` tells them apart; ``aio``:
    one process of the ``grpc.aio`` design instead (``aio_server.py``)."""

    def __init__(self, path: str, processes: int = 1, aio: bool = False) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
        self.procs: list[subprocess.Popen[str]] = []
        self.port = 0
        try:
            for i in range(processes):
                command = [sys.executable, "-m", "crawlstore", "serve", "--store", path,
                           "--port", str(self.port), "--node", f"node{i}",
                           "--log-level", "WARNING"]  # fmt: skip
                if processes > 1:
                    command.append("--reuse-port")
                if aio:
                    command = [sys.executable, "-m", "benchmarks.aio_server", "--store", path]
                proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
                self.procs.append(proc)
                assert proc.stdout is not None
                line = proc.stdout.readline()
                if not line.startswith("serving the URL Frontier API on port"):
                    raise RuntimeError(f"crawlstore serve did not start: {line!r}")
                self.port = int(line.rsplit(" ", 1)[1])
        except BaseException:
            self.close()
            raise

    def channel(self) -> Any:
        """A channel with a connection of its own (no subchannel shared with another)."""
        import grpc

        own = [("grpc.use_local_subchannel_pool", 1)]
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}", options=own)
        grpc.channel_ready_future(channel).result(timeout=30)
        return channel

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stub(channel: Any) -> Any:
    from crawlstore.urlfrontier import urlfrontier_pb2_grpc as pb_grpc

    return pb_grpc.URLFrontierStub(channel)  # type: ignore[no-untyped-call]


def _infos(urls: Sequence[str]) -> list[Any]:
    from crawlstore.urlfrontier import urlfrontier_pb2 as pb

    return [pb.URLInfo(url=u) for u in urls]


def _batches(urls: Sequence[str]) -> list[Any]:
    from crawlstore.urlfrontier import urlfrontier_pb2 as pb

    return [pb.DiscoveredBatch(ID=str(k), items=_infos(urls[k : k + BATCH]))
            for k in range(0, len(urls), BATCH)]  # fmt: skip


def _items(urls: Sequence[str]) -> list[Any]:
    from crawlstore.urlfrontier import urlfrontier_pb2 as pb

    return [pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=u)), ID=u)
            for u in urls]  # fmt: skip


def _push_in_process(path: str, infos: list[Any], grouped: int = 1) -> Callable[[], object]:
    """push_many(new_only=True) of batches of ``BATCH`` seeds built by ``seed_of``, ``grouped``
    batches a commit, into the crawl the service would make."""
    from crawlstore.urlfrontier.convert import seed_of

    store = Store.open(os.path.join(path, STORE_FILE))
    frontier = store.frontier("fifo", crawl="default", queues="meta")
    step = BATCH * grouped

    def run() -> None:
        try:
            for g in range(0, len(infos), step):
                with store.transaction():
                    for k in range(g, min(g + step, len(infos)), BATCH):
                        admitted = frontier.push_many(
                            [seed_of(i) for i in infos[k : k + BATCH]], new_only=True)  # fmt: skip
                        assert all(admitted)
        finally:
            store.close()

    return run


def _put_discovered(stub: Any, batches: list[Any]) -> None:
    acks = list(stub.PutDiscovered(iter(batches)))
    assert len(acks) == len(batches) and all(s == 0 for a in acks for s in a.statuses), acks[:1]


def _put_urls(stub: Any, items: list[Any]) -> None:
    acks = list(stub.PutURLs(iter(items)))
    assert len(acks) == len(items) and all(a.status == 0 for a in acks), acks[:1]


def _concurrently(put: Callable[[Any, list[Any]], None], stubs: list[Any],
                  parts: list[list[Any]]) -> None:  # fmt: skip
    """``put(stub, part)`` for each stub and its part, each on a thread of its own."""
    errors: list[BaseException] = []

    def guarded(stub: Any, part: list[Any]) -> None:
        try:
            put(stub, part)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=pair)
               for pair in zip(stubs, parts, strict=True)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# -- putting URLs --------------------------------------------------------------------------------


def put_table(plan: Plan, scratch: Scratch, progress: Progress) -> Table:
    n_batched = {"smoke": 1_000, "quick": 5_000, "full": 200_000}.get(plan.mode, 50_000)
    n_stream = {"smoke": 500, "quick": 2_000, "full": 50_000}.get(plan.mode, 20_000)
    t = Table("urlfrontier-put", "The URL Frontier service: putting new URLs, a crawlstore "
              "serve process over loopback vs the same pushes in process", "URL",
              "inproc-256", columns=["URLs a run"])  # fmt: skip
    t.rows = [
        Row("inproc-256", "in process: push_many(new_only=True) of 256 seeds, a commit each",
            ops=n_batched),
        Row("put-discovered", "PutDiscovered, one stream, batches of 256", ops=n_batched,
            note="target >= 0.5x"),
        Row("inproc-256x8", f"in process: the same, {GROUPED} push_many a commit", ops=n_batched,
            note="about the group the service commits"),
        Row("inproc-256-s", "in process: push_many(new_only=True) of 256 seeds, a commit each",
            ops=n_stream, baseline="inproc-256-s"),
        Row("put-urls-1", "PutURLs, one stream of discovered items (server window 1024)",
            ops=n_stream, baseline="inproc-256-s", note="target >= 0.3x"),
        Row("put-urls-aio", "PutURLs, one stream, the service on grpc.aio (aio_server.py)",
            ops=n_stream, baseline="inproc-256-s"),
        Row("put-urls-2", "PutURLs, two streams at once (two channels, two client threads)",
            ops=n_stream, baseline="inproc-256-s"),
    ]  # fmt: skip
    for row in t.rows:
        row.extra["URLs a run"] = f"{row.ops:,}"
        row.skipped = _missing()
    progress.start("urlfrontier: putting URLs", len(t.rows) * plan.rounds)

    def run(row: Row, i: int) -> float:
        urls = _urls(row.ops, f"r{i}")
        with scratch.dir() as path:
            if row.key.startswith("inproc"):
                grouped = GROUPED if row.key == "inproc-256x8" else 1
                return timed(_push_in_process(path, _infos(urls), grouped))
            aio = row.key.endswith("-aio")
            with Served(os.path.join(path, STORE_FILE), aio=aio) as served:
                if row.key == "put-discovered":
                    batches, stub = _batches(urls), _stub(served.channel())
                    return timed(lambda: _put_discovered(stub, batches))
                if row.key in ("put-urls-1", "put-urls-aio"):
                    items, stub = _items(urls), _stub(served.channel())
                    return timed(lambda: _put_urls(stub, items))
                half = len(urls) // 2
                parts = [_items(urls[:half]), _items(urls[half:])]
                stubs = [_stub(served.channel()) for _ in parts]
                return timed(lambda: _concurrently(_put_urls, stubs, parts))

    alternate(t.rows, plan.rounds, run, progress)
    t.notes += [
        f"New URLs over {HOSTS} hosts into a fresh store each run, every one acknowledged OK "
        '(checked). The server is `crawlstore serve` (durability "safe") in its own process, '
        "started before the timed part; the client messages are built before it too. In "
        "process: the seeds are built by the service's `seed_of` inside the timed part, as "
        "the service does; a commit a `push_many` (the service's group commit may put "
        "several batches, or up to 512 PutURLs items, in one commit: about 7 batches of 256 "
        "in the runs recorded here, hence the row of 8 a commit).",
        "Baseline of the PutURLs rows: the same URLs pushed in process in batches of 256, a "
        "commit each (what a batching client of the library would do), not one URL a commit.",
        "Two streams: two client threads in this process, each on a channel of its own, "
        "half of the URLs each. The machine's cores are shared by the client and the server.",
        "grpc.aio: `benchmarks/aio_server.py`, the service with `PutURLs` and `GetURLs` on "
        "an event loop (the same group commit, each ack after its commit), the same client.",
    ]
    return t


# -- getting URLs --------------------------------------------------------------------------------


#: GetURLs shapes: (what, max_queues x max_urls_per_queue, URLs a call, the filled store's state)
SHAPES = {
    "10x10": ("10 queues x 10 URLs", 10, 10, 100, "due"),
    "1x1": ("1 queue x 1 URL", 1, 1, 1, "due"),
    "idle": ("10 x 10, nothing due", 10, 10, 0, "idle"),
    "capped": ("10 x 10, every queue due and at its cap", 10, 10, 0, "capped"),
}


def _prefill(path: str, queues: int, state: str) -> None:
    """A store of ``queues`` queues of 10 URLs each and the store-wide delay 0 (``due``); or
    a delay of 3600 s and a URL of every queue handed out, so that none is due (``idle``); or
    20 URLs a queue, 10 of each handed out, so that every queue is due and at the cap of 10 in
    flight of a 10 x 10 call (``capped``)."""
    from crawlstore.urlfrontier.convert import seed_of

    per_queue = 20 if state == "capped" else 10
    urls = [f"https://q{q}.example/p/{k}" for k in range(per_queue) for q in range(queues)]
    with Store.open(path, durability="nosync") as store:
        frontier = store.frontier("fifo", crawl="default", queues="meta")
        with store.transaction():
            store.set_defaults(delay=3600.0 if state == "idle" else 0.0)
            frontier.push_many([seed_of(i) for i in _infos(urls)], new_only=True)
            if state == "idle":
                frontier.pop_many(queues, per_queue=1, lease_time=LEASE)
            elif state == "capped":
                frontier.pop_many(10 * queues, per_queue=10, lease_time=LEASE, max_in_flight=10)


def _shape_of(key: str) -> str:
    """The shape of a GetURLs row's key (``get-10x10-aio@1e3``: ``10x10``)."""
    return key.split("-")[1].split("@")[0]


def get_table(plan: Plan, scratch: Scratch, progress: Progress) -> Table:
    quick = plan.mode in ("smoke", "quick")
    sizes = (1_000,) if quick else (1_000, 10_000)
    calls = {"10x10": 20 if quick else 50, "1x1": 50 if quick else 200,
             "idle": 50 if quick else 200, "capped": 5 if quick else 20}  # fmt: skip
    t = Table("urlfrontier-get", "The URL Frontier service: GetURLs, a crawlstore serve "
              "process over loopback vs pop_many with the same limits in process", "call",
              "inproc-10x10@1e3", columns=["URLs a call"])  # fmt: skip
    for queues in sizes:
        tag = "1e3" if queues == 1_000 else "1e4"
        for shape, (what, _, _, urls, _) in SHAPES.items():
            if queues > 1_000 and shape == "idle":
                continue
            base = f"inproc-{shape}@{tag}"
            t.rows.append(Row(base, f"in process: pop_many, {what}, {queues:,} queues",
                              ops=calls[shape], baseline=base))  # fmt: skip
            t.rows.append(Row(f"get-{shape}@{tag}", f"GetURLs, {what}, {queues:,} queues",
                              ops=calls[shape], baseline=base,
                              note="target >= 0.5x" if base == t.baseline else ""))  # fmt: skip
            ours = 2
            if base == t.baseline:
                t.rows.append(Row(f"get-{shape}-aio@{tag}", f"GetURLs, {what}, {queues:,} "
                                  "queues, the service on grpc.aio (aio_server.py)",
                                  ops=calls[shape], baseline=base))  # fmt: skip
                ours = 3
            for row in t.rows[-ours:]:
                row.extra["URLs a call"] = str(urls)
                row.skipped = _missing()
    if t.rows[0].skipped:
        return t
    from crawlstore.urlfrontier import urlfrontier_pb2 as pb

    states = sorted({(int(r.key[-1]), SHAPES[_shape_of(r.key)][4]) for r in t.rows})
    progress.start("urlfrontier: GetURLs", len(t.rows) * plan.rounds + len(states))
    with scratch.dir() as filled:
        bases: dict[tuple[int, str], str] = {}
        for exp, state in states:
            bases[exp, state] = os.path.join(filled, f"{exp}-{state}.lmdb")
            _prefill(bases[exp, state], 10**exp, state)
            progress.advance()

        def run(row: Row, _round: int) -> float:
            _, many, per, want, state = SHAPES[_shape_of(row.key)]
            with scratch.dir() as path:
                copy = os.path.join(path, STORE_FILE)
                shutil.copyfile(bases[int(row.key[-1]), state], copy)
                if row.key.startswith("inproc"):
                    store = Store.open(copy)
                    frontier = store.frontier(crawl="default")

                    # untimed: the reap after opening (the notes)
                    frontier.pop_many(per * many, per_queue=per, queues=many, lease_time=LEASE,
                                      max_in_flight=per)  # fmt: skip

                    def pop() -> None:
                        for _ in range(row.ops):
                            got = frontier.pop_many(
                                per * many, per_queue=per, queues=many, lease_time=LEASE,
                                max_in_flight=per)  # fmt: skip
                            assert len(got) == want, len(got)

                    try:
                        return timed(pop)
                    finally:
                        store.close()
                with Served(copy, aio="-aio@" in row.key) as served:
                    stub = _stub(served.channel())
                    if state != "idle":
                        stub.SetDelay(pb.QueueDelayParams(key="", delay_requestable=0))
                    params = pb.GetParams(max_urls_per_queue=per, max_queues=many,
                                          delay_requestable=LEASE, crawlID="DEFAULT")  # fmt: skip

                    list(stub.GetURLs(params))  # untimed: the reap after opening

                    def get() -> None:
                        for _ in range(row.ops):
                            got = list(stub.GetURLs(params))
                            assert len(got) == want, len(got)

                    return timed(get)

        alternate(t.rows, plan.rounds, run, progress)
    t.notes += [
        "Each queue holds 10 URLs, the store-wide delay is 0 (set by SetDelay with an empty "
        f"key for the service) and every call leases for {LEASE} s (`delay_requestable`); "
        "a fresh copy of the filled store each run, then that many calls one after the "
        "other, each checked to hand out its 100 (or 1) URLs. In process: "
        "`pop_many(limit, per_queue=, queues=, lease_time=, max_in_flight=)` with the limits "
        "the service derives from the call, a commit each, as the service's.",
        "Before the timed calls, one call that is not timed: the first pop after a store "
        "opens reaps (reads every lease once, to find those of processes that are gone), and "
        "again every `reap_interval` (10 s): about 3.6 us a lease here (360 ms at 100,000 "
        "leases, the capped store of 10,000 queues), which the timed calls leave out.",
        "Nothing due: a delay of 3600 s and a URL of every queue handed out before the run, "
        "so every call finds nothing.",
        "Every queue at its cap: 20 URLs a queue, 10 of each handed out before the run; every "
        "queue is due (delay 0) but has the 10 in flight that `max_urls_per_queue` 10 allows, "
        "so every call finds nothing; the storage's index by in-flight count keeps them out "
        "of the walk, so a call costs the same at 1,000 and 10,000 queues.",
    ]
    return t


# -- several server processes on one port --------------------------------------------------------


def _channels_on(served: Served, nodes: int, tries: int = 16) -> tuple[list[Any], str]:
    """A channel on each server process (``ListNodes`` says which one took it), and how the
    first 8 connections spread over the processes."""
    from crawlstore.urlfrontier import urlfrontier_pb2 as pb

    found: dict[str, Any] = {}
    spread: list[str] = []
    for _ in range(tries):
        channel = served.channel()
        node = _stub(channel).ListNodes(pb.Empty()).values[0]
        spread.append(node)
        if node not in found:
            found[node] = channel
        else:
            channel.close()
        if len(found) == nodes and len(spread) >= 8:
            break
    if len(found) < nodes:
        raise RuntimeError(f"{tries} connections all went to {sorted(found)}")
    counts = {n: spread[:8].count(n) for n in sorted(set(spread[:8]))}
    return list(found.values()), " / ".join(str(c) for c in counts.values())


def processes_table(plan: Plan, scratch: Scratch, progress: Progress) -> Table:
    n = {"smoke": 1_000, "quick": 5_000, "full": 200_000}.get(plan.mode, 50_000)
    t = Table("urlfrontier-processes", "The URL Frontier service: PutDiscovered from two "
              "clients, one crawlstore serve process vs two on one port (--reuse-port) and "
              "one store file", "URL", "one", columns=["connections of 8 a process"])  # fmt: skip
    t.rows = [Row("one", "one server process, two clients", ops=n),
              Row("two", "two server processes --reuse-port, two clients (one on each)",
                  ops=n)]  # fmt: skip
    for row in t.rows:
        row.skipped = _missing()
    progress.start("urlfrontier: two server processes", len(t.rows) * plan.rounds)

    def run(row: Row, i: int) -> float:
        urls = _urls(n, f"m{i}")
        half = n // 2
        parts = [_batches(urls[:half]), _batches(urls[half:])]
        with scratch.dir() as path, Served(os.path.join(path, STORE_FILE),
                                           2 if row.key == "two" else 1) as served:  # fmt: skip
            if row.key == "two":
                channels, spread = _channels_on(served, 2)
                row.extra["connections of 8 a process"] = spread
            else:
                channels = [served.channel() for _ in parts]
            stubs = [_stub(c) for c in channels]
            return timed(lambda: _concurrently(_put_discovered, stubs, parts))

    alternate(t.rows, plan.rounds, run, progress)
    t.notes += [
        f"{n:,} new URLs over {HOSTS} hosts a run, in batches of 256, half from each of two "
        "client threads in this process, each on a channel (a TCP connection) of its own. "
        "With two processes, the kernel spreads connections by SO_REUSEPORT; the column "
        "shows how 8 fresh connections spread over the two (ListNodes of each), and the run "
        "uses one connection on each process.",
        f"The machine has {os.cpu_count()} cores for both server processes and the client.",
    ]
    return t


def urlfrontier(plan: Plan, scratch: Scratch, progress: Progress) -> list[Table]:
    return [put_table(plan, scratch, progress), get_table(plan, scratch, progress),
            processes_table(plan, scratch, progress)]  # fmt: skip
