"""Faults from outside: a full disk, a second writer thread."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import pop_seeds

from crawlstore import Done, Seed, Store, Validator
from crawlstore.errors import CrawlstoreError, ReadOnlyStore, StoreError, StoreFull
from crawlstore.store import verify


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs of the test's own (needs the right to mount, as CI's root has)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
                          capture_output=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_raises_store_full_and_loses_nothing(tiny_disk: Path) -> None:
    ballast = tiny_disk / "ballast"
    ballast.write_bytes(b"\0" * 2**20)
    path = tiny_disk / "s.lmdb"
    with Store.open(path) as store:
        f = store.frontier("fifo")
        pushed = 0
        with pytest.raises(StoreFull, match="disk is full"):
            while True:
                f.push(Seed.get(f"https://example.com/{pushed}").with_body(b"x" * 500))
                pushed += 1
        assert pushed > 100 and len(f) == pushed
        ballast.unlink()  # space comes back: the store works on
        f.push(Seed.get("https://example.com/after"))
        assert len(f) == pushed + 1
    with Store.open(path) as store:
        assert len(store.frontier()) == pushed + 1


def test_threads_share_a_store_and_pop_each_seed_once(tmp_path: Path) -> None:
    with Store.open(tmp_path / "t.lmdb", durability="nosync") as store:
        f = store.frontier("fifo").dedup_with(store.seen())
        f.push_many(Seed.get(f"https://example.com/{i}") for i in range(800))
        crawled: list[str] = []
        lock = threading.Lock()

        def work() -> None:
            view = store.frontier()  # each thread may take its own view, or share one
            while (seed := view.next_seed(poll=0.01)) is not None:
                view.report(Done(seed))
                with lock:
                    crawled.append(seed.url)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        counts = Counter(crawled)
        assert len(counts) == 800 and max(counts.values()) == 1
        assert f.stats().done == 800 and len(f) == 0


# -- torn files, backups, stale slots, huge values -----------------------------------------------

READ_ALL = """
import sys
from crawlstore import Store, Ready, Done
from crawlstore.errors import CrawlstoreError
try:
    with Store.open(sys.argv[1]) as store:
        f = store.frontier()
        len(f), f.stats(), f.snapshot()
        while isinstance(p := f.pop(), Ready):
            f.report(Done(p.seed))
except CrawlstoreError as exc:
    print("typed", type(exc).__name__)
    sys.exit(0)
print("opened")
"""


def _filled(path: Path, n: int = 300) -> None:
    with Store.open(path, durability="nosync") as store:
        f = store.frontier("fifo").dedup_with(store.seen())
        f.push_many(Seed.get(f"https://example.com/{i}").with_body(b"x" * 200) for i in range(n))


@pytest.mark.parametrize("damage", ["truncate-half", "truncate-page", "garble", "zero-meta"])
def test_a_torn_or_garbled_file_never_crashes_the_interpreter(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s.lmdb"
    _filled(path)
    data = bytearray(path.read_bytes())
    if damage == "truncate-half":
        data = data[: len(data) // 2]
    elif damage == "truncate-page":
        data = data[:4096]
    elif damage == "garble":
        rng = random.Random(7)
        for _ in range(400):
            data[rng.randrange(8192, len(data))] = rng.randrange(256)
    else:
        data[:8192] = bytes(8192)
    torn = tmp_path / "torn.lmdb"
    torn.write_bytes(bytes(data))
    assert verify(torn)  # reports what is wrong
    done = subprocess.run([sys.executable, "-c", READ_ALL, str(torn)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"crashed ({done.returncode}): {done.stderr[-2000:]}"
    assert done.stdout.startswith(("typed", "opened"))


def test_a_backup_taken_while_a_crawl_writes_is_a_valid_store(tmp_path: Path) -> None:
    path = tmp_path / "live.lmdb"
    _filled(path, 50)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: pushes for as long as it lives
        try:
            with Store.open(path, durability="nosync") as store:
                f = store.frontier()
                for i in range(10**6):
                    f.push(Seed.get(f"https://example.com/live/{i}"))
                    if i == 100:
                        os.write(write_fd, b"x")  # writing is under way
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        assert os.read(read_fd, 1) == b"x"
        with Store.open(path, readonly=True) as store:
            store.backup(tmp_path / "backup.lmdb")  # while the writer goes on
            with pytest.raises(StoreError, match="exists"):
                store.backup(tmp_path / "backup.lmdb")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_fd)
    assert verify(tmp_path / "backup.lmdb") == []
    with Store.open(tmp_path / "backup.lmdb") as copy:
        assert len(copy.frontier()) >= 150


@pytest.mark.parametrize("compact", [True, False])
def test_a_backup_holds_every_view(tmp_path: Path, compact: bool) -> None:
    # Thousands of seen fingerprints make the exact seen set a sub-database of its dupfixed
    # table: LMDB's own compacting copy dies of SIGSEGV on that, so this ran in a child first.
    path, copy = tmp_path / "s.lmdb", tmp_path / "copy.lmdb"
    urls = [f"https://example.com/b/{i}" for i in range(3000)]
    with Store.open(path) as store:
        seen, bloom = store.seen(), store.seen(bloom=(10_000, 0.01))
        frontier = store.frontier().dedup_with(seen)
        frontier.push_many([Seed.get(u) for u in urls])
        for u in urls[::3]:
            bloom.insert(Seed.get(u).fingerprint)
        popped = pop_seeds(frontier, 10)
        store.validators().put(popped[0].fingerprint, Validator(etag='"x"'))
        stats = frontier.stats()
        done = subprocess.run(
            [sys.executable, "-c", BACKUP, str(path), str(copy), str(compact)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, f"crashed ({done.returncode}): {done.stderr[-2000:]}"
    assert verify(copy) == []
    with Store.open(copy) as restored:
        assert restored.frontier().stats() == stats
        assert set(restored.seen()) == {Seed.get(u).fingerprint for u in urls}
        bloom = restored.seen(bloom=(10_000, 0.01))
        assert all(Seed.get(u).fingerprint in bloom for u in urls[::3])
        assert restored.validators().get(popped[0].fingerprint) == Validator(etag='"x"')
    if compact:
        assert copy.stat().st_size < path.stat().st_size


BACKUP = """
import sys
from crawlstore import Store
with Store.open(sys.argv[1], readonly=True) as store:
    store.backup(sys.argv[2], compact=sys.argv[3] == "True")
"""


def test_stale_reader_slots_and_a_writer_killed_mid_transaction(tmp_path: Path) -> None:
    path = tmp_path / "s.lmdb"
    _filled(path, 10)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # holds a read snapshot and the writer lock, then is killed
        store = Store.open(path)
        reader = store._storage.engine.env.begin()  # noqa: F841 - a reader slot left behind
        with store.transaction():
            store.frontier().push(Seed.get("https://example.com/never-committed"))
            os.write(write_fd, b"x")
            time.sleep(60)
        os._exit(0)
    os.close(write_fd)
    assert os.read(read_fd, 1) == b"x"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    with Store.open(path) as store:  # no repair, no wait on the dead writer's lock
        assert str(pid) not in store._storage.engine.env.readers()  # the stale slot was cleared
        f = store.frontier()
        assert len(f) == 10
        f.push(Seed.get("https://example.com/after"))
        assert len(f) == 11 and verify(path) == []


def test_huge_values_are_stored_whole(tmp_path: Path) -> None:
    body = os.urandom(10 * 2**20)
    url = "https://example.com/" + "a" * 100_000
    with Store.open(tmp_path / "s.lmdb", durability="nosync") as store:
        f = store.frontier().dedup_with(store.seen())
        assert f.push(Seed("POST", "https://example.com/upload").with_body(body))
        assert f.push(Seed.get(url))
        got = sorted(pop_seeds(f, 2), key=lambda s: s.method)
        assert got[0].url == url and got[1].body == body


def test_only_typed_errors_from_a_closed_store(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.lmdb", durability="nosync")
    f = store.frontier()
    store.close()
    for call in (f.pop, lambda: f.push(Seed.get("https://e.com/")), f.stats, f.snapshot):
        with pytest.raises(CrawlstoreError):
            call()


def test_a_read_only_file_system(tiny_disk: Path) -> None:
    path = tiny_disk / "s.lmdb"
    with Store.open(path) as store:
        store.frontier().push(Seed.get("https://example.com/"))
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    with pytest.raises(ReadOnlyStore, match="read-only file system"):
        Store.open(path)
    with pytest.raises(ReadOnlyStore, match="read-only file system"):
        Store.open(tiny_disk / "new.lmdb")
    with Store.open(path, readonly=True) as store:  # inspecting still works
        assert len(store.frontier()) == 1
    stats = subprocess.run([sys.executable, "-m", "crawlstore", "stats", str(path), "--json"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert stats.returncode == 0, stats.stderr  # and so does the command line
    assert '"queued": 1' in stats.stdout


PERMISSIONS = """
import sys
from crawlstore import Store
from crawlstore.errors import ReadOnlyStore, StoreError
kind = sys.argv[2]
try:
    Store.open(sys.argv[1])
except ReadOnlyStore as exc:
    print("ReadOnlyStore", exc)
except StoreError as exc:
    print("StoreError", exc)
if kind == "file":
    with Store.open(sys.argv[1], readonly=True) as store:
        print("readonly", len(store.frontier()))
"""


@pytest.mark.parametrize("kind", ["file", "directory"])
def test_permission_errors_are_clear(tmp_path: Path, kind: str) -> None:
    import shutil

    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to run without root's permission override")
    path = tmp_path / "store" / "s.lmdb"
    path.parent.mkdir()
    if kind == "file":
        with Store.open(path) as store:
            store.frontier().push(Seed.get("https://example.com/"))
        path.chmod(0o400)
    else:
        path.parent.chmod(0o500)  # a new store's files cannot be created here
    done = subprocess.run(
        ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", sys.executable, "-c",
         PERMISSIONS, str(path), kind],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    path.parent.chmod(0o700)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith("ReadOnlyStore") and "no permission" in first
    if kind == "file":
        assert "readonly 1" in done.stdout  # inspecting needs read access only


# -- read-only directories and lock files: readonly=True still reads -------------------------

UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", sys.executable]

INSPECT = """
import sys
from crawlstore import Seed, Store
from crawlstore.errors import ReadOnlyStore, StoreError
path = sys.argv[1]
for readonly in (False, True):
    try:
        with Store.open(path, readonly=readonly) as store:
            f = store.frontier()
            print("opened", readonly, len(f), f.stats().admitted, store._storage.engine.lockless)
            try:
                f.push(Seed.get("https://example.com/x"))
            except ReadOnlyStore:
                print("write refused")
    except StoreError as exc:
        print(type(exc).__name__, readonly, exc)
"""


def _unprivileged(code: str, *args: str) -> list[str]:
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to run without root's permission override")
    done = subprocess.run([*UNPRIVILEGED, "-c", code, *args], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("lock", ["read-only lock file", "no lock file"])
def test_readonly_opens_a_store_in_a_read_only_directory(tmp_path: Path, lock: str) -> None:
    path = tmp_path / "ro" / "s.lmdb"
    path.parent.mkdir()
    with Store.open(path) as store:
        store.frontier().push(Seed.get("https://example.com/"))
    lock_file = Path(f"{path}-lock")
    if lock == "no lock file":
        lock_file.unlink()
    else:
        lock_file.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        out = _unprivileged(INSPECT, str(path))
    finally:
        path.parent.chmod(0o755)
    assert out[0].startswith("ReadOnlyStore False") and "readonly=True" in out[0]
    assert "lock file" in out[0]  # it names what cannot be written
    assert out[1:] == ["opened True 1 1 True", "write refused"]
    assert lock_file.exists() == (lock != "no lock file")  # nothing was created


def test_creating_a_store_in_a_read_only_directory_names_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "ro"
    directory.mkdir()
    directory.chmod(0o555)
    try:
        out = _unprivileged(INSPECT, str(directory / "new.lmdb"))
    finally:
        directory.chmod(0o755)
    assert out[0].startswith("ReadOnlyStore False")
    assert f"its directory {directory} cannot be written" in out[0]
    assert "readonly=True" not in out[0]
    assert out[1].startswith("StoreError True") and "does not exist" in out[1]


HOLD = """
import sys, time
from crawlstore import Store
with Store.open(sys.argv[1]) as store:
    print("open", flush=True)
    sys.stdin.read()
"""


def test_a_lockless_reader_refuses_a_store_another_process_has_open(tmp_path: Path) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path) as store:
        store.frontier().push(Seed.get("https://example.com/"))
    Path(f"{path}-lock").chmod(0o444)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        out = _unprivileged(INSPECT, str(path))
    finally:
        holder.communicate("", timeout=30)
    assert out[1].startswith("ReadOnlyStore True")
    assert f"process {holder.pid} has the store open" in out[1]
    assert _unprivileged(INSPECT, str(path))[1:] == ["opened True 1 1 True", "write refused"]


OVERTAKEN = """
import sys
from crawlstore import Store
from crawlstore.errors import StoreError
with Store.open(sys.argv[1], readonly=True) as store:
    engine = store._storage.engine
    assert engine.lockless
    def slow_read(txn):
        print("reading", flush=True)
        sys.stdin.readline()  # the writer commits twice meanwhile
        return txn.id()
    try:
        engine.read_committed(slow_read)
    except StoreError as exc:
        print("refused", exc)
    print("then", len(store.frontier()))
"""


def test_a_lockless_read_that_a_writer_overtakes_is_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "s.lmdb"
    with Store.open(path) as store:
        store.frontier().push(Seed.get("https://example.com/"))
    Path(f"{path}-lock").chmod(0o444)
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is needed to run without root's permission override")
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    reader = subprocess.Popen([*UNPRIVILEGED, "-c", OVERTAKEN, str(path)], text=True, **pipes)
    assert reader.stdin is not None and reader.stdout is not None
    assert reader.stdout.readline() == "reading\n"  # opened without a lock, nobody writing
    with Store.open(path) as store:  # now a writer (root may write the lock file)
        for attempt in range(3):
            if attempt:
                assert reader.stdout.readline() == "reading\n"
            for i in range(2):
                store.frontier().push(Seed.get(f"https://example.com/{attempt}/{i}"))
            reader.stdin.write("go\n")
            reader.stdin.flush()
        out, err = reader.communicate(timeout=30)
    assert reader.returncode == 0, err
    assert out.startswith("refused") and "being written" in out
    assert out.splitlines()[-1] == "then 7"
