"""Running the service: a gRPC server on a store file, stopped cleanly on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any

import grpc

from ..clock import Clock
from ..frontier.policy import DEFAULTS
from ..store import Durability, Store
from . import urlfrontier_pb2_grpc as pb_grpc
from .metrics import Metrics
from .service import FrontierService

__all__ = ["Server", "serve"]

log = logging.getLogger("crawlstore.urlfrontier")


class Server:
    """The URL Frontier service on ``store_path``, listening on ``host:port`` (port 0: a free
    one, see ``port``). ``reuse_port``: several processes (one a core) may listen on one port
    and share the store; ``workers``: calls served at once (each open stream holds one)."""

    def __init__(
        self,
        store_path: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 7071,
        node: str | None = None,
        reuse_port: bool = False,
        workers: int = 64,
        durability: Durability | str = Durability.SAFE,
        default_delay: float | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        clock: Clock | None = None,
    ) -> None:
        self.store = Store.open(store_path, durability=durability, clock=clock)
        if default_delay is None and not self.store.crawls() and self.store.defaults() == DEFAULTS:
            default_delay = 1.0  # a new store: the reference's default politeness
        if default_delay is not None:
            self.store.set_defaults(delay=default_delay)
        registry = None
        self.metrics_server: Any = None
        if metrics_port is not None:
            from prometheus_client import CollectorRegistry, start_http_server

            registry = CollectorRegistry()
            self.metrics_server, _ = start_http_server(metrics_port, metrics_host,
                                                        registry=registry)  # fmt: skip
        self._grpc = grpc.server(
            ThreadPoolExecutor(max_workers=workers, thread_name_prefix="urlfrontier"),
            options=[("grpc.so_reuseport", int(reuse_port))],
            maximum_concurrent_rpcs=workers,
        )
        try:
            self.port = self._grpc.add_insecure_port(f"{host}:{port}")
        except RuntimeError:
            self.port = 0
        if self.port == 0:
            self.store.close()
            raise OSError(f"cannot listen on {host}:{port} (in use? --reuse-port shares it)")
        self.service = FrontierService(self.store, node=node or f"{host}:{self.port}",
                                       metrics=Metrics(registry))  # fmt: skip
        pb_grpc.add_URLFrontierServicer_to_server(self.service, self._grpc)  # type: ignore[no-untyped-call]
        self._stopped = threading.Event()

    def start(self) -> Server:
        self._grpc.start()
        log.info("URL Frontier service on port %d, store %s", self.port, self.store.location)
        return self

    def stop(self, grace: float = 5.0) -> None:
        """Refuse new calls, let open ones finish for ``grace`` seconds (then cancel them),
        write what was acknowledged, close the store."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.service.closing = True
        self._grpc.stop(grace).wait()
        self.service.close()
        self.store.close()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()

    def wait(self) -> None:
        self._grpc.wait_for_termination()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def serve(store_path: str | os.PathLike[str], **options: Any) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly (see ``Server``)."""
    server = Server(store_path, **options).start()
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    print(f"serving the URL Frontier API on port {server.port}", flush=True)
    stop.wait()
    server.stop()
