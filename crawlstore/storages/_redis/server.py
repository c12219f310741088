"""The connection to a Redis server or a Redis Cluster: the address, the checks made on open,
the function library, and sending function calls that may go to several nodes in one round
trip per node (``send``), one commit's writes slot by slot among them.

Every key crawlstore writes carries a hash tag: the store's own ``{ns}``, a crawl's ``{ns:c}``
or one of a crawl's buckets ``{ns:c:b}``, so that each function call touches one slot.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from ...errors import InvalidArgument, StoreError, StoreFull
from ...extras import install_hint
from .keys import (
    FENCE,
)

try:
    import redis
    from redis.cluster import RedisCluster
    from redis.crc import key_slot
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is missing
    raise ModuleNotFoundError(
        f"a store on Redis needs redis-py: {install_hint('redis')}", name=exc.name
    ) from None

__all__ = ["Address", "Call", "Server", "key_slot"]

_T = TypeVar("_T")
#: A function call: the function's name, its keys (of one slot), its arguments.
Call = tuple[str, list[bytes], list[Any]]
SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")
_NS = re.compile(r"[A-Za-z0-9_.-]{1,64}")
#: The function library crawlstore loads, and the version its calls need.
_SOURCE = resources.files(__package__).joinpath("library.lua").read_text()
#: The library's major version (its calls' contract), its minor version (functions or writes
#: added, the others unchanged: 1, ``cs_commit_v``; 3, the write ``T``) and a digest of its
#: text. A node holding a newer major version refuses this crawlstore; one holding a newer
#: minor version of the same major keeps it (it has every function and write this one
#: sends); one holding any other text gets this one.
LIBRARY_MAJOR = 2
LIBRARY_MINOR = 3
LIBRARY_VERSION = (
    f"{LIBRARY_MAJOR}.{LIBRARY_MINOR}.{hashlib.sha1(_SOURCE.encode()).hexdigest()[:12]}".encode()
)
LIBRARY = _SOURCE.replace("@VERSION@", LIBRARY_VERSION.decode())


@dataclass(frozen=True, slots=True)
class Address:
    """Where the store lives: ``redis://host:port/db?ns=name`` (one server) or
    ``redis+cluster://host:port/?ns=name`` (any node of a cluster)."""

    url: str
    cluster: bool
    ns: str
    #: Each commit waits until a replica has it (``WAIT``), and the server must fsync every
    #: write (``appendfsync always``).
    strict: bool
    #: Seconds a store lock lasts when its holder dies with it.
    lock_ttl: float
    #: Buckets of each crawl, fixed when the store is created.
    buckets: int
    #: A new store commits each bucket alone (format 2, the default: ``partitioned.py``), or
    #: takes one store-wide lock a unit (format 1: ``partitioned=0``); None when the URL does
    #: not say (a store of format 1 is then refused, naming ``crawlstore migrate``).
    partitioned: bool | None = None

    @classmethod
    def parse(cls, url: str) -> Address:
        parts = urlsplit(url)
        if parts.scheme not in SCHEMES:
            raise InvalidArgument(f"a Redis store URL starts with {' or '.join(SCHEMES)}: {url!r}")
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        ns = query.pop("ns", "crawlstore")
        if not _NS.fullmatch(ns):
            raise InvalidArgument(f"ns is 1 to 64 letters, digits, '_', '.' or '-': {ns!r}")
        strict = query.pop("strict", "0")
        if strict not in ("0", "1", "true", "false"):
            raise InvalidArgument(f"strict is 0 or 1: {strict!r}")
        partitioned = query.pop("partitioned", None)
        if partitioned not in (None, "0", "1", "true", "false"):
            raise InvalidArgument(f"partitioned is 0 or 1: {partitioned!r}")
        try:
            lock_ttl = float(query.pop("lock_ttl", "10"))
            buckets = int(query.pop("buckets", "1024"))
        except ValueError as exc:
            raise InvalidArgument(f"{url!r}: {exc}") from None
        if not 0.1 <= lock_ttl <= 3600:
            raise InvalidArgument(f"lock_ttl is 0.1 to 3600 seconds: {lock_ttl}")
        if not 1 <= buckets <= 16384 or buckets & (buckets - 1):
            raise InvalidArgument(f"buckets is a power of 2 from 1 to 16384: {buckets}")
        if query:
            raise InvalidArgument(f"unknown options in {url!r}: {', '.join(sorted(query))}")
        scheme = parts.scheme.replace("+cluster", "")
        client_url = parts._replace(scheme=scheme, query="").geturl()
        return cls(client_url, parts.scheme.endswith("+cluster"), ns,
                   strict in ("1", "true"), lock_ttl, buckets,
                   None if partitioned is None else partitioned in ("1", "true"))  # fmt: skip

    def __str__(self) -> str:
        kind = "redis+cluster" if self.cluster else "redis"
        return f"{kind}://{self.url.split('://', 1)[1]}?ns={self.ns}"


def _fenced(keys: list[bytes], args: list[Any], fence: int) -> tuple[list[bytes], list[Any]]:
    """A slot's ``cs_apply`` call: its keys, then the fence key of each hash tag among them;
    the fence, how many fence keys, then the writes."""
    fences = list(dict.fromkeys(key[: key.index(b"}") + 1] + FENCE for key in keys))
    return [*keys, *fences], [fence, len(fences), *args]


def _full(exc: object) -> bool:
    """Whether a reply is a node's refusal for lack of memory (redis-py strips the ``OOM``)."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or str(exc).startswith("OOM")


#: crawlstore's own refusals (``library.lua``): a call sent again would get them again.
_OWN = ("CSLOCK", "CSFENCE", "CSOP")


def _resend(exc: object) -> bool:
    """Whether a call answered ``exc`` in a pipeline is sent again alone, through
    ``Server.call``, which waits out a slot moving (MOVED, ASK, TRYAGAIN) or a failover
    (CLUSTERDOWN, a node lost), loads a missing function library, and tells what lasts: every
    failure but a full node's and crawlstore's own refusals."""
    if isinstance(exc, StoreError) or _full(exc):
        return False
    return not (isinstance(exc, redis.ResponseError) and str(exc).startswith(_OWN))


def _nothing() -> None:
    pass


def _error(address: Address, exc: Exception) -> StoreError:
    """A Redis error as crawlstore's: a full shard is ``StoreFull``."""
    text = str(exc)
    if _full(exc):
        return StoreFull(
            f"{address}: a Redis node is out of memory (maxmemory, noeviction): {text}. "
            "Nothing is lost; add memory or nodes, or delete crawls"
        )
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)):
        return StoreError(f"{address}: Redis is unreachable: {text}")
    return StoreError(f"{address}: Redis refused a command: {text}")


class Server:
    """A client of the store's Redis (one server or a cluster), checked on open: the eviction
    policy, the fsync setting of strict mode, and the function library on every master."""

    def __init__(self, address: Address) -> None:
        self.address = address
        #: How many times a call met a failover, a moving slot or a lost node: what a process
        #: read before may be gone (a master that failed over lost its last writes).
        self.disturbed = 0
        try:
            if address.cluster:
                self.client: Any = RedisCluster.from_url(address.url)
            else:
                self.client = redis.Redis.from_url(address.url)
            self._check()
        except redis.RedisError as exc:
            raise _error(address, exc) from None

    # -- checks on open -------------------------------------------------------------------------

    def masters(self) -> list[Any]:
        """A client of each master (the one server when not a cluster)."""
        if not self.address.cluster:
            return [self.client]
        return [node.redis_connection for node in self.client.get_primaries()]

    def _check(self) -> None:
        for node in self.masters():
            policy = node.config_get("maxmemory-policy").get("maxmemory-policy")
            if policy != "noeviction":
                raise StoreError(
                    f"{self.address}: a node has maxmemory-policy {policy}: crawl state must "
                    "never be evicted. Set maxmemory-policy noeviction (a full node then "
                    "refuses writes, which crawlstore reports as StoreFull)"
                )
            if self.address.strict:
                fsync = node.config_get("appendfsync").get("appendfsync")
                aof = node.config_get("appendonly").get("appendonly")
                if aof != "yes" or fsync != "always":
                    raise StoreError(
                        f"{self.address}: strict mode needs appendonly yes and appendfsync "
                        f"always on every master (a node has {aof}, {fsync})"
                    )
            self._load_library(node)

    @staticmethod
    def _load_library(node: Any) -> None:
        """Load the function library where it is missing or older."""
        try:
            found = node.fcall_ro("cs_version", 0)
        except redis.ResponseError as exc:
            if "not found" not in str(exc).lower() and "unknown" not in str(exc).lower():
                raise
            found = None
        if found is not None:
            parts = found.split(b".")
            major = int(parts[0])
            minor = int(parts[1]) if len(parts) > 2 else 0  # before minors: major.digest
            if major > LIBRARY_MAJOR:
                raise StoreError(
                    f"the Redis node has crawlstore functions version {found!r}, newer than "
                    f"this crawlstore's {LIBRARY_VERSION!r}: upgrade crawlstore"
                )
            if major == LIBRARY_MAJOR and minor > LIBRARY_MINOR:
                return  # a newer crawlstore's functions, a superset of these
        if found != LIBRARY_VERSION:
            node.function_load(LIBRARY, replace=True)

    # -- calls ----------------------------------------------------------------------------------

    def call(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation`` (client calls), with crawlstore's errors; a node without the
        function library (restarted from nothing, added by hand) gets it, and the operation
        runs again; a cluster that is failing over or moving a slot is waited for."""
        deadline = time.monotonic() + 30
        while True:
            try:
                return operation()
            except (redis.exceptions.TryAgainError, redis.exceptions.ClusterError) as exc:
                # a slot half moved (TRYAGAIN; redis-py strips the word, and gives up after a
                # few tries with "TTL exhausted"), or the cluster down while a replica takes over
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{self.address}: the cluster stayed unavailable for 30 s (failing "
                        f"over, or moving slots): {exc}"
                    ) from None
                self.disturbed += 1
                time.sleep(0.05)
            except redis.ResponseError as exc:
                if "function not found" in str(exc).lower():
                    for node in self.masters():
                        self._load_library(node)
                    continue
                raise self._refusal(exc) from None
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                if not self.address.cluster or time.monotonic() >= deadline:
                    raise _error(self.address, exc) from None
                self.disturbed += 1
                # redis-py asks its default node which keys an FCALL names: when that node is
                # the one gone, every call fails until another takes its place
                self.client.replace_default_node()
                time.sleep(0.1)  # a master failing over: its replica takes over
            except redis.RedisError as exc:
                raise _error(self.address, exc) from None

    def _refusal(self, exc: redis.ResponseError) -> StoreError:
        """A call's refusal as crawlstore's error: crawlstore's own (``CSLOCK``, ``CSFENCE``)
        by its text."""
        text = str(exc)
        if text.startswith(_OWN):
            return StoreError(f"{self.address}: {text.split(' ', 1)[1]}")
        return _error(self.address, exc)

    def fcall(self, name: str, keys: list[bytes], args: list[Any]) -> Any:
        return self.call(lambda: self.client.fcall(name, len(keys), *keys, *args))

    def send(self, calls: list[Call], *, between: Callable[[], object] = _nothing,
             raise_on_error: bool = True) -> list[Any]:  # fmt: skip
        """Send function calls (each on the keys of one slot) in one pipeline per node, node
        after node, ``between()`` called between two nodes' pipelines; their replies, in
        order. A call refused (its slot moved or moving, the cluster failing over, its node
        gone or without the function library) is sent again alone through ``call``, which
        waits for the cluster as it does for any call; but a full node's refusal, and
        crawlstore's own (a lost lock, a fence), would only be repeated. A call that fails
        raises crawlstore's error at once (the nodes after it get nothing), or, without
        ``raise_on_error``, is answered with that error, and the other calls are sent.

        A reply lost with a connection to a cluster's node leaves unknown whether its call
        ran: it is sent again, so calls here are ones that may run twice (``cs_apply``'s
        whole values; ``cs_commit_v``, whose second run finds the version its first set).
        """
        replies: list[Any] = [None] * len(calls)
        groups: list[tuple[Any, list[int]]] = []
        alone: list[int] = []
        if not self.address.cluster:
            groups.append((self.client, list(range(len(calls)))))
        else:
            by_node: dict[str, tuple[Any, list[int]]] = {}
            for i, (_, keys, _) in enumerate(calls):
                try:
                    node = self.client.nodes_manager.get_node_from_slot(key_slot(keys[0]))
                except (IndexError, redis.RedisError):  # no keys, or a slot nobody serves yet
                    alone.append(i)
                    continue
                client = self.client.get_redis_connection(node)  # (made when first used)
                by_node.setdefault(node.name, (client, []))[1].append(i)
            groups.extend(by_node.values())
        for n, (client, indexes) in enumerate(groups):
            if n:
                between()
            got = self._pipeline(client, [calls[i] for i in indexes])
            for i, reply in zip(indexes, got, strict=True):
                replies[i] = self._settle(calls[i], reply, raise_on_error)
        for i in alone:
            replies[i] = self._settle(calls[i], redis.exceptions.TryAgainError(), raise_on_error)
        return replies

    def _settle(self, call: Call, reply: Any, raise_on_error: bool) -> Any:
        """A call's reply in a pipeline: the call sent again alone when it was refused for
        being sent there and then; a failure as crawlstore's error, raised or returned."""
        if not isinstance(reply, Exception):
            return reply
        if _resend(reply):
            if not isinstance(reply, redis.exceptions.AskError):  # (a slot moved loses nothing)
                self.disturbed += 1
            try:
                return self.fcall(*call)
            except StoreError as exc:
                reply = exc
        elif isinstance(reply, redis.ResponseError):
            reply = self._refusal(reply)
        elif not isinstance(reply, StoreError):
            reply = _error(self.address, reply)
        if raise_on_error:
            raise reply
        return reply

    def _pipeline(self, client: Any, calls: list[Call]) -> list[Any]:
        """One round trip to one node: its replies, a refusal as its exception."""
        pipe = client.pipeline(transaction=False)
        for name, keys, args in calls:
            pipe.fcall(name, len(keys), *keys, *args)
        try:
            return list(pipe.execute(raise_on_error=False))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if self.address.cluster:  # the node failed: each call is routed again alone
                return [redis.exceptions.TryAgainError(str(exc))] * len(calls)
            return [_error(self.address, exc)] * len(calls)
        except redis.RedisError as exc:
            return [_error(self.address, exc)] * len(calls)

    def read(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """Send read commands in one pipeline; their replies."""
        if len(commands) == 1:
            return [self.call(lambda: self.client.execute_command(*commands[0]))]

        def send() -> list[Any]:
            pipe = self.client.pipeline(transaction=False)
            for command in commands:
                pipe.execute_command(*command)
            return list(pipe.execute())

        return self.call(send)

    def apply(self, groups: list[tuple[list[bytes], list[Any]]], fence: int,
              between: Callable[[], object] = lambda: None) -> set[Any]:  # fmt: skip
        """Write each group (keys of one slot, their writes) with ``cs_apply``, fenced by
        ``fence`` (see ``library.lua``), with ``send``: one pipeline per node, ``between()``
        called between two nodes' pipelines; the nodes written to."""
        calls: list[Call] = [("cs_apply", *_fenced(keys, args, fence)) for keys, args in groups]
        self.send(calls, between=between)  # a later unit's fence: refused, StoreError
        if not self.address.cluster:
            return {self.client}
        return {self.node_of(keys[0]) for _, keys, _ in calls}

    def node_of(self, key: bytes) -> Any:
        """The name of the master serving ``key`` (on a cluster)."""
        return self.client.nodes_manager.get_node_from_slot(key_slot(key)).name

    def wait_replicas(self, nodes: set[Any], timeout_ms: int = 1000) -> None:
        """Strict mode: wait until a replica of each master written to has the writes."""
        if self.address.cluster:
            clients = [self.client.get_node(node_name=name).redis_connection for name in nodes]
        else:
            clients = [self.client]
        for client in clients:
            why = f"within {timeout_ms} ms"
            try:  # once: a master that is gone (or a replica since a failover) has no news
                acked = int(client.execute_command("WAIT", 1, timeout_ms))
            except redis.RedisError as exc:
                self.disturbed += 1
                acked, why = 0, f"({_error(self.address, exc)})"
            if acked < 1:
                raise StoreError(
                    f"{self.address}: strict mode: no replica acknowledged the commit {why}; "
                    "it is on the master only, and may be lost if it fails"
                )

    def scan_keys(self, pattern: bytes) -> Iterator[bytes]:
        for node in self.masters():
            yield from node.scan_iter(match=pattern, count=1000)

    def close(self) -> None:
        self.client.close()
