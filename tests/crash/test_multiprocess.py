"""Several processes on one store: each seed is leased to exactly one of them at a time."""

from __future__ import annotations

import os
import select
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import pop_seeds

from crawlstore import Done, Seed, Store, Worker
from crawlstore.errors import StoreError
from crawlstore.revisit import RevisitTags, revisit

SEEDS = 2000


def worker(path: str, write_fd: int) -> None:
    store = Store.open(path, durability="nosync")
    frontier = store.frontier(lease_time=3600, reap_interval=0.05)
    while (seed := frontier.next_seed(poll=0.01)) is not None:
        frontier.report(Done(seed))
        os.write(write_fd, f"{seed.url}\n".encode())
    store.close()


def group_worker(path: str, write_fd: int) -> None:
    """``worker`` through group commit: four threads share one worker of the process."""
    import threading

    store = Store.open(path)  # the default durability: an fsync a group

    def run(worker: Worker) -> None:
        for ready in worker:
            worker.finish(Done(ready.seed)).result()
            os.write(write_fd, f"{ready.seed.url}\n".encode())

    frontier = store.frontier(lease_time=3600, reap_interval=0.05)
    with frontier.worker(prefetch=16, poll=0.01) as worker:
        threads = [threading.Thread(target=run, args=(worker,)) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    store.close()


def victim(path: str, write_fd: int) -> None:
    """Lease one seed, say which, and hang until killed."""
    store = Store.open(path, durability="nosync")
    seed = store.frontier().next_seed()
    assert seed is not None
    os.write(write_fd, f"{seed.url}\n".encode())
    time.sleep(3600)


def fork(target: Callable[[str, int], None], path: Path, count: int) -> tuple[list[int], int]:
    read_fd, write_fd = os.pipe()
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            code = 0
            try:
                target(str(path), write_fd)
            except BaseException:
                traceback.print_exc()
                code = 1
            os._exit(code)
        pids.append(pid)
    os.close(write_fd)
    return pids, read_fd


def read_all(read_fd: int, timeout: float) -> list[str]:
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([read_fd], [], [], 1.0)
        if ready:
            chunk = os.read(read_fd, 1 << 16)
            if not chunk:
                break
            data += chunk
    os.close(read_fd)
    return data.decode().split()


def fill(path: Path) -> list[str]:
    urls = [f"https://example.com/{i}" for i in range(SEEDS)]
    with Store.open(path, durability="nosync") as store:
        store.frontier("fifo").push_many(Seed.get(u) for u in urls)
    return urls


@pytest.mark.parametrize(("target", "processes"), [(worker, 4), (group_worker, 3)],
                         ids=["plain", "group-commit"])  # fmt: skip
def test_processes_drain_a_store_exactly_once(
    tmp_path: Path, target: Callable[[str, int], None], processes: int
) -> None:
    path = tmp_path / "shared.lmdb"
    urls = fill(path)
    pids, read_fd = fork(target, path, processes)
    crawled = read_all(read_fd, timeout=90)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    assert codes == [0] * processes
    counts = Counter(crawled)
    assert sorted(counts) == sorted(urls)
    assert max(counts.values()) == 1  # exactly once, across processes (and threads)
    with Store.open(path) as store:
        stats = store.frontier().stats()
        assert (stats.done, stats.queued, stats.in_flight, stats.cancelled) == (SEEDS, 0, 0, 0)


def test_a_killed_worker_s_seed_goes_to_the_others(tmp_path: Path) -> None:
    path = tmp_path / "shared.lmdb"
    urls = fill(path)
    (victim_pid,), victim_fd = fork(victim, path, 1)
    ready, _, _ = select.select([victim_fd], [], [], 30)
    assert ready
    held = os.read(victim_fd, 4096).decode().strip()
    os.close(victim_fd)
    os.kill(victim_pid, signal.SIGKILL)  # dies holding the lease of `held`
    os.waitpid(victim_pid, 0)
    pids, read_fd = fork(worker, path, 3)
    crawled = read_all(read_fd, timeout=90)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    assert codes == [0, 0, 0]
    counts = Counter(crawled)
    assert held in counts  # the survivors reaped the dead worker's lease
    assert sorted(counts) == sorted(urls) and max(counts.values()) == 1


def test_readonly_store_inspects_another_process_s_crawl(tmp_path: Path) -> None:
    path = tmp_path / "shared.lmdb"
    fill(path)
    pids, read_fd = fork(worker, path, 1)  # drains the store while we watch
    reader = Store.open(path, readonly=True)  # after fork(): never carry a store across it
    view = reader.frontier()
    seen_sizes = {len(view)}
    crawled = read_all(read_fd, timeout=90)
    assert os.waitstatus_to_exitcode(os.waitpid(pids[0], 0)[1]) == 0
    seen_sizes.add(len(view))
    assert len(crawled) == SEEDS and 0 in seen_sizes and view.stats().done == SEEDS
    reader.close()


def test_a_forked_child_opens_the_store_its_parent_holds(tmp_path: Path) -> None:
    path = tmp_path / "s.lmdb"
    fill(path)

    def child(path: str, write_fd: int) -> None:
        try:
            inherited.frontier()  # what the parent opened cannot be used here...
        except StoreError as exc:
            os.write(
                write_fd, b"refused " if b"open the store again" in str(exc).encode() else b"?"
            )
        with Store.open(path) as store:  # ...and opening it again works
            f = store.frontier()
            seed = f.next_seed()
            assert seed is not None
            f.report(Done(seed))
            os.write(write_fd, f"{len(f)}".encode())

    with Store.open(path) as inherited:
        view = inherited.frontier()
        pids, read_fd = fork(child, path, 1)
        assert read_all(read_fd, timeout=30) == ["refused", str(SEEDS - 1)]
        assert os.waitstatus_to_exitcode(os.waitpid(pids[0], 0)[1]) == 0
        assert len(view) == SEEDS - 1  # the parent goes on with what it opened
        view.push(Seed.get("https://example.com/after"))
        assert len(inherited.frontier()) == SEEDS


def pool_drain(path: str) -> list[str]:
    """One pool task: crawl up to 50 seeds of the shared store."""
    with Store.open(path, durability="nosync") as store:
        frontier = store.frontier()
        crawled = []
        for seed in pop_seeds(frontier, 50):
            frontier.report(Done(seed))
            crawled.append(seed.url)
        return crawled


def test_a_fork_pool_and_a_spawn_pool_drain_one_store(tmp_path: Path) -> None:
    import multiprocessing

    path = tmp_path / "s.lmdb"
    urls = fill(path)
    with Store.open(path, durability="nosync") as parent:  # the parent seeds and keeps it open
        frontier = parent.frontier()
        assert len(frontier) == SEEDS
        forked = multiprocessing.get_context("fork").Pool(2)
        spawned = multiprocessing.get_context("spawn").Pool(2)
        try:
            jobs = [pool.map_async(pool_drain, [str(path)] * 25) for pool in (forked, spawned)]
            batches = [batch for job in jobs for batch in job.get(timeout=120)]
        finally:
            forked.terminate()
            spawned.terminate()
        crawled = Counter(url for batch in batches for url in batch)
        assert sorted(crawled) == sorted(urls) and max(crawled.values()) == 1
        stats = frontier.stats()
        assert (stats.done, stats.queued, stats.in_flight) == (SEEDS, 0, 0)


class Weekly(RevisitTags):
    PAGE = revisit("7d")


LINKED = 6000  # pages reachable by links, beyond the SEEDS pushed first
KILL_AT = (1500, 4000)  # pages acknowledged done when a worker is killed (and one started)


def threaded_worker(path: str, write_fd: int) -> None:
    """Eight threads that pop, report, push the page's links and schedule its revisit until the
    crawl is over (nothing queued or in flight: only revisits, a week away); a line after each
    commit."""
    import threading

    store = Store.open(path, durability="nosync")

    def run() -> None:
        popping = store.frontier(lease_time=3600, reap_interval=0.05)  # ends without revisits
        frontier = popping.revisit(Weekly).dedup_with(store.seen())
        while (seed := popping.next_seed(poll=0.01)) is not None:
            os.write(write_fd, f"L {seed.url}\n".encode())
            n = int(seed.url.rsplit("/", 1)[1])
            links = [Seed.get(f"https://example.com/{m}").with_tag(Weekly.PAGE)
                     for m in (SEEDS + 2 * n, SEEDS + 2 * n + 1) if m < SEEDS + LINKED]  # fmt: skip
            with store.transaction():
                frontier.report(Done(seed))
                frontier.push_many(links)
            os.write(write_fd, f"D {seed.url}\n".encode())

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()


def test_four_processes_of_eight_threads_with_kills(tmp_path: Path) -> None:
    import random

    path = tmp_path / "shared.lmdb"
    fill(path)
    rng = random.Random(4)
    fds: dict[int, int] = {}
    for _ in range(4):
        (pid,), fd = fork(threaded_worker, path, 1)
        fds[pid] = fd
    killed: set[int] = set()
    lines: dict[int, bytes] = dict.fromkeys(fds, b"")
    deadline = time.monotonic() + 300  # only a guard against a deadlock: the crawl ends itself
    while fds and time.monotonic() < deadline:
        ready, _, _ = select.select(list(fds.values()), [], [], 0.5)
        for pid, fd in list(fds.items()):
            if fd in ready:
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    lines[pid] += chunk
                    continue
                os.close(fd)
                del fds[pid]
                os.waitpid(pid, 0)
        acknowledged = sum(data.count(b"D ") for data in lines.values())
        if len(killed) < len(KILL_AT) and acknowledged >= KILL_AT[len(killed)] and fds:
            victim = rng.choice(sorted(fds))  # kill one worker mid-crawl, start another
            os.kill(victim, signal.SIGKILL)
            killed.add(victim)
            (pid,), fd = fork(threaded_worker, path, 1)
            fds[pid] = fd
            lines[pid] = b""
    assert not fds, "workers did not finish in time (a deadlock?)"
    assert len(killed) == len(KILL_AT)
    done: Counter[str] = Counter()
    held_by_killed: set[str] = set()
    for pid, data in lines.items():
        leased, finished = set(), set()
        for line in data.decode().splitlines():
            kind, url = line.split()
            (leased if kind == "L" else finished).add(url)
            if kind == "D":
                done[url] += 1
        if pid in killed:
            held_by_killed |= leased - finished
    twice = {url for url, n in done.items() if n > 1}
    assert twice <= held_by_killed  # more than once only when a killed worker held it
    everything = {f"https://example.com/{n}" for n in range(SEEDS + LINKED)}
    # Every page was crawled, except those whose only Done was a killed worker's commit that
    # it had no time to acknowledge (their linked pages were then found, or not, by that commit).
    assert set(done) <= everything and everything - set(done) <= held_by_killed
    with Store.open(path) as store:
        frontier = store.frontier()  # reaps the killed workers' leases
        stats, snap = frontier.stats(), frontier.snapshot()
        assert (stats.queued, stats.in_flight, len(snap.scheduled)) == (0, 0, 0)  # it is over
        revisits = {s.fingerprint for _, s in snap.revisits}
        tagged_done = {Seed.get(u).fingerprint for u in done if int(u.rsplit("/", 1)[1]) >= SEEDS}
        assert tagged_done <= revisits  # each page done has its revisit scheduled
        assert tagged_done <= set(store.seen())  # the linked pages were admitted through dedup


def test_a_fork_while_another_thread_opens_a_store_in_a_transaction(tmp_path: Path) -> None:
    import threading

    store = Store.open(tmp_path / "a.lmdb", durability="nosync")
    in_transaction, forked, worker_done = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:  # inside a transaction, opens and closes another store
        with store.transaction():
            store.frontier().push(Seed.get("http://a.test/1"))
            in_transaction.set()
            forked.wait(0.2)  # the fork is asked for meanwhile (and waits for this to end)
            with Store.open(tmp_path / "b.lmdb", durability="nosync") as other:
                other.frontier().push(Seed.get("http://b.test/1"))
        worker_done.set()

    thread = threading.Thread(target=worker)
    thread.start()
    assert in_transaction.wait(30)
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    forked.set()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    thread.join(30)
    assert worker_done.is_set() and len(store.frontier()) == 1
    store.close()


def _exit_code(pid: int, within: float = 60.0) -> int:
    """A child's exit code; a child still running after ``within`` seconds is killed, and the
    test fails."""
    deadline = time.monotonic() + within
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"the forked child {pid} hangs")
        time.sleep(0.005)


def test_a_fork_while_other_threads_flush_write_and_read(tmp_path: Path) -> None:
    """py-lmdb's close() waits for the environment's calls under way in other threads, and a
    child counts the calls it inherited forever: a fork waits for the periodic flush, and a
    child closes what it inherited without waiting on a read of the parent's. Each child opens
    the store again (or, if a read of the parent's was under way, says it cannot)."""
    import threading

    path = tmp_path / "s.lmdb"
    store = Store.open(path, durability="nosync", flush_interval=0.001)  # flushing all along
    frontier, stop = store.frontier(), threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            with store.transaction():
                frontier.push_many(Seed.get(f"https://h{i % 50}.test/{i}/{j}") for j in range(20))
            i += 1

    def read() -> None:
        while not stop.is_set():
            frontier.stats()

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    codes = []
    try:
        for _ in range(30):
            pid = os.fork()
            if pid == 0:
                code = 2
                try:
                    with Store.open(path, durability="nosync") as again:
                        len(again.frontier())
                    code = 0
                except StoreError as exc:
                    code = 3 if "forked from" in str(exc) else 2
                finally:
                    os._exit(code)
            codes.append(_exit_code(pid))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        store.close()
    assert set(codes) <= {0, 3} and codes.count(0) > 0, codes


def test_a_fork_during_an_export_keeps_the_parent_s_snapshot(tmp_path: Path) -> None:
    """An export reads one snapshot across its records; a child forked meanwhile (its exit
    included) must not end that snapshot in the reader table it shares with the parent, or a
    writer could reuse the pages the export still reads."""
    from crawlstore.storages._lmdb.registry import registry

    store = Store.open(tmp_path / "s.lmdb", durability="nosync")
    store.frontier().push_many(Seed.get(f"https://a.test/{i}") for i in range(3))
    engine = registry[str((tmp_path / "s.lmdb").resolve())]
    export = store.export()
    next(export)  # the snapshot is open, between two records
    readers = engine.env.readers().strip().splitlines()[1:]
    assert len(readers) == 1
    pid = os.fork()
    if pid == 0:
        os._exit(0)  # the child's at-fork handler has run: it dropped what it inherited
    assert _exit_code(pid) == 0
    assert engine.env.readers().strip().splitlines()[1:] == readers
    assert len(list(export)) > 0
    store.close()
