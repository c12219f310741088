"""Redis servers for the tests: a standalone node and a cluster of 3 masters and 3 replicas,
started in a temporary directory on free loopback ports and stopped at the end.

Debian's ``redis-tools`` ships the server binary as ``redis-check-rdb``: it runs as a server
when started under the name ``redis-server``, so a symlink of that name is made in the run
directory (nothing system-wide is started).
"""

from __future__ import annotations

import atexit
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["Cluster", "Node", "have_server", "server_binary", "shared_node"]


def have_server() -> bool:
    """Whether this machine has a redis-server (or Debian's binary that runs as one)."""
    return bool(shutil.which("redis-server") or shutil.which("redis-check-rdb"))


def server_binary(run_dir: Path) -> str | None:
    """A ``redis-server`` to run, or None when this machine has none."""
    found = shutil.which("redis-server")
    if found:
        return found
    rdb = shutil.which("redis-check-rdb")
    if rdb is None:
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    link = run_dir / "redis-server"
    if not link.exists():
        link.symlink_to(rdb)
    return str(link)


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

    def kill(self) -> None:
        """SIGKILL the server."""
        if self.process is not None and self.process.poll() is None:
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
    """Three masters and three replicas (``cluster-node-timeout`` ``timeout_ms``)."""

    def __init__(self, binary: str, directory: Path, *, timeout_ms: int = 2000) -> None:
        ports = free_ports(6)
        options = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                   "--cluster-node-timeout", str(timeout_ms), "--appendonly", "yes")  # fmt: skip
        self.nodes: list[Node] = []
        try:  # a cluster that does not come up leaves no server running
            for port in ports:
                self.nodes.append(Node(binary, directory / str(port), port, *options))
            cli = shutil.which("redis-cli")
            if cli is None:
                raise RuntimeError("redis-cli is needed to create a cluster")
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

    def wait_ok(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                states = [n.client().cluster("info")["cluster_state"] for n in self.nodes
                          if n.process is not None and n.process.poll() is None]  # fmt: skip
            except Exception:
                states = ["down"]
            if all(s == "ok" for s in states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster did not come up: {states}")
            time.sleep(0.1)

    def masters(self) -> list[Node]:
        out = []
        for node in self.nodes:
            if node.process is None or node.process.poll() is not None:
                continue
            try:
                if node.client().info("replication")["role"] == "master":
                    out.append(node)
            except Exception:
                continue
        return out

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


_shared: list[Node] = []


def shared_node() -> Node | None:
    """This process's standalone node, started at the first call (None without a
    redis-server); stopped, with its directory removed, when the process ends."""
    if not _shared:
        run = Path(tempfile.mkdtemp(prefix="crawlstore-redis-"))
        binary = server_binary(run)
        if binary is None:
            shutil.rmtree(run, ignore_errors=True)
            return None
        node = Node(binary, run / "standalone", free_ports(1)[0])
        _shared.append(node)

        def stop() -> None:
            node.stop()
            shutil.rmtree(run, ignore_errors=True)

        atexit.register(stop)
    return _shared[0]
