"""Another server design for the ``urlfrontier`` workload: the URL Frontier service on
``grpc.aio``, measured beside ``crawlstore serve`` (grpcio's synchronous server) with the same
client. ``PutURLs`` and ``GetURLs`` run on an event loop: ``PutURLs`` hands each item to the
service's own per-item path (``streams.put_url``: one write through the group commit, an ack
once the commit that holds its URL returned), ``GetURLs`` pops through the same group commit;
every other call is the service's own, on a thread pool.
``python -m benchmarks.aio_server --store PATH --port 0``."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections import deque
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

from crawlstore import Store
from crawlstore.urlfrontier import urlfrontier_pb2 as pb
from crawlstore.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from crawlstore.urlfrontier.convert import info_of, store_crawl
from crawlstore.urlfrontier.service import FrontierService
from crawlstore.urlfrontier.streams import put_url


class AioService(FrontierService):
    async def PutURLs(self, request_iterator: AsyncIterator[pb.URLItem],  # type: ignore[override]
                      context: Any) -> AsyncIterator[pb.AckMessage]:  # fmt: skip
        loop = asyncio.get_running_loop()
        ready: deque[pb.AckMessage] = deque()
        wake, room = asyncio.Event(), asyncio.Event()
        room.set()
        counts = {"read": 0, "sent": 0, "ended": 0}

        def arrived(message: pb.AckMessage) -> None:
            ready.append(message)
            wake.set()

        def answer(message: pb.AckMessage) -> None:  # on the loop, or on the writer's thread
            loop.call_soon_threadsafe(arrived, message)

        async def read() -> None:
            try:
                async for item in request_iterator:
                    counts["read"] += 1
                    put_url(self, item, answer)
                    if counts["read"] - counts["sent"] >= self.window:
                        room.clear()
                        await room.wait()
            finally:
                counts["ended"] = 1
                wake.set()

        reader = asyncio.create_task(read())
        try:
            while not (counts["ended"] and counts["sent"] == counts["read"]):
                if not ready:
                    wake.clear()
                    await wake.wait()
                    continue
                counts["sent"] += 1
                room.set()
                yield ready.popleft()
        finally:
            reader.cancel()

    async def GetURLs(self, request: pb.GetParams,  # type: ignore[override]
                      context: Any) -> AsyncIterator[pb.URLInfo]:  # fmt: skip
        loop = asyncio.get_running_loop()
        popped: asyncio.Future[Any] = loop.create_future()

        def done(result: Any, error: BaseException | None) -> None:
            if error is None:
                loop.call_soon_threadsafe(popped.set_result, result)
            else:
                loop.call_soon_threadsafe(popped.set_exception, error)

        names = [store_crawl(request.crawlID)] if request.WhichOneof("item") == "crawlID" else None
        self.committer.submit(lambda: self._pop(names, request), done)
        for ready, crawl_id in await popped:
            yield info_of(ready.seed, crawl_id)


async def _serve(path: str, port: int) -> None:
    store = Store.open(path)
    service = AioService(store)
    server = grpc.aio.server(ThreadPoolExecutor(max_workers=64))
    pb_grpc.add_URLFrontierServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"serving the URL Frontier API on port {port}", flush=True)
    await stop.wait()
    await server.stop(5)
    service.close()
    store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(_serve(args.store, args.port))
