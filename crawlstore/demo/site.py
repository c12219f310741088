"""A generated web site on loopback addresses, for the demo and the crawler's tests.

Each of a few hosts (127.0.0.2, 127.0.0.3, ...; 127.0.0.1 on separate ports where only that
one exists) serves a share of a few hundred HTML pages that link to each other across hosts,
with ETag and Last-Modified on most of them (answered with 304 when unchanged), and:

- ``/robots.txt`` disallowing ``/private/``, which pages link to;
- ``/flaky`` (503 on its first request, then 200), ``/busy`` (429 with ``Retry-After: 1`` on its
  first request, then 200) and ``/slow`` (answers after ``slow`` seconds);
- ``/old/N``, a 301 to page N (pages are ``/SECTION/N``, ``SECTIONS`` taking turns), and
  ``/away``, a 302 to another site;
- ``/calendar/YYYY-MM``, an endless calendar: each month links to the next and the previous.
"""

from __future__ import annotations

import errno
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

__all__ = ["SECTIONS", "DemoSite"]

#: The sections pages are in: each is its own URL prefix for trap budgets.
SECTIONS = ("docs", "blog", "news", "shop", "help", "wiki", "about", "guide", "faq", "api")

_EPOCH = 1_767_225_600  # 2026-01-01: the pages' first Last-Modified


@dataclass
class _Page:
    links: list[str]
    version: int = 1
    validators: bool = True


class DemoSite:
    """The site, served while the ``with`` block runs. ``hits`` counts requests by
    ``(host, path, status)``, ``log`` lists them with their time; ``wait_for`` waits for them;
    ``change(path)`` makes a page new (another ETag and body)."""

    def __init__(self, *, pages: int = 300, hosts: int = 4, seed: int = 1, slow: float = 1.0):
        if pages < 10 or hosts < 1:
            raise ValueError("a demo site has at least 10 pages and one host")
        self.size, self.slow = pages, slow
        self.lock = threading.Condition()  # guards hits and log; notified at each request
        self.hits: Counter[tuple[str, str, int]] = Counter()
        self.log: list[tuple[float, str, str, int]] = []  # (time, host, path, status)
        self._hosts = hosts
        self._servers: list[ThreadingHTTPServer] = []
        self.origins: list[str] = []
        rng = random.Random(seed)
        self.pages: dict[str, _Page] = {}
        for n in range(pages):
            links = [self.page_path(m) for m in (2 * n + 1, 2 * n + 2) if m < pages]  # a tree
            links += [self.page_path(rng.randrange(pages)) for _ in range(4)]
            if n % 25 == 0:
                links += [f"/private/{n}", f"/old/{rng.randrange(pages)}", "/calendar/2026-01"]
            if n == 1:
                links += ["/flaky", "/busy", "/slow", "/away"]
            self.pages[self.page_path(n)] = _Page(links, validators=n % 10 != 9)
        for path in ("/flaky", "/busy", "/slow"):
            self.pages[path] = _Page([self.page_path(0)])

    # -- the site -------------------------------------------------------------------------------

    @staticmethod
    def page_path(n: int) -> str:
        """Page ``n``: seven pages a section, sections taking turns (``/docs/0``...)."""
        return f"/{SECTIONS[(n // 7) % len(SECTIONS)]}/{n}"

    def host_of(self, path: str) -> int:
        """Which host serves ``path`` (pages are spread over the hosts; the rest is on 0)."""
        section, _, n = path.strip("/").partition("/")
        if section in SECTIONS and n.isdigit():
            return int(n) % self._hosts
        return {"/busy": 1, "/slow": 2}.get(path, 0) % self._hosts

    def url(self, path: str) -> str:
        return self.origins[self.host_of(path)] + path

    def expected(self) -> set[str]:
        """The URLs a complete crawl visits: every page, the special ones, the redirects."""
        urls = {self.url(path) for path in self.pages}
        for page in self.pages.values():
            urls.update(
                self.url(link) for link in page.links if link.startswith(("/old/", "/away"))
            )
        return urls

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` is true, at most ``timeout`` seconds; whether it is. It is
        called now and after each request is logged, with the lock held."""
        with self.lock:
            return self.lock.wait_for(predicate, timeout)

    def change(self, path: str) -> None:
        with self.lock:
            self.pages[path].version += 1

    def count(self, *, path_prefix: str = "", status: int | None = None) -> int:
        with self.lock:
            return sum(n for (_, p, s), n in self.hits.items()
                       if p.startswith(path_prefix) and status in (None, s))  # fmt: skip

    # -- answers --------------------------------------------------------------------------------

    def answer(
        self, host: str, path: str, headers: Callable[[str], str | None]
    ) -> tuple[int, dict[str, str], bytes]:
        """The status, headers and body for a GET of ``path``."""
        if path == "/robots.txt":
            return 200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /private/\n"
        if path.startswith("/old/"):
            return 301, {"Location": self.url(self.page_path(int(path[5:])))}, b""
        if path == "/away":
            return 302, {"Location": "http://offsite.invalid/"}, b""
        if path.startswith("/calendar/"):
            return self._calendar(path)
        with self.lock:
            page = self.pages.get(path)
            first = self.hits[(host, path, 503)] + self.hits[(host, path, 429)] == 0
        if page is None:
            return 404, {"Content-Type": "text/plain"}, b"not found"
        if path == "/flaky" and first:
            return 503, {}, b"try again"
        if path == "/busy" and first:
            return 429, {"Retry-After": "1"}, b"slow down"
        if path == "/slow":
            time.sleep(self.slow)
        return self._page(path, page, headers)

    def _page(
        self, path: str, page: _Page, headers: Callable[[str], str | None]
    ) -> tuple[int, dict[str, str], bytes]:
        out = {"Content-Type": "text/html; charset=utf-8"}
        if page.validators:
            etag = f'"{path.strip("/").replace("/", "-")}-v{page.version}"'
            modified = formatdate(_EPOCH + page.version * 86400, usegmt=True)
            out |= {"ETag": etag, "Last-Modified": modified}
            match, since = headers("If-None-Match"), headers("If-Modified-Since")
            if match == etag or (match is None and _not_after(since, modified)):
                return 304, out, b""
        anchors = "".join(f'<li><a href="{self._href(path, link)}">{link}</a></li>'
                          for link in page.links)  # fmt: skip
        body = (f"<!doctype html><title>{path}</title><h1>{path} (version {page.version})</h1>"
                f"<ul>{anchors}</ul>")  # fmt: skip
        return 200, out, body.encode()

    def _href(self, here: str, link: str) -> str:
        """Links to the same host are relative; to another host absolute."""
        same = self.host_of(link) == self.host_of(here) and not link.startswith("/old/")
        return link if same else self.url(link)

    def _calendar(self, path: str) -> tuple[int, dict[str, str], bytes]:
        try:
            year, month = map(int, path[len("/calendar/") :].split("-"))
        except ValueError:
            return 404, {}, b"not found"
        months = [
            (year + (month == 12), month % 12 + 1),
            (year - (month == 1), (month - 2) % 12 + 1),
        ]
        links = "".join(f'<a href="/calendar/{y:04d}-{m:02d}">{y}-{m:02d}</a> ' for y, m in months)
        return 200, {"Content-Type": "text/html"}, f"<h1>{year}-{month:02d}</h1>{links}".encode()

    # -- serving --------------------------------------------------------------------------------

    def __enter__(self) -> DemoSite:
        for _ in range(20):  # one port on every address; another try when it is taken
            try:
                self._bind()
                break
            except OSError as exc:
                self._close()
                if exc.errno != errno.EADDRINUSE:
                    raise
        else:
            raise OSError("no free port on the loopback addresses")
        for server in self._servers:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def _bind(self) -> None:
        handler = self._handler()
        addresses = [f"127.0.0.{i + 2}" for i in range(self._hosts)]
        try:
            first = _Server((addresses[0], 0), handler)
        except OSError as exc:
            if exc.errno != errno.EADDRNOTAVAIL:
                raise
            addresses = ["127.0.0.1"] * self._hosts  # one address: a port each
            first = _Server((addresses[0], 0), handler)
        self._servers.append(first)
        port = first.server_address[1]
        for address in addresses[1:]:
            shared = address != addresses[0]
            self._servers.append(_Server((address, port if shared else 0), handler))
        self.origins = [_origin(server) for server in self._servers]

    def _close(self) -> None:
        for server in self._servers:  # bound, not yet serving
            server.server_close()
        self._servers.clear()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:  # fmt: skip
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body in two writes: no 40 ms stall

            def do_GET(self) -> None:
                assert isinstance(self.server, ThreadingHTTPServer)
                host = _origin(self.server).removeprefix("http://")
                status, headers, body = site.answer(host, self.path, self.headers.get)
                with site.lock:
                    site.hits[(host, self.path, status)] += 1
                    site.log.append((time.time(), host, self.path, status))
                    site.lock.notify_all()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog is 5: a crawler opening more connections to one
    # host at once would see SYNs dropped and retried a second later
    request_queue_size = 128

    def handle_error(self, request: object, client_address: object) -> None:
        """A crawler killed mid-request (the demo's SIGKILL) is no error of the site."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


def _origin(server: ThreadingHTTPServer) -> str:
    address, port = server.server_address[:2]
    return f"http://{address if isinstance(address, str) else address.decode()}:{port}"


def _not_after(since: str | None, modified: str) -> bool:
    """Whether ``If-Modified-Since: since`` covers a page last modified at ``modified``."""
    if since is None:
        return False
    try:
        return parsedate_to_datetime(modified) <= parsedate_to_datetime(since)
    except (TypeError, ValueError):
        return False
