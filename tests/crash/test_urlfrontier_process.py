"""The URL Frontier service as a process: SIGKILL mid-ingestion loses nothing acknowledged,
SIGTERM stops it cleanly, the CLI reads a served store, several clients at once, and calls
the client cancels after the first ack."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from cli_helpers import COMMAND, export
from helpers import env_without
from urlfrontier_helpers import OK, discovered, known

from crawlstore import Store
from crawlstore.urlfrontier import urlfrontier_pb2 as pb
from crawlstore.urlfrontier import urlfrontier_pb2_grpc as pb_grpc


class Served:
    """``crawlstore serve`` in a child process, and a stub on it."""

    def __init__(self, path: Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [*COMMAND, "serve", "--store", str(path), "--port", "0", "--log-level", "WARNING",
             *extra], stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith("serving"), line
        self.port = int(line.split()[-1])
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        self.stub = pb_grpc.URLFrontierStub(self.channel)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.channel.close()
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=30)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "served.lmdb"


def test_sigkill_mid_ingestion_loses_nothing_acknowledged(path: Path) -> None:
    acked: set[str] = set()
    for run in range(3):
        served = Served(path)
        stop = threading.Event()

        def items(run: int = run, stop: threading.Event = stop) -> Iterator[pb.URLItem]:
            for i in range(100_000):
                if stop.is_set():
                    return
                yield discovered(f"http://h{i % 97}.com/{run}/{i}", id=f"{run}/{i}")

        def ingest(served: Served = served, items: Any = items) -> None:
            try:
                for ack in served.stub.PutURLs(items()):
                    if ack.status == OK:
                        acked.add(ack.ID)
            except grpc.RpcError:
                pass  # the server was killed

        reader = threading.Thread(target=ingest)
        reader.start()
        deadline = time.monotonic() + 20
        while len(acked) < (run + 1) * 1500 and time.monotonic() < deadline:
            time.sleep(0.01)
        served.process.send_signal(signal.SIGKILL)
        served.process.wait(timeout=30)
        stop.set()
        reader.join(timeout=30)
        served.channel.close()
    assert len(acked) >= 3000
    with Store.open(path, readonly=True) as store:
        view = store.frontier(crawl="default")
        for ack_id in acked:
            run, i = ack_id.split("/")
            assert view.url(f"http://h{int(i) % 97}.com/{run}/{i}").state == "queued", ack_id


def test_sigterm_stops_cleanly_and_the_cli_reads_a_served_store(path: Path) -> None:
    served = Served(path)
    assert len(list(served.stub.PutURLs(iter([discovered(f"http://a.com/{i}")
                                              for i in range(20)])))) == 20  # fmt: skip
    acks = list(served.stub.PutURLs(iter([known("http://a.com/0", 0)])))
    assert [a.status for a in acks] == [OK]
    stats = subprocess.run([*COMMAND, "stats", str(path), "--json"], capture_output=True,
                           text=True, check=True)  # fmt: skip
    assert json.loads(stats.stdout)["crawls"]["default"]["stats"]["queued"] == 19
    verify = subprocess.run([*COMMAND, "verify", str(path)], capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "http://a.com/19" in export(path)
    stream = served.stub.PutURLs(iter([discovered("http://b.com/")] * 3))
    assert len(list(stream)) == 3
    assert served.stop() == 0
    with Store.open(path) as store:
        assert store.frontier(crawl="default").count() == 21


def test_concurrent_clients_never_share_a_url(path: Path) -> None:
    served = Served(path, "--default-delay", "0")
    urls = [f"http://h{i % 20}.com/{i}" for i in range(2000)]
    handed: list[str] = []
    lock = threading.Lock()

    def put(part: list[str]) -> None:
        stub = pb_grpc.URLFrontierStub(grpc.insecure_channel(f"127.0.0.1:{served.port}"))
        assert {a.status for a in stub.PutURLs(discovered(u) for u in part)} == {OK}

    def get() -> None:
        stub = pb_grpc.URLFrontierStub(grpc.insecure_channel(f"127.0.0.1:{served.port}"))
        for _ in range(100):
            got = [i.url for i in stub.GetURLs(pb.GetParams(max_urls_per_queue=5, max_queues=5,
                                                            delay_requestable=600))]  # fmt: skip
            with lock:
                handed.extend(got)

    putters = [threading.Thread(target=put, args=(urls[i::4],)) for i in range(4)]
    getters = [threading.Thread(target=get) for _ in range(4)]
    for t in putters + getters:
        t.start()
    for t in putters + getters:
        t.join(timeout=120)
    assert len(handed) == len(set(handed)) > 0
    stats = served.stub.GetStats(pb.QueueWithinCrawlParams())
    assert (stats.size, stats.inProcess) == (2000, len(handed))
    assert served.stop() == 0


def test_calls_cancelled_after_the_first_ack(path: Path) -> None:
    """scrapy-url-frontier opens a PutURLs call a URL and cancels it after the first ack."""
    served = Served(path, "--log-level", "ERROR")
    for i in range(50):
        call = served.stub.PutURLs(iter([discovered(f"http://a.com/{i}")]))
        assert next(call).status == OK
        call.cancel()
    endless = served.stub.GetURLs(pb.GetParams(max_urls_per_queue=0))
    endless.cancel()
    assert served.stub.GetStats(pb.QueueWithinCrawlParams()).size == 50
    assert served.stop() == 0


def test_two_processes_share_one_store(path: Path) -> None:
    first = Served(path, "--default-delay", "0")
    second = Served(path)
    assert len(list(first.stub.PutURLs(iter([discovered(f"http://h{i}.com/")
                                             for i in range(10)])))) == 10  # fmt: skip
    got = [i.url for i in second.stub.GetURLs(pb.GetParams(max_urls_per_queue=1))]
    assert len(got) == 10
    assert first.stub.GetStats(pb.QueueWithinCrawlParams()).inProcess == 10
    assert first.stop() == 0 and second.stop() == 0


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_reuse_port_serves_one_port_from_two_processes(path: Path) -> None:
    first = Served(path, "--reuse-port", "--default-delay", "0")
    second = subprocess.Popen([*COMMAND, "serve", "--store", str(path), "--port",
                               str(first.port), "--reuse-port"], stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    assert second.stdout is not None and second.stdout.readline().startswith("serving")
    for i in range(5):
        channel = grpc.insecure_channel(
            f"127.0.0.1:{first.port}", options=[("grpc.use_local_subchannel_pool", 1)]
        )
        stub = pb_grpc.URLFrontierStub(channel)
        assert [a.status for a in stub.PutURLs(iter([discovered(f"http://a.com/{i}")]))] == [OK]
        channel.close()
    assert first.stub.GetStats(pb.QueueWithinCrawlParams()).size == 5
    second.send_signal(signal.SIGTERM)
    assert second.wait(timeout=30) == 0 and first.stop() == 0


def test_leases_are_the_clients_and_outlive_the_server_process(path: Path) -> None:
    served = Served(path, "--default-delay", "0")
    assert len(list(served.stub.PutURLs(iter([discovered(f"http://h{i}.com/")
                                              for i in range(5)])))) == 5  # fmt: skip
    assert len(list(served.stub.GetURLs(pb.GetParams(delay_requestable=600)))) == 5
    assert served.stop(signal.SIGKILL) == -signal.SIGKILL
    again = Served(path)
    assert list(again.stub.GetURLs(pb.GetParams(delay_requestable=600))) == []
    assert again.stub.GetStats(pb.QueueWithinCrawlParams()).inProcess == 5
    assert again.stop() == 0


def test_without_the_urlfrontier_extra_serve_says_which_to_install(tmp_path: Path) -> None:
    env = env_without(tmp_path, "grpc")
    done = subprocess.run([sys.executable, "-m", "crawlstore", "serve", "--store",
                           str(tmp_path / "s")], capture_output=True, text=True, env=env,
                          timeout=60)  # fmt: skip
    assert done.returncode == 2
    assert "pip install -e '.[urlfrontier]'" in done.stderr
    assert not (tmp_path / "s").exists()
