"""The ``redis`` workload: crawlstore's store on Redis against the scrapy-redis layout doing the
same work on the same servers, a standalone ``redis-server`` and a cluster of 3 masters and 3
replicas, both started here (``benchmarks/servers.py``). Five tables: ``redis-push`` (new
seeds in batches), ``redis-pop`` (popped in batches, each reported Done), ``redis-spread``
(keys, memory and commands on each master of the cluster), ``redis-memory`` (bytes of
``used_memory`` a queued, a crawled and a seen URL) and ``redis-scaling`` (P crawler processes
on one store vs on a store each: ``benchmarks/redis_scaling.py``).

The scrapy-redis layout is scrapy-redis 0.9.1's keys and commands, reimplemented here with
redis-py (scrapy-redis is not a dependency): its ``PriorityQueue`` (a sorted set
``<spider>:requests``, score ``-priority``, ``ZADD`` a request; a pop is ``MULTI; ZRANGE key 0
0; ZREMRANGEBYRANK key 0 0; EXEC``) and its ``RFPDupeFilter`` (``SADD`` of the request's
40-hex SHA-1 to ``<spider>:dupefilter``, the request queued when it was new), with msgpack in
place of its default pickle.

``python -m benchmarks.redis --profile push|pop [--cluster]``: one run of the crawlstore row
under cProfile, and where its time goes (docs/benchmarks/redis.md).
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import hashlib
import json
import multiprocessing
import pstats
import queue
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

import msgpack

from crawlstore import Done, Seed, Store

from .harness import timed
from .servers import Cluster, Node, free_ports, server_binary
from .suite import Plan, Progress, Row, Table, alternate

_T = TypeVar("_T")
BATCH = 256  # seeds a push_many, requests a pipeline, seeds a pop_many
SPIDER = "bench"  # scrapy-redis's keys: bench:requests, bench:dupefilter
SEEN_BATCH = 1000  # fingerprints an insert_many, SADDs a pipeline
#: Commands of the harness and of connecting, not of the work measured.
ADMIN = {"config", "info", "flushall", "cluster", "command", "ping", "dbsize", "client",
         "hello", "function", "fcall_ro", "readonly", "select"}  # fmt: skip


def sizes(plan: Plan) -> tuple[int, int, int]:
    """(hosts, URLs a host) of the push and pop runs, and URLs of the memory fills."""
    if plan.mode == "smoke":
        return BATCH, 2, 2_000
    if plan.mode == "quick":
        return 1_000, 2, 10_000
    if plan.mode == "full":
        return 20_000, 10, 1_000_000
    return 10_000, 2, 200_000


def urls_of(hosts: int, per_host: int) -> list[str]:
    """New URLs, host after host: every batch spans as many hosts as it holds URLs."""
    return [f"https://h{h}.example/p/{k}" for k in range(per_host) for h in range(hosts)]


# -- the servers ---------------------------------------------------------------------------------


@dataclass
class Master:
    """One master's counts at a point of a run."""

    name: str
    keys: int
    used_memory: int
    commands: int  # calls of data commands, those run inside functions included
    fcalls: int


class Deployment:
    """A standalone server or a cluster, with a client of each master."""

    def __init__(self, url: str, masters: list[Any]) -> None:
        self._url, self.masters = url, masters
        self.cluster = url.startswith("redis+cluster")

    def store_url(self, ns: str) -> str:
        return f"{self._url}?ns={ns}"

    def client(self) -> Any:
        import redis
        from redis.cluster import RedisCluster

        plain = self._url.replace("+cluster", "")
        return RedisCluster.from_url(plain) if self.cluster else redis.Redis.from_url(plain)

    def reset(self) -> None:
        """Nothing stored, counters at zero (the function library stays loaded)."""
        for m in self.masters:
            m.flushall()
            m.config_resetstat()

    def snapshot(self) -> list[Master]:
        out = []
        for m in self.masters:
            stats = m.info("commandstats")
            calls = sum(v["calls"] for k, v in stats.items()
                        if k.removeprefix("cmdstat_").split("|")[0] not in ADMIN)  # fmt: skip
            fcalls = stats.get("cmdstat_fcall", {}).get("calls", 0)
            out.append(Master(_name(m), m.dbsize(), m.info("memory")["used_memory"],
                              calls, fcalls))  # fmt: skip
        return out

    def master_of(self, key: bytes) -> str:
        """The master holding ``key``'s slot."""
        if not self.cluster:
            return _name(self.masters[0])
        from redis.crc import key_slot

        client = self.client()
        try:
            return f"127.0.0.1:{client.nodes_manager.get_node_from_slot(key_slot(key)).port}"
        finally:
            client.close()


def _name(client: Any) -> str:
    return f"127.0.0.1:{client.connection_pool.connection_kwargs['port']}"


class Servers:
    """A standalone redis-server (``appendonly yes``, as the cluster's nodes) and a cluster
    of 3 masters and 3 replicas, in a temporary directory; ``why``: what could not start."""

    def __init__(self) -> None:
        self.run_dir = Path(tempfile.mkdtemp(prefix="crawlstore-bench-redis-"))
        self.standalone: Deployment | None = None
        self.cluster: Deployment | None = None
        self.why: dict[str, str] = {}
        self._stop: list[Callable[[], None]] = []
        try:
            import redis  # noqa: F401
        except ImportError:
            self.why = dict.fromkeys(("standalone", "cluster"), "skipped: redis-py not installed")
            return
        binary = server_binary(self.run_dir)
        if binary is None:
            self.why = dict.fromkeys(("standalone", "cluster"), "skipped: no redis-server")
            return
        try:
            node = Node(binary, self.run_dir / "standalone", free_ports(1)[0],
                        "--appendonly", "yes")  # fmt: skip
            self._stop.append(node.stop)
            self.standalone = Deployment(f"redis://127.0.0.1:{node.port}/0", [node.client()])
        except Exception as exc:
            self.why["standalone"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        try:
            cluster = Cluster(binary, self.run_dir / "cluster")
            self._stop.append(cluster.stop)
            self.cluster = Deployment(cluster.url, [n.client() for n in cluster.masters()])
        except Exception as exc:
            self.why["cluster"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"

    def close(self) -> None:
        for stop in reversed(self._stop):
            stop()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> Servers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the scrapy-redis layout ---------------------------------------------------------------------


Request = tuple[dict[str, Any], str]  # what scrapy-redis queues, and its fingerprint


def request_of(url: str) -> Request:
    """What scrapy-redis queues for a plain GET (``Request(url).to_dict()`` of Scrapy 2.19) and
    its ``RFPDupeFilter`` fingerprint (the URLs here are in canonical form already)."""
    request: dict[str, Any] = {
        "url": url, "callback": None, "errback": None, "headers": {}, "body": b"", "cookies": {},
        "meta": {}, "encoding": "utf-8", "flags": [], "cb_kwargs": {}, "dont_filter": False,
        "method": "GET", "priority": 0}  # fmt: skip
    data = json.dumps({"method": "GET", "url": url, "body": ""}, sort_keys=True)
    return request, hashlib.sha1(data.encode()).hexdigest()


class ScrapyRedis:
    """scrapy-redis's scheduler queue and dupefilter: ``push`` is its ``enqueue_request`` (SADD
    the fingerprint; ZADD the request when it was new), ``pop`` its ``PriorityQueue.pop``.
    ``batch`` 1: its commands as it sends them, a round trip each; more: the same commands in
    pipelines of that many requests (the SADDs, then the ZADDs of the new ones), and a pop of
    that many in one ``MULTI; ZRANGE 0 n-1; ZREMRANGEBYRANK 0 n-1; EXEC``."""

    def __init__(self, client: Any, batch: int) -> None:
        self.client, self.batch = client, batch
        self.queue, self.dupes = f"{SPIDER}:requests", f"{SPIDER}:dupefilter"

    def push(self, requests: Sequence[Request]) -> int:
        client, queue, pack = self.client, self.queue, msgpack.packb
        if self.batch == 1:
            new = 0
            for request, fp in requests:
                if client.sadd(self.dupes, fp):
                    client.execute_command("ZADD", queue, -request["priority"], pack(request))
                    new += 1
            return new
        new = 0
        for i in range(0, len(requests), self.batch):
            part = requests[i : i + self.batch]
            pipe = client.pipeline(transaction=False)
            for _, fp in part:
                pipe.sadd(self.dupes, fp)
            added = pipe.execute()
            pipe = client.pipeline(transaction=False)
            for (request, _), fresh in zip(part, added, strict=True):
                if fresh:
                    pipe.execute_command("ZADD", queue, -request["priority"], pack(request))
                    new += 1
            pipe.execute()
        return new

    def pop(self) -> int:
        popped, last, unpack = 0, self.batch - 1, msgpack.unpackb
        while True:
            pipe = self.client.pipeline(transaction=True)
            pipe.zrange(self.queue, 0, last).zremrangebyrank(self.queue, 0, last)
            got, _ = pipe.execute()
            if not got:
                return popped
            for data in got:
                unpack(data)
            popped += len(got)


# -- crawlstore ----------------------------------------------------------------------------------


def push_seeds(frontier: Any, seeds: Sequence[Seed], batch: int) -> int:
    """``push_many`` of ``batch`` seeds at a time; how many were admitted."""
    admitted = 0
    for i in range(0, len(seeds), batch):
        admitted += sum(map(bool, frontier.push_many(seeds[i : i + batch])))
    return admitted


def drain(store: Any, frontier: Any, batch: int, worker: bool = False) -> int:
    """Pop everything, ``batch`` at a time, each reported Done in the pop's own transaction
    (``worker``: through ``frontier.worker()``, a group commit of up to ``batch``); how many."""
    if worker:
        futures = []
        with frontier.worker(prefetch=batch, group=batch) as w:
            for ready in w:
                futures.append(w.finish(Done(ready.seed)))
        for future in futures:
            future.result()
        return len(futures)
    popped = 0
    while True:
        with store.transaction():
            got = frontier.pop_many(batch)
            if got:
                frontier.report_many([Done(r.seed) for r in got])
        if not got:
            return popped
        popped += len(got)


def _client(url: str, urls: list[str], batch: int, barrier: Any, results: Any) -> None:
    """A client process of the two-process rows: push its URLs, then pop until the store has
    nothing, in step with the other process and the parent (which counts in between)."""
    try:
        seeds = [Seed.get(u) for u in urls]
        store = Store.open(url)
        frontier = store.frontier()
        barrier.wait(60)
        t0 = time.monotonic()
        admitted = push_seeds(frontier, seeds, batch)
        t1 = time.monotonic()
        barrier.wait(600)
        barrier.wait(60)
        t2 = time.monotonic()
        popped = drain(store, frontier, batch)
        t3 = time.monotonic()
        store.close()
        results.put((t0, t1, t2, t3, admitted, popped, ""))
    except BaseException as exc:
        barrier.abort()
        results.put((0.0, 0.0, 0.0, 0.0, 0, 0, f"{type(exc).__name__}: {exc}"))


# -- the runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One run: who, where, in batches of how many, how it pops, from how many processes."""

    key: str
    label: str
    who: str  # "crawlstore" or "scrapy-redis"
    where: str  # "standalone" or "cluster"
    batch: int
    pop_label: str
    worker: bool = False
    processes: int = 1
    stores: int = 1  # with 2 processes: one store, or a store each
    in_push: bool = True  # a row of the push table (else its push is done, not recorded)
    push_base: str | None = None
    pop_base: str | None = None


SPECS = [
    Spec("scrapy-redis", f"scrapy-redis layout, pipelines of {BATCH} (SADDs, then ZADDs)",
         "scrapy-redis", "standalone", BATCH,
         f"scrapy-redis layout, MULTI; ZRANGE 0 {BATCH - 1}; ZREMRANGEBYRANK; EXEC"),
    Spec("scrapy-redis-each", "scrapy-redis as it sends them: SADD, ZADD, a round trip each",
         "scrapy-redis", "standalone", 1,
         "scrapy-redis as it sends them: MULTI; ZRANGE 0 0; ZREMRANGEBYRANK 0 0; EXEC"),
    Spec("crawlstore", f"crawlstore push_many({BATCH})", "crawlstore", "standalone", BATCH,
         f"crawlstore pop_many({BATCH}) + report_many(Done), one transaction"),
    Spec("crawlstore-1000", "crawlstore push_many(1000)", "crawlstore", "standalone", 1000,
         "crawlstore pop_many(1000) + report_many(Done), one transaction"),
    Spec("crawlstore-worker", "", "crawlstore", "standalone", BATCH,
         f"crawlstore worker(prefetch={BATCH}, group={BATCH}): finish(Done) each",
         worker=True, in_push=False),
    Spec("crawlstore-2p", f"crawlstore push_many({BATCH}), 2 client processes, one store",
         "crawlstore", "standalone", BATCH,
         f"crawlstore pop_many({BATCH}) + report, 2 client processes, one store",
         processes=2, push_base="crawlstore", pop_base="crawlstore"),
    Spec("crawlstore-2s", f"crawlstore push_many({BATCH}), 2 client processes, a store each",
         "crawlstore", "standalone", BATCH,
         f"crawlstore pop_many({BATCH}) + report, 2 client processes, a store each",
         processes=2, stores=2, push_base="crawlstore", pop_base="crawlstore"),
    Spec("scrapy-redis-cluster", f"cluster: scrapy-redis layout, pipelines of {BATCH}",
         "scrapy-redis", "cluster", BATCH,
         f"cluster: scrapy-redis layout, MULTI; ZRANGE 0 {BATCH - 1}; ...; EXEC",
         push_base="scrapy-redis-cluster", pop_base="scrapy-redis-cluster"),
    Spec("crawlstore-cluster", f"cluster: crawlstore push_many({BATCH})", "crawlstore",
         "cluster", BATCH, f"cluster: crawlstore pop_many({BATCH}) + report_many(Done)",
         push_base="scrapy-redis-cluster", pop_base="scrapy-redis-cluster"),
]  # fmt: skip


@dataclass
class Observed:
    """What a run left on its servers: each master after the push and after the pop."""

    pushed: list[Master] = field(default_factory=list)
    popped: list[Master] = field(default_factory=list)
    base: list[Master] = field(default_factory=list)
    ns: str = ""


def run_spec(spec: Spec, dep: Deployment, seeds: list[Seed], urls: list[str],
             requests: list[Request], ns: str) -> tuple[float, float, Observed]:  # fmt: skip
    """One run on emptied servers: (push seconds, pop seconds, what the masters counted)."""
    dep.reset()
    seen = Observed(base=dep.snapshot(), ns=ns)
    n = len(urls)
    if spec.processes > 1:
        push_s, pop_s = _two_processes(spec, dep, urls, ns, seen)
        return push_s, pop_s, seen
    if spec.who == "scrapy-redis":
        client = dep.client()
        try:
            layout = ScrapyRedis(client, spec.batch)
            push_s = timed(lambda: _check("pushed", layout.push(requests), n))
            seen.pushed = dep.snapshot()
            pop_s = timed(lambda: _check("popped", layout.pop(), n))
        finally:
            client.close()
    else:
        store = Store.open(dep.store_url(ns))
        try:
            frontier = store.frontier()
            push_s = timed(lambda: _check("admitted", push_seeds(frontier, seeds, spec.batch), n))
            seen.pushed = dep.snapshot()
            pop_s = timed(lambda: _check("popped", drain(store, frontier, spec.batch,
                                                         spec.worker), n))  # fmt: skip
        finally:
            store.close()
    seen.popped = dep.snapshot()
    return push_s, pop_s, seen


def _check(what: str, got: int, want: int) -> None:
    if got != want:
        raise RuntimeError(f"{what} {got} of {want}")


def _two_processes(spec: Spec, dep: Deployment, urls: list[str], ns: str,
                   seen: Observed) -> tuple[float, float]:  # fmt: skip
    """Two client processes, half the URLs each, into one store or a store each: the wall
    time of both pushes, and of both drains."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(spec.processes + 1)
    results = context.Queue()
    parts = [urls[i :: spec.processes] for i in range(spec.processes)]
    names = [ns if spec.stores == 1 else f"{ns}-{i}" for i in range(spec.processes)]
    procs = [context.Process(target=_client, args=(dep.store_url(name), part, spec.batch,
                                                   barrier, results), daemon=True)
             for name, part in zip(names, parts, strict=True)]  # fmt: skip
    for p in procs:
        p.start()
    try:
        barrier.wait(120)  # the children opened their stores and built their seeds
        barrier.wait(600)  # pushed
        seen.pushed = dep.snapshot()
        barrier.wait(60)
        got = [results.get(timeout=600) for _ in procs]
    except threading.BrokenBarrierError:  # a child failed, and broke the barrier: say why
        try:
            word = results.get(timeout=30)[6]
        except queue.Empty:
            word = "it died without a word"
        raise RuntimeError(f"a client process failed: {word}") from None
    except BaseException:
        barrier.abort()
        raise
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    errors = [g[6] for g in got if g[6]]
    if errors:
        raise RuntimeError(f"a client process failed: {errors[0]}")
    _check("admitted", sum(g[4] for g in got), len(urls))
    _check("popped", sum(g[5] for g in got), len(urls))
    seen.popped = dep.snapshot()
    return (max(g[1] for g in got) - min(g[0] for g in got),
            max(g[3] for g in got) - min(g[2] for g in got))  # fmt: skip


# -- memory --------------------------------------------------------------------------------------


@dataclass
class Footprint:
    """``used_memory`` of one kind of entry: bytes a URL over ``n``, and from ``n`` to 2n."""

    key: str
    label: str
    n: int
    bytes_a_url: float = 0.0
    marginal: float | None = None
    keys: int = 0
    per_s: float = 0.0  # URLs a second of the fill


def _used(dep: Deployment) -> Master:
    return dep.snapshot()[0]


def _measure(dep: Deployment, key: str, label: str, n: int, fill: Callable[[], object],
             before: int) -> Footprint:  # fmt: skip
    """``fill()`` timed, and what the server holds after it above ``before``, over ``n``."""
    seconds = timed(fill)
    after = _used(dep)
    return Footprint(key, label, n, (after.used_memory - before) / n, None, after.keys,
                     n / seconds)  # fmt: skip


def frontier_memory(dep: Deployment, hosts: int, n: int) -> list[Footprint]:
    """A queued URL and a crawled one: ``n`` new URLs over ``hosts`` hosts pushed into an
    emptied server (batches of 1000), then all popped (and, for crawlstore, reported Done)."""
    urls = urls_of(hosts, max(1, n // hosts))
    n = len(urls)
    seeds = [Seed.get(u) for u in urls]
    requests = [request_of(u) for u in urls]
    out = []
    dep.reset()
    store = Store.open(dep.store_url("memory"))
    try:
        frontier = store.frontier()
        before = _used(dep).used_memory
        out.append(_measure(dep, "queued-crawlstore", "crawlstore: a queued URL", n,
                            lambda: _check("admitted", push_seeds(frontier, seeds, 1000), n),
                            before))  # fmt: skip
        out.append(_measure(dep, "done-crawlstore", "crawlstore: a URL popped and reported "
                            "Done (its record stays)", n,
                            lambda: _check("popped", drain(store, frontier, 1000), n),
                            before))  # fmt: skip
    finally:
        store.close()
    dep.reset()
    client = dep.client()
    try:
        layout = ScrapyRedis(client, 1000)
        before = _used(dep).used_memory
        out.append(_measure(dep, "queued-scrapy-redis", "scrapy-redis layout: a queued "
                            "request and its fingerprint", n,
                            lambda: _check("pushed", layout.push(requests), n),
                            before))  # fmt: skip
        out.append(_measure(dep, "done-scrapy-redis", "scrapy-redis layout: a request popped "
                            "(its fingerprint stays)", n,
                            lambda: _check("popped", layout.pop(), n), before))  # fmt: skip
    finally:
        client.close()
    return out


def seen_memory(dep: Deployment, n: int) -> list[Footprint]:
    """A fingerprint of each seen set: ``n`` distinct ones into an emptied server, then ``n``
    more (the exact sets), ``insert_many`` of 1000 at a time; and of scrapy-redis's dupefilter
    (SADDs of 40-hex SHA-1s, pipelines of 1000)."""
    fps = [hashlib.md5(b"%d" % i).digest() for i in range(2 * n)]
    out = []
    for kind, label in (("packed", 'crawlstore store.seen(kind="packed") (the default)'),
                        ("set", 'crawlstore store.seen(kind="set")'),
                        ("bloom", "crawlstore store.seen(bloom=(n, 0.01))")):  # fmt: skip
        dep.reset()
        store: Any = Store.open(dep.store_url(f"seen-{kind}"))  # on Redis: seen(kind=)
        try:
            view = store.seen(bloom=(n, 0.01)) if kind == "bloom" else store.seen(kind=kind)

            def insert(first: int, view: Any = view) -> None:
                for i in range(first, first + n, SEEN_BATCH):
                    view.insert_many(fps[i : i + SEEN_BATCH])

            out.append(_twice(dep, f"seen-{kind}", label, n, insert, kind != "bloom"))
            if len(view) < (0.95 * n if kind == "bloom" else 2 * n):
                raise RuntimeError(f"seen({kind}) took {len(view)} of {2 * n} as new")
        finally:
            store.close()
    dep.reset()
    client = dep.client()
    try:
        dupes = [hashlib.sha1(fp).hexdigest() for fp in fps]

        def sadd(first: int) -> None:
            for i in range(first, first + n, SEEN_BATCH):
                pipe = client.pipeline(transaction=False)
                for fp in dupes[i : i + SEEN_BATCH]:
                    pipe.sadd(f"{SPIDER}:dupefilter", fp)
                pipe.execute()

        out.append(_twice(dep, "seen-scrapy-redis", "scrapy-redis RFPDupeFilter: a SET of "
                          "40-hex SHA-1s", n, sadd, True))  # fmt: skip
    finally:
        client.close()
    return out


def _twice(dep: Deployment, key: str, label: str, n: int, insert: Callable[[int], None],
           again: bool) -> Footprint:  # fmt: skip
    """``insert(0)`` measured; with ``again``, what ``insert(n)`` adds too."""
    got = _measure(dep, key, label, n, lambda: insert(0), _used(dep).used_memory)
    if again:
        filled = _used(dep).used_memory
        insert(n)
        got.marginal = (_used(dep).used_memory - filled) / n
    return got


# -- the tables ----------------------------------------------------------------------------------


def _median_ms(row: Row, units: int) -> str:
    per = row.per_op
    return f"{per * row.ops / units * 1000:.1f}" if per and units else ""


def _commands(before: list[Master], after: list[Master], n: int) -> str:
    if not before or not after:
        return ""
    calls = sum(a.commands - b.commands for a, b in zip(after, before, strict=True))
    return f"{calls / n:.3g}"


def redis_tables(plan: Plan, progress: Progress) -> list[Table]:
    from .redis_scaling import scaling_table

    hosts, per_host, n_memory = sizes(plan)
    urls = urls_of(hosts, per_host)
    n = len(urls)
    columns = ["URLs a run", "ms a batch", "Redis commands a URL"]
    push = Table("redis-push", "Redis: pushing new seeds in batches, crawlstore's store on "
                 "Redis vs the scrapy-redis layout on the same servers", "URL", "scrapy-redis",
                 columns=columns)  # fmt: skip
    pop = Table("redis-pop", "Redis: popping in batches, each reported Done, crawlstore vs "
                "the scrapy-redis layout (which has no leases and no reports)", "URL",
                "scrapy-redis", columns=columns)  # fmt: skip
    spread = Table("redis-spread", "Redis Cluster: keys, memory and commands on each of the "
                   "3 masters, after the cluster rows' push and pop", "master", "",
                   columns=["keys after the push", "MB after the push", "commands, push + pop",
                            "share of commands", "FCALLs"], timed=False)  # fmt: skip
    memory = Table("redis-memory", "Redis: used_memory a queued, a crawled and a seen URL, "
                   "crawlstore vs scrapy-redis's keys", "URL", "", timed=False,
                   columns=["URLs", "bytes a URL", "bytes a URL, n to 2n", "keys",
                            "scrapy-redis / this", "URLs/s"])  # fmt: skip
    by_key = {s.key: s for s in SPECS}
    drivers = [Row(s.key, s.label, ops=n) for s in SPECS]
    push.rows = [Row(s.key, s.label, ops=n, baseline=s.push_base) for s in SPECS if s.in_push]
    pop.rows = [Row(s.key, s.pop_label, ops=n, baseline=s.pop_base) for s in SPECS]
    rounds = plan.heavy_rounds
    with Servers() as servers:
        deps = {"standalone": servers.standalone, "cluster": servers.cluster}
        for d in drivers:
            if deps[by_key[d.key].where] is None:
                d.skipped = servers.why[by_key[d.key].where]
        live = [d for d in drivers if not d.skipped]
        progress.start("redis: push and pop", len(live) * rounds + 1)
        seeds = [Seed.get(u) for u in urls]
        requests = [request_of(u) for u in urls]
        observed: dict[str, Observed] = {}

        def run(row: Row, i: int) -> float:
            spec = by_key[row.key]
            dep = deps[spec.where]
            assert dep is not None
            push_s, pop_s, observed[row.key] = run_spec(spec, dep, seeds, urls, requests,
                                                        f"r{i}-{row.key}")  # fmt: skip
            pop.row(row.key).times.append(pop_s)  # type: ignore[union-attr]
            return push_s

        alternate(drivers, rounds, run, progress)
        for d in drivers:
            for table in (push, pop):
                row = table.row(d.key)
                if row is None:
                    continue
                if table is push:
                    row.times = list(d.times)
                row.skipped = d.skipped
                row.extra["URLs a run"] = f"{n:,}"
                spec, seen = by_key[d.key], observed.get(d.key)
                if spec.processes == 1 and not spec.worker:
                    row.extra["ms a batch"] = _median_ms(row, -(-n // spec.batch))
                if seen is not None:
                    before, after = (seen.base, seen.pushed) if table is push else (
                        seen.pushed, seen.popped)  # fmt: skip
                    row.extra["Redis commands a URL"] = _commands(before, after, n)
        _spread(spread, deps["cluster"], observed, servers.why.get("cluster", ""))
        if deps["standalone"] is None:
            memory.rows = [Row("memory", "used_memory", skipped=servers.why["standalone"])]
        else:
            _memory(memory, deps["standalone"], hosts, n_memory)
        progress.advance("memory")
        scaling = scaling_table(plan, deps, servers.why, progress)
    _notes(push, pop, spread, memory, hosts, per_host, n_memory, rounds)
    return [push, pop, spread, memory, scaling]


def _spread(table: Table, dep: Deployment | None, observed: dict[str, Observed],
            why: str) -> None:  # fmt: skip
    for key, who, marks in (("scrapy-redis-cluster", "scrapy-redis layout",
                             {f"{SPIDER}:requests": "the queue", f"{SPIDER}:dupefilter":
                              "the dupefilter"}),
                            ("crawlstore-cluster", "crawlstore", {}),
                            ):  # fmt: skip
        seen = observed.get(key)
        if dep is None or seen is None or not seen.popped:
            table.rows.append(Row(key, who, skipped=why or "not run"))
            continue
        if not marks:  # the first crawl of a store is crawl 1
            marks = {
                "{" + seen.ns + "}": "the store's lock, epoch and journal",
                "{" + seen.ns + ":1}": "the crawl's totals and queue index",
            }
        holders: dict[str, list[str]] = {}
        for name, what in marks.items():
            holders.setdefault(dep.master_of(name.encode()), []).append(what)
        total = sum(p.commands for p in seen.popped) or 1
        for i, (base, pushed, popped) in enumerate(zip(seen.base, seen.pushed, seen.popped,
                                                       strict=True)):  # fmt: skip
            holds = holders.get(popped.name)
            label = f"{who}, master {i + 1} ({popped.name})"
            row = Row(f"{key}@{i + 1}", label + (f": {', '.join(holds)}" if holds else ""))
            grown = (pushed.used_memory - base.used_memory) / 1e6
            row.extra = {"keys after the push": f"{pushed.keys:,}",
                         "MB after the push": f"{grown:.2f}",
                         "commands, push + pop": f"{popped.commands:,}",
                         "share of commands": f"{popped.commands / total:.0%}",
                         "FCALLs": f"{popped.fcalls:,}"}  # fmt: skip
            table.rows.append(row)


def _memory(table: Table, dep: Deployment, hosts: int, n: int) -> None:
    got = frontier_memory(dep, hosts, n) + seen_memory(dep, n)
    theirs = {"queued-crawlstore": "queued-scrapy-redis", "done-crawlstore": "done-scrapy-redis"}
    by_key = {f.key: f for f in got}
    for f in got:
        row = Row(f.key, f.label)
        row.extra = {"URLs": f"{f.n:,}", "bytes a URL": f"{f.bytes_a_url:.1f}",
                     "keys": f"{f.keys:,}", "URLs/s": f"{f.per_s:,.0f}"}  # fmt: skip
        if f.marginal is not None:
            row.extra["bytes a URL, n to 2n"] = f"{f.marginal:.1f}"
        other = by_key[theirs.get(f.key, "seen-scrapy-redis")]
        if "scrapy-redis" not in f.key:
            pairs = [(other.bytes_a_url, f.bytes_a_url), (other.marginal, f.marginal)]
            row.extra["scrapy-redis / this"] = " / ".join(
                f"{a / b:.2f}x" for a, b in pairs if a is not None and b
            )
        table.rows.append(row)


def _notes(push: Table, pop: Table, spread: Table, memory: Table, hosts: int, per_host: int,
           n_memory: int, rounds: int) -> None:  # fmt: skip
    n = hosts * per_host
    push.notes += [
        f"{n:,} new URLs a run, {per_host} on each of {hosts:,} hosts, in that order (every "
        "batch spans as many hosts as it holds URLs), into emptied servers (FLUSHALL, CONFIG "
        f"RESETSTAT before each run); the median of {rounds} rounds. One client process "
        "(this one) but in the two-process rows. The request objects are built before the "
        "timed part: crawlstore's seeds (`Seed.get`), scrapy-redis's request dicts (what "
        "Scrapy 2.19's `Request.to_dict()` gives for a plain GET) and their `RFPDupeFilter` "
        "fingerprints; the timed part serialises them (msgpack) and sends them.",
        "crawlstore: `store.frontier()` (per-host queues, the store's default durability on "
        "Redis), `push_many` of a batch, each its own write unit: it takes the store lock "
        "(`{ns}:lock`), reads what it needs, and commits (one `cs_commit` on a server; on the "
        "cluster a journal, one `cs_apply` pipeline per master, a release). Every URL is "
        "checked to be admitted.",
        "scrapy-redis layout: scrapy-redis 0.9.1's own commands, reimplemented here with "
        "redis-py (the package is not a dependency of the suite): `RFPDupeFilter.request_seen` "
        "is an SADD of the 40-hex SHA-1, `PriorityQueue.push` a ZADD (score -priority) of the "
        "serialised request when it was new. As it ships, each is a round trip; the baseline "
        "row sends a batch's SADDs in one pipeline, then its ZADDs in another.",
        "Servers: redis-server "
        "7 on loopback, `appendonly yes` (appendfsync everysec) on the standalone server as "
        "on the cluster's nodes; the cluster is 3 masters and 3 replicas. The two-process "
        "rows: two client processes (spawned, half the URLs each), their ratio to one "
        "process; 'one store': both on one namespace (their units take turns at its lock), "
        "'a store each': two namespaces on the one server. ms a batch: the run's median time "
        "over its batches. Redis commands a URL: INFO commandstats calls of all masters, the "
        "commands run inside crawlstore's functions counted too.",
    ]
    pop.notes += [
        "The runs of the push table, drained: everything popped in batches until nothing "
        "is left (checked). crawlstore: each batch one transaction, `pop_many(batch)` then "
        "`report_many` of a `Done` for each seed popped (one write unit: leases taken and "
        "ended, URL records marked done, queues placed again); the worker row: "
        "`frontier.worker()` with one caller, `finish(Done(seed))` for each seed it hands "
        "out, its writer thread committing groups.",
        "The scrapy-redis layout pops from its one sorted set and forgets the request: no "
        "lease, no report, no per-host queue, nothing to do when a page is done. The "
        "comparison is generous to it: crawlstore's row does that work too. Its decode is "
        "`msgpack.unpackb` of each request (not Scrapy's `request_from_dict`).",
    ]
    spread.notes += [
        "The last round's cluster runs: keys (DBSIZE) and used_memory (above the emptied "
        "master's) on each master after the push; INFO commandstats calls (data commands, "
        "those inside functions too) and FCALLs over the push and the pop. crawlstore spreads "
        "a crawl over 1,024 buckets, each a hash slot; every write unit also calls the "
        "master of the store's own slot (lock, journal, release). scrapy-redis keeps a "
        "spider's queue and its dupefilter in two keys: two masters at most, one key each.",
    ]
    memory.notes += [
        "INFO memory's used_memory (the allocator's bytes, not the process's RSS) of the "
        "standalone server, above what it used emptied, over the URLs; URLs/s: the fill's "
        f"speed. Queued and crawled: {n_memory:,} new URLs over {hosts:,} hosts pushed in "
        "batches of 1000 (scrapy-redis: pipelines of 1000), then all popped in batches of "
        "1000 (crawlstore: each reported Done in the pop's transaction). Seen sets: "
        f"{n_memory:,} distinct fingerprints, `insert_many` of {SEEN_BATCH} at a time "
        f"(scrapy-redis: SADDs in pipelines of {SEEN_BATCH}); 'n to 2n': what {n_memory:,} "
        "more cost (the per-key overheads are paid by the first: at millions of URLs a URL "
        "costs about that). The Bloom filter is sized for n at 1%.",
        "A queued crawlstore URL is its URL record (state, queue, times, the packed seed), "
        "its queue entry, its place in the queue's URL list, and its share of its queue's "
        "record and index entries and of the queue's keys; a crawled one keeps its record and "
        "list entry (how the store knows the URL: the frontier's own URLs need no separate "
        "seen set). scrapy-redis keeps a request's serialised dict in its sorted set and its "
        "fingerprint in the dupefilter, which is all it keeps once the request is popped.",
    ]


# -- the profile ---------------------------------------------------------------------------------

#: Where a profiled run's own time (cProfile's tottime) goes, by the file of the function.
PLACES = [
    ("waiting on the socket (round trips, the server's work)", ("recv_into", "sendall")),
    ("crawlstore/redis/unit.py (the unit: cache, reads, buffered writes)", ("redis/unit.py",)),
    ("crawlstore/redis/storage.py (the SPI on Redis: keys, records)", ("redis/storage.py",)),
    ("crawlstore/redis/server.py (calls, errors, apply)", ("redis/server.py",)),
    ("crawlstore/frontier/ (the core: policy, admission, pop, reports)", ("crawlstore/frontier",)),
    ("redis-py (commands, pipelines, parsing)", ("site-packages/redis",)),
    ("msgpack", ("msgpack",)),
]


@dataclass
class Units:
    """The write units of a run: how long each held the store lock, from the lock taken
    (``Unit.started``) to its commit returned, and the writes their commits sent."""

    holds: list[float] = field(default_factory=list)
    writes: int = 0  # the last of each hash field, set or sorted set member: what is sent
    by_kind: collections.Counter[str] = field(default_factory=collections.Counter)


def _kind(key: bytes) -> str:
    """A key's kind, as the table of crawlstore/redis/storage.py names it: ``:t``, ``:p:``."""
    suffix = key.rsplit(b"}", 1)[-1].decode("utf-8", "replace")
    end = suffix.find(":", 1)
    return suffix[: end + 1] if end > 0 else suffix


@contextmanager
def unit_clock() -> Iterator[Units]:
    """``Units`` of the block: ``Unit.commit`` wrapped while it runs (a measurement of the
    benchmark's; crawlstore is unchanged)."""
    from crawlstore.storages._redis.unit import Unit

    units = Units()
    commit = Unit.commit

    def timed_commit(unit: Unit) -> None:
        writes = unit._all_writes()  # each field's last write only: what the commit sends
        units.writes += len(writes)
        units.by_kind.update(_kind(key) for key, _ in writes)
        try:
            commit(unit)
        finally:
            units.holds.append(time.monotonic() - unit.started)

    with mock.patch.object(Unit, "commit", timed_commit):
        yield units


@contextmanager
def round_trips() -> Iterator[collections.Counter[str]]:
    """Calls of ``Server.read`` and ``Server.fcall`` (a round trip each) while the block runs,
    by the function of crawlstore/redis/storage.py (or views.py) that made them, else by
    unit.py's: both wrapped while the block runs (crawlstore is unchanged)."""
    from crawlstore.storages._redis.server import Server

    counts: collections.Counter[str] = collections.Counter()
    saved = Server.read, Server.fcall

    def caller() -> str:
        frame, inner = sys._getframe(2), ""
        while frame is not None:
            name = frame.f_code.co_filename
            if name.endswith(("redis/storage.py", "redis/viewdata.py", "crawlstore/views.py")):
                return f"{name.rsplit('/', 1)[-1][:-3]}.{frame.f_code.co_name}"
            if name.endswith("redis/unit.py") and not inner:
                inner = f"unit.{frame.f_code.co_name}"
            frame = frame.f_back  # type: ignore[assignment]
        return inner or "other"

    def read(server: Server, commands: list[tuple[Any, ...]]) -> list[Any]:
        counts[caller()] += 1
        return saved[0](server, commands)

    def fcall(server: Server, name: str, keys: list[bytes], args: list[Any]) -> Any:
        counts[name] += 1
        return saved[1](server, name, keys, args)

    with mock.patch.object(Server, "read", read), mock.patch.object(Server, "fcall", fcall):
        yield counts


@contextmanager
def _profiled(profiler: cProfile.Profile) -> Iterator[collections.Counter[str]]:
    with round_trips() as trips:
        profiler.enable()
        try:
            yield trips
        finally:
            profiler.disable()


def _profiled_run(dep: Deployment, seeds: list[Seed], what: str, batch: int, ns: str,
                  measure: Callable[[], AbstractContextManager[_T]],
                  ) -> tuple[float, int, _T]:  # fmt: skip
    """One run of the push (or of the pop + report of what an untimed push left) on emptied
    servers, ``measure()`` around it: its seconds, the server's microseconds (INFO
    commandstats) in it, and what ``measure`` gave."""
    dep.reset()
    store = Store.open(dep.store_url(ns))
    try:
        frontier = store.frontier()
        if what == "pop":
            push_seeds(frontier, seeds, 1000)
        for m in dep.masters:
            m.config_resetstat()
        with measure() as got:
            start = time.perf_counter()
            done = drain(store, frontier, batch) if what == "pop" else push_seeds(
                frontier, seeds, batch)  # fmt: skip
            wall = time.perf_counter() - start
        _check(what, done, len(seeds))
    finally:
        store.close()
    server_us = sum(v["usec"] for m in dep.masters for k, v in m.info("commandstats").items()
                    if k.removeprefix("cmdstat_").split("|")[0] not in ADMIN)  # fmt: skip
    return wall, server_us, got


def profile(what: str, cluster: bool, hosts: int, per_host: int, batch: int, top: int) -> None:
    """One crawlstore run of the push (or of the pop + report of what a push left) with the
    store lock's hold time of each unit, then one under cProfile: where its time goes, its
    round trips and the server's time."""
    with Servers() as servers:
        dep = servers.cluster if cluster else servers.standalone
        if dep is None:
            raise SystemExit(f"no server: {servers.why}")
        seeds = [Seed.get(u) for u in urls_of(hosts, per_host)]
        n, batches = len(seeds), -(-len(seeds) // batch)
        pings = []
        for _ in range(2000):
            start = time.perf_counter()
            dep.masters[0].ping()
            pings.append(time.perf_counter() - start)
        wall, server_us, got = _profiled_run(dep, seeds, what, batch, "plain", unit_clock)
        units = sorted(got.holds)
        profiler = cProfile.Profile()
        profiled, _, trips = _profiled_run(dep, seeds, what, batch, "profiled",
                                           lambda: _profiled(profiler))  # fmt: skip
    print(f"{what} of {n:,} URLs ({hosts:,} hosts), batches of {batch}, "
          f"{'cluster' if cluster else 'standalone'}: {wall:.2f} s, {n / wall:,.0f} URLs/s, "
          f"{wall / batches * 1000:.1f} ms a batch; a round trip (redis-py PING) "
          f"{sorted(pings)[1000] * 1e6:.0f} µs\n")  # fmt: skip
    print(f"lock: {len(units)} units, held {units[len(units) // 2] * 1000:.1f} ms (median), "
          f"{units[int(len(units) * 0.9)] * 1000:.1f} ms (p90), {sum(units) / wall:.0%} of the "
          f"run; the server's own time {server_us / 1000 / batches:.1f} ms a batch "
          f"({server_us / 1e6 / wall:.0%} of the run); writes sent in the commits "
          f"{got.writes / n:.1f} a URL (the last of each field or member)")  # fmt: skip
    kinds = ", ".join(f"{k} {c / n:.1f}" for k, c in got.by_kind.most_common(6))
    print(f"writes a URL by key (storage.py's table): {kinds}\n")
    stats = pstats.Stats(profiler)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    print(f"under cProfile: {profiled:.2f} s\n\n| round trips, by the call that made them "
          "| a batch |\n|---|---:|")  # fmt: skip
    for name, calls in trips.most_common():
        print(f"| {name} | {calls / batches:.1f} |")
    applies = sum(v[1] for k, v in raw.items() if k[2] == "execute" and any(
        c[0].endswith("redis/server.py") and c[2] == "apply" for c in v[4]))  # fmt: skip
    if applies:
        print(f"| cs_apply pipelines (one a master written) | {applies / batches:.1f} |")
    print("\n| where (cProfile tottime) | share |\n|---|---:|")
    placed = 0.0
    for label, marks in PLACES:
        seconds = sum(v[2] for k, v in raw.items() if any(m in k[0] or m in k[2] for m in marks))
        placed += seconds
        print(f"| {label} | {seconds / total:.0%} |")
    print(f"| the rest (Python builtins, the benchmark) | {(total - placed) / total:.0%} |\n")
    stats.sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.redis", description=profile.__doc__)
    parser.add_argument("--profile", choices=["push", "pop"], required=True)
    parser.add_argument("--cluster", action="store_true", help="on the cluster (default: one "
                        "server)")  # fmt: skip
    parser.add_argument("--hosts", type=int, default=2_000)
    parser.add_argument("--per-host", type=int, default=5)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--top", type=int, default=25, help="functions listed by own time")
    args = parser.parse_args(argv)
    profile(args.profile, args.cluster, args.hosts, args.per_host, args.batch, args.top)


if __name__ == "__main__":
    main()
