"""The ``redis-scaling`` table of the ``redis`` workload: P crawler processes on one store (one
namespace, its units taking turns at the store lock) against P processes on a namespace each on
the same server (the control: the same CPU, no lock shared), on the standalone server and on
the cluster. The baseline of the coming redesign of the Redis storage, whose target is shared /
own >= 0.85 at P=8.

``python -m benchmarks.redis_scaling [--smoke | --quick | --full] [--out DIR]``: this table
alone, on servers of its own (results.json and results.md in ``--out``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import queue
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from crawlstore import Done, Seed, Store
from crawlstore.errors import TransactionConflict

from .redis import Deployment, Servers
from .suite import Plan, Progress, Row, Table, alternate, markdown, stamp, write_json

BATCH = 16  # pages a pop_many, reports a transaction
LINKS, NEW = 10, 5  # links a page, of which new (the others were pushed a batch before)
HOSTS, SEEDS_A_HOST = 200, 4  # the seeds of each store


@dataclass(frozen=True)
class Shape:
    """Client processes of the rows, seconds each run lasts, seconds a fetch, rounds."""

    clients: tuple[int, ...]
    seconds: float
    fetch: float
    rounds: int


#: Client counts given on the command line (``--clients``), else the mode's.
_CLIENTS: tuple[int, ...] | None = None


def shape(plan: Plan) -> Shape:
    got = _shape(plan)
    return got if _CLIENTS is None else Shape(_CLIENTS, got.seconds, got.fetch, got.rounds)


def _shape(plan: Plan) -> Shape:
    if plan.mode == "smoke":
        return Shape((1, 2), 1.0, 0.01, 1)
    if plan.mode == "quick":
        return Shape((1, 2, 4, 8), 2.0, 0.1, 1)
    if plan.mode == "full":
        return Shape((1, 2, 4, 8), 20.0, 0.1, plan.heavy_rounds)
    return Shape((1, 2, 4, 8), 10.0, 0.1, plan.heavy_rounds)


@dataclass(frozen=True)
class Client:
    """What one crawler process did: pages committed between ``start`` and ``end``
    (monotonic, one clock for all processes), its CPU seconds, round trips (redis-py sends),
    write units (pop_many and the transaction), each transaction's and each pop's seconds."""

    pages: int = 0
    start: float = 0.0
    end: float = 0.0
    cpu: float = 0.0
    trips: int = 0
    units: int = 0
    waits: tuple[float, ...] = ()
    pops: tuple[float, ...] = ()
    #: A store in partitions: units committed with writes, units that conflicted.
    commits: int = 0
    conflicts: int = 0
    error: str = ""


def open_frontier(url: str) -> tuple[Store, Any]:
    """The store at ``url`` and its frontier: host queues, not politeness-bound."""
    store = Store.open(url)
    return store, store.frontier(queues="host", delay=0, max_in_flight=None)


def seed(url: str) -> None:
    """The seeds of one store: ``SEEDS_A_HOST`` URLs on each of ``HOSTS`` hosts."""
    store, frontier = open_frontier(url)
    try:
        seeds = [Seed.get(f"https://h{h}.example/s/{k}") for k in range(SEEDS_A_HOST)
                 for h in range(HOSTS)]  # fmt: skip
        if sum(map(bool, frontier.push_many(seeds))) != len(seeds):
            raise RuntimeError("a seed was refused")
    finally:
        store.close()


def crawl(store: Store, frontier: Any, cid: int, seconds: float, fetch: float) -> Client:
    """The crawl loop until ``seconds`` have passed: pop a batch, fetch (a sleep), then one
    transaction reporting the batch Done and pushing its links (``new_only``)."""
    from redis.connection import AbstractConnection

    sent = [0]
    send = AbstractConnection.send_packed_command

    def counted(conn: Any, command: Any, check_health: bool = True) -> None:
        sent[0] += 1  # a command or a pipeline: one round trip
        send(conn, command, check_health)  # type: ignore[no-untyped-call]

    waits: list[float] = []
    pops: list[float] = []
    seen: list[str] = []  # the new links of the batch before
    n = pages = 0
    with mock.patch.object(AbstractConnection, "send_packed_command", counted):
        start, cpu = time.monotonic(), time.process_time()
        deadline = start + seconds
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            got = frontier.pop_many(BATCH)
            pops.append(time.monotonic() - t0)
            if not got:
                raise RuntimeError("the store ran dry")
            time.sleep(fetch)
            new = []
            for _ in range(NEW * len(got)):
                new.append(f"https://h{(n * 7 + cid) % HOSTS}.example/c{cid}/{n}")
                n += 1
            old = seen or [r.seed.url for r in got] * NEW  # known: refused by new_only
            links = [Seed.get(u) for u in new + old[: len(new)]]
            t0 = time.monotonic()
            while True:  # (a store in partitions: a transaction that conflicted wrote nothing)
                try:
                    with store.transaction():
                        frontier.report_many([Done(r.seed) for r in got])
                        admitted = frontier.push_many(links, new_only=True)
                    break
                except TransactionConflict:
                    pass
            waits.append(time.monotonic() - t0)
            if sum(map(bool, admitted)) != len(new):
                raise RuntimeError(f"{sum(map(bool, admitted))} links admitted of {len(new)}")
            seen, pages = new, pages + len(got)
        storage = store._storage
        return Client(pages, start, time.monotonic(), time.process_time() - cpu, sent[0],
                      2 * len(waits), tuple(waits), tuple(pops),
                      commits=getattr(storage, "commits", 0),
                      conflicts=getattr(storage, "conflicts", 0))  # fmt: skip


def _client(url: str, cid: int, seconds: float, fetch: float, barrier: Any, results: Any) -> None:
    """A crawler process: open its store, wait for the others, crawl, put its ``Client``."""
    try:
        store, frontier = open_frontier(url)
        barrier.wait(120)
        got = crawl(store, frontier, cid, seconds, fetch)
        store.close()
        results.put(got)
    except BaseException as exc:
        barrier.abort()
        where = traceback.extract_tb(exc.__traceback__)[-3:]
        results.put(
            Client(error=f"{type(exc).__name__}: {exc} (at {traceback.format_list(where)})")
        )


#: The store layouts compared: format 1 (every unit under the store lock: ``?partitioned=0``)
#: and format 2, the default (each bucket commits alone).
LAYOUTS = {"locked": "&partitioned=0", "partitioned": ""}


def server_cpu(dep: Deployment) -> float:
    """The CPU seconds the deployment's masters used so far (``INFO cpu``, summed)."""
    total = 0.0
    for master in dep.masters:
        info = master.info("cpu")
        total += float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    return total


def slot_cpu(dep: Deployment) -> dict[int, int]:
    """On a cluster, the CPU microseconds its masters spent on each slot's keys so far
    (``CLUSTER SLOT-STATS``, Valkey 8 and later); empty on one server, or where the server
    cannot say."""
    out: dict[int, int] = {}
    if not dep.cluster:
        return out
    for master in dep.masters:
        try:
            master.config_set("cluster-slot-stats-enabled", "yes")
            reply = master.execute_command("CLUSTER", "SLOT-STATS", "SLOTSRANGE", 0, 16383)
        except Exception:  # (an older server)
            return {}
        for slot, stats in reply:
            if not isinstance(stats, dict):  # (a flat list of names and values)
                stats = dict(zip(stats[::2], stats[1::2], strict=True))
            out[int(slot)] = int(stats.get(b"cpu-usec") or stats.get("cpu-usec") or 0)
    return out


def hottest_slot(before: dict[int, int], after: dict[int, int]) -> float | None:
    """The busiest slot's CPU over the mean of the slots that had any, between two reads of
    ``slot_cpu`` (None on one server)."""
    spent = [after[slot] - before.get(slot, 0) for slot in after]
    busy = [n for n in spent if n > 0]
    return max(busy) / (sum(busy) / len(busy)) if busy else None


def run(dep: Deployment, clients: int, shared: bool, ns: str, seconds: float,
        fetch: float, layout: str = "") -> tuple[list[Client], float, float | None]:  # fmt: skip
    """One run on emptied servers: ``clients`` spawned crawler processes, started together,
    on one store (``shared``) or a store each, of the layout ``layout`` (a URL option); what
    each did, the masters' CPU seconds while they ran, and on a cluster the busiest slot's
    share of their CPU (``hottest_slot``)."""
    dep.reset()
    names = [ns] if shared else [f"{ns}-{i}" for i in range(clients)]
    urls = [dep.store_url(name) + layout for name in names]
    for url in urls:
        seed(url)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(clients + 1)
    results = context.Queue()
    procs = [context.Process(target=_client, args=(urls[i % len(urls)], i, seconds, fetch,
                                                   barrier, results), daemon=True)
             for i in range(clients)]  # fmt: skip
    for p in procs:
        p.start()
    hottest: float | None = None
    try:
        barrier.wait(120)
        cpu, slots = server_cpu(dep), slot_cpu(dep)
        got = [results.get(timeout=seconds + 120) for _ in procs]
        cpu, hottest = server_cpu(dep) - cpu, hottest_slot(slots, slot_cpu(dep))
    except threading.BrokenBarrierError:
        try:
            got = [results.get(timeout=30)]
        except queue.Empty:
            got = [Client(error="it died without a word")]
    except BaseException:
        barrier.abort()
        raise
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    errors = [c.error for c in got if c.error]
    if errors:
        raise RuntimeError(f"a client process failed: {errors[0]}")
    return got, cpu, hottest


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else ""


def _ms(values: list[float], *quantiles: float) -> str:
    ordered = sorted(values)
    if not ordered:
        return ""
    at = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
    return " / ".join(f"{v * 1000:.1f}" for v in [*at, ordered[-1]])


COLUMNS = ["clients", "vs P=1", "pages a client, min-max", "unit wait ms p50 / p99 / max",
           "pop_many ms p50 / max", "round trips a unit", "client CPU ms a page",
           "server CPU ms a page", "conflicts a commit", "hottest slot x mean"]  # fmt: skip


def scaling_table(plan: Plan, deps: dict[str, Deployment | None], why: dict[str, str],
                  progress: Progress) -> Table:  # fmt: skip
    """The table, on the servers of ``deps`` (``why``: why one is missing)."""
    sh = shape(plan)
    table = Table("redis-scaling", "Redis: P crawler processes on one store (shared) vs on a "
                  "store each (own), the crawl loop with a simulated fetch", "page", "",
                  columns=COLUMNS)  # fmt: skip
    spec: dict[str, tuple[Deployment | None, int, bool, str]] = {}
    for where, dep in deps.items():
        for layout, option in LAYOUTS.items():
            for p in sh.clients:
                own, shared = f"{where}-{layout}-own-{p}", f"{where}-{layout}-shared-{p}"
                table.rows += [
                    Row(own, f"{where}, {layout}, P={p}, own: a store each", ops=1, baseline=own),
                    Row(shared, f"{where}, {layout}, P={p}, shared: one store", ops=1,
                        baseline=own),
                ]  # fmt: skip
                spec[own], spec[shared] = (dep, p, False, option), (dep, p, True, option)
    for row in table.rows:
        if spec[row.key][0] is None:
            row.skipped = why.get(row.key.split("-")[0], "not run")
    live = [r for r in table.rows if not r.skipped]
    progress.start("redis: scaling", len(live) * sh.rounds)
    clients: dict[str, list[Client]] = {r.key: [] for r in table.rows}
    servers: dict[str, float] = dict.fromkeys(clients, 0.0)
    hottest: dict[str, list[float]] = {r.key: [] for r in table.rows}

    def one(row: Row, i: int) -> float:
        dep, p, shared, option = spec[row.key]
        assert dep is not None
        got, cpu, hot = run(dep, p, shared, f"r{i}-{row.key}", sh.seconds, sh.fetch, option)
        clients[row.key] += got
        servers[row.key] += cpu
        hottest[row.key] += [] if hot is None else [hot]
        pages = sum(c.pages for c in got)
        return (max(c.end for c in got) - min(c.start for c in got)) / pages  # s a page

    alternate(live, sh.rounds, one, progress)
    for row in live:
        got = clients[row.key]
        if not got:
            continue
        _, p, _, _ = spec[row.key]
        pages = sum(c.pages for c in got)
        first = table.row(row.key.rsplit("-", 1)[0] + f"-{sh.clients[0]}")
        base = first.per_op if first is not None else None
        row.extra = {
            "clients": str(p),
            "vs P=1": f"{base / row.per_op:.2f}x" if base and row.per_op else "",
            "pages a client, min-max": f"{min(c.pages for c in got)}-{max(c.pages for c in got)}",
            "unit wait ms p50 / p99 / max": _ms([w for c in got for w in c.waits], 0.5, 0.99),
            "pop_many ms p50 / max": _ms([w for c in got for w in c.pops], 0.5),
            "round trips a unit": f"{sum(c.trips for c in got) / sum(c.units for c in got):.1f}",
            "client CPU ms a page": f"{sum(c.cpu for c in got) / pages * 1000:.2f}",
            "server CPU ms a page": f"{servers[row.key] / pages * 1000:.2f}",
            "conflicts a commit": _share(
                sum(c.conflicts for c in got), sum(c.commits for c in got)
            ),
            "hottest slot x mean": f"{max(hottest[row.key]):.1f}" if hottest[row.key] else "",
        }
    _notes(table, sh)
    return table


def _notes(table: Table, sh: Shape) -> None:
    table.notes += [
        f"Each row: P client processes (spawned, started together behind a barrier) each "
        f"running the crawl loop for {sh.seconds:g} s of wall-clock time (a fixed duration, "
        f"not a fixed number of pages; the page in progress at the end is finished): "
        f"`frontier.pop_many({BATCH})`, a simulated fetch of {sh.fetch:g} s (`time.sleep`), "
        f"then one `store.transaction()` with `report_many` of a `Done` for each page and "
        f"`push_many(new_only=True)` of {LINKS} links a page: {NEW} new URLs and {LINKS - NEW} "
        "that the crawl knows (the new links of the process's batch before, refused as "
        'duplicates: checked). The store: `frontier(queues="host", delay=0, '
        "max_in_flight=None)` (not politeness-bound), seeded with "
        f"{HOSTS * SEEDS_A_HOST:,} URLs over {HOSTS} hosts (the links go to the same hosts: it "
        f"never runs dry); the median of {sh.rounds} round(s), emptied servers before each run.",
        "locked: format 1 (`&partitioned=0`: every write unit takes the store lock "
        "`cs_acquire`, polled with backoff); partitioned: format 2, the default (a unit on a "
        "bucket commits alone with a compare-and-set on the bucket's version, and runs again "
        "when it conflicts; on a cluster a transaction takes a lock for what belongs to no bucket, "
        "and commits its buckets' units after). shared: the P processes on one store (one "
        "namespace, `?ns=NAME`); own: a namespace each on the same server(s), seeded alike "
        "(the control: the same CPU, no lock shared; on the cluster their store slots also "
        "fall on different masters). ratio: shared / own at "
        "the same P (the redesign's target: >= 0.85 at P=8); at P=1 both rows run the same "
        "thing, and their ratio shows the noise. vs P=1: the row's pages/s over the same "
        "arrangement's with one process.",
        "pages/s: all processes' pages over the run's wall time (first start to last end). "
        "pages a client: the least and most pages one process did in a run, over all "
        "rounds. unit wait: from entering `with store.transaction()` to its commit returned "
        "(the lock's wait included); pop_many: the same for the pop's own unit. round trips "
        "a unit: redis-py's sends (a command or a pipeline) in the processes, counted by "
        "wrapping `send_packed_command`, over the units (2 a batch: the pop and the "
        "transaction; lock polls count). client CPU: `time.process_time()` of the loops, "
        "summed, over the pages. server CPU: the masters' `used_cpu_sys` + `used_cpu_user` "
        "(`INFO cpu`) from the barrier to the last client's result, over the pages (replicas "
        "not counted). conflicts a commit (partitioned): units that found their "
        "bucket (or a transaction, what it read) changed by another client and ran again, over "
        "the units committed with writes; a transaction that conflicted is run again by the "
        "loop (`TransactionConflict`: nothing of it was written). hottest slot x mean (a "
        "cluster): the CPU the masters spent on the busiest slot's keys over the mean of the "
        "slots with any (`CLUSTER SLOT-STATS`, Valkey 8), the largest over the rounds; the "
        "target is at most 2.",
        "A 2-core machine runs the server (or the cluster's 6 nodes) and all P clients: at "
        "P=8 the processes compete for CPU in both arrangements, which the own rows measure; "
        "the ratio is what the shared lock costs on top.",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.redis_scaling",
                                     description=__doc__)  # fmt: skip
    mode = parser.add_mutually_exclusive_group()
    for name in ("smoke", "quick", "full"):
        mode.add_argument(f"--{name}", action="store_const", const=name, dest="mode")
    parser.add_argument("--out", type=Path, default=Path("."), help="where the results go")
    parser.add_argument("--where", choices=["standalone", "cluster"], action="append",
                        help="only these deployments (default: both)")  # fmt: skip
    parser.add_argument("--clients", help="client counts, comma-separated (default: the mode's)")
    args = parser.parse_args(argv)
    plan = Plan.make(args.mode or "default")
    if args.clients:
        global _CLIENTS
        _CLIENTS = tuple(int(n) for n in args.clients.split(","))
    the_stamp = stamp()
    the_stamp["command"][2] = "benchmarks.redis_scaling"
    with Progress() as progress, Servers() as servers:
        deps = {"standalone": servers.standalone, "cluster": servers.cluster}
        deps = {k: v for k, v in deps.items() if not args.where or k in args.where}
        tables = [scaling_table(plan, deps, servers.why, progress)]
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "results.json", the_stamp, plan, tables)
    (args.out / "results.md").write_text(markdown(the_stamp, plan, tables) + "\n")
    print((args.out / "results.md").read_text())


if __name__ == "__main__":
    main()
