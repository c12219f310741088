"""A small web site on 127.0.0.1 for crawl tests: pages with ETag and Last-Modified that
answer conditional requests with 304, and that the test can change between passes."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: path -> (body, version); the body lists links as lines "link: /path".
Pages = dict[str, tuple[str, int]]


class Site:
    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.hits: Counter[tuple[str, int]] = Counter()  # (path, status)
        self.lock = threading.Lock()
        self.base = ""

    def change(self, path: str, body: str | None = None) -> None:
        with self.lock:
            old_body, version = self.pages[path]
            self.pages[path] = (body if body is not None else old_body, version + 1)

    def count(self, status: int) -> int:
        return sum(n for (_, s), n in self.hits.items() if s == status)

    def handler(self) -> Callable[..., BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with site.lock:
                    page = site.pages.get(self.path)
                if page is None:
                    return self._answer(404, b"", {})
                body, version = page
                etag = f'"{self.path}-v{version}"'
                modified = formatdate(1_700_000_000 + version * 86400, usegmt=True)
                headers = {"ETag": etag, "Last-Modified": modified}
                if self.headers.get("If-None-Match") == etag:
                    return self._answer(304, b"", headers)
                self._answer(200, body.encode(), headers)

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                with site.lock:
                    site.hits[(self.path, status)] += 1
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def links(body: str) -> list[str]:
    return [line[len("link: ") :] for line in body.splitlines() if line.startswith("link: ")]


@contextmanager
def serve(pages: Pages) -> Iterator[Site]:
    """Serve ``pages`` on a free port of 127.0.0.1 for the length of the block."""
    site = Site(pages)
    server = ThreadingHTTPServer(("127.0.0.1", 0), site.handler())
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
