"""The dashboard's HTTP server (the standard library's): the page, its script and style, the
panels as JSON (``/api/...``) and ``/metrics`` in the Prometheus text format. It holds a store
opened read-only; each request reads in short read transactions of its own."""

from __future__ import annotations

import html
import json
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import CorruptStore, StoreError
from ..store import Store
from .panels import Panels, UnknownCrawl

__all__ = ["Dashboard"]

_FILES = {"/static/dashboard.js": "application/javascript; charset=utf-8",
          "/static/dashboard.css": "text/css; charset=utf-8"}  # fmt: skip


def _asset(name: str) -> bytes:
    return resources.files(__package__).joinpath(name).read_bytes()


class Dashboard:
    """A dashboard of the store at ``target`` (a file or a Redis URL), opened read-only, on
    ``host:port`` (port 0: a free one; ``url`` says which). ``crawl``: the crawl shown first
    (by default the store's first). ``serve_forever`` or ``start`` (a thread); ``close``."""

    def __init__(self, target: str, *, host: str = "127.0.0.1", port: int = 0,
                 crawl: str | None = None) -> None:  # fmt: skip
        self.store = Store.open(target, readonly=True)
        try:
            self.panels = Panels(self.store)
            crawls = self.store.crawls()
            if crawl is not None and crawl not in crawls:
                raise UnknownCrawl(f"{self.store.location} holds no crawl {crawl!r}")
            self.crawl = crawl or (crawls[0] if crawls else "default")
            self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        except BaseException:
            self.store.close()
            raise
        self.httpd.daemon_threads = True
        self.host, self.port = host, self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> Dashboard:
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
        self.httpd.server_close()
        self.store.close()

    def __enter__(self) -> Dashboard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- answers --------------------------------------------------------------------------------

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, str, bytes]:
        """(status, content type, body) for a GET of ``path``."""
        crawl = query.get("crawl") or self.crawl
        try:
            if path == "/":
                return 200, "text/html; charset=utf-8", self.page(crawl)
            if path in _FILES:
                return 200, _FILES[path], _asset(path.rsplit("/", 1)[1])
            if path == "/metrics":
                from .metrics import exposition

                return 200, "text/plain; version=0.0.4; charset=utf-8", exposition(self.panels)
            if path == "/api/crawls":
                return _json({"crawls": self.panels.crawls(), "shown": self.crawl})
            if path == "/api/summary":
                return _json(self.panels.summary(crawl))
            if path == "/api/queues":
                return _json(self.panels.queues(crawl))
            if path == "/api/recent":
                return _json(self.panels.recent(crawl))
            if path == "/api/url":
                return _json(self.panels.url(crawl, query.get("url", "")))
            return _json({"error": f"no such page: {path}"}, 404)
        except UnknownCrawl as exc:
            return _json({"error": str(exc)}, 404)
        except CorruptStore as exc:
            return _json({"error": f"{exc}: check the store with crawlstore verify "
                                   f"{self.store.location}"}, 500)  # fmt: skip
        except StoreError as exc:
            return _json({"error": str(exc)}, 503)
        except Exception as exc:  # a fault of this page: said, and the server goes on
            return _json({"error": f"{type(exc).__name__}: {exc}"}, 500)

    def page(self, crawl: str) -> bytes:
        """The page, with the crawl's name and the crawls to choose from (the panels fill in
        from the JSON endpoints)."""
        options = "".join(
            f'<option value="{html.escape(name)}"{" selected" if name == crawl else ""}>'
            f"{html.escape(name)}</option>"
            for name in self.panels.crawls() or [crawl]
        )
        values = {"CRAWL": html.escape(crawl), "OPTIONS": options,
                  "STORE": html.escape(self.store.location)}  # fmt: skip
        text = _asset("page.html").decode()  # (in one pass: no value is read as a placeholder)
        return re.sub(r"@(CRAWL|OPTIONS|STORE)@", lambda m: values[m.group(1)], text).encode()


def _json(value: Any, status: int = 200) -> tuple[int, str, bytes]:
    body = json.dumps(value, allow_nan=False, default=str).encode()
    return status, "application/json", body


def _handler(dashboard: Dashboard) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "crawlstore-dashboard"

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
            status, kind, body = dashboard.answer(parts.path, query)
            self.send_response(HTTPStatus(status))
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # (quiet: a refresh every 2 s)

    return Handler
