"""Trap avoidance: ``TrapPolicy`` and the ``AvoidTraps`` facade.

Crawler traps (calendars, session ids in paths, repeating segments, faceted search) make a
crawl expand without end. ``AvoidTraps`` bounds them per URL prefix, from the URLs alone, and
keeps its counters and blocked prefixes in the storage: on the store they survive a restart.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import can_ada
import mmh3

from ..seed import Seed
from ..seen import bloom_positions, bloom_size
from .base import Frontier, register_facades
from .facades import Facade
from .protocol import Admission, Ready, Reason, Skipped, check_seed, check_seeds

__all__ = ["BLOCKED_NAMESPACE", "AvoidTraps", "BlockedPrefix", "TrapPolicy", "blocked_prefixes",
           "is_opaque", "move_blocked", "moved_state", "url_shape"]  # fmt: skip

log = logging.getLogger("crawlstore.traps")

_NAMESPACE = "traps"
#: The blocked prefixes, apart from the counts of the others: read whole by ``blocked()``.
BLOCKED_NAMESPACE = "traps.blocked"
_REFUSED = "\x00refused"


def _limit(value: float | None) -> float:
    if value is None:
        return math.inf
    if value < 0:
        raise ValueError(f"a trap budget must be >= 0 (or None to disable): {value}")
    return float(value)


@dataclass(frozen=True)
class TrapPolicy:
    """Budgets per URL prefix; ``None`` (or ``math.inf``) disables a check."""

    max_urls: float | None = 4096
    max_fanout: float | None = 256
    max_random_urls: float | None = 8
    max_path_depth: float | None = 32
    max_repetitions: float | None = 4

    def __post_init__(self) -> None:
        self.limits()  # checks them

    def limits(self) -> tuple[float, float, float, float, float]:
        """(urls, fan-out, random URLs, path depth, repetitions); a disabled one is inf."""
        return (_limit(self.max_urls), _limit(self.max_fanout), _limit(self.max_random_urls),
                _limit(self.max_path_depth), _limit(self.max_repetitions))  # fmt: skip

    def with_max_urls(self, n: float | None) -> TrapPolicy:
        """Distinct requests offered under one prefix."""
        return replace(self, max_urls=n)

    def with_max_fanout(self, n: float | None) -> TrapPolicy:
        """Distinct URLs (last segment and query) offered under one directory."""
        return replace(self, max_fanout=n)

    def with_max_random_urls(self, n: float | None) -> TrapPolicy:
        """Distinct URLs with an opaque-looking segment (session ids, hashes) per prefix."""
        return replace(self, max_random_urls=n)

    def with_max_path_depth(self, n: float | None) -> TrapPolicy:
        """Path segments in one URL."""
        return replace(self, max_path_depth=n)

    def with_max_repetitions(self, n: float | None) -> TrapPolicy:
        """Times one segment may occur in one URL (catches /a/b/a/b/a/b)."""
        return replace(self, max_repetitions=n)


def is_opaque(segment: str) -> bool:
    """At least 16 ASCII letters and digits, mixing both, with at least 8 distinct characters:
    what session ids, hashes and tokens look like (real ids can match too)."""
    return (
        len(segment) >= 16
        and segment.isascii()
        and segment.isalnum()
        and not segment.isdigit()
        and not segment.isalpha()
        and len(set(segment)) >= 8
    )


@dataclass(frozen=True, slots=True)
class UrlShape:
    prefix: str  # origin and first non-empty segment (the origin's root for an opaque one)
    directory: str  # origin and path up to its last "/"
    child: str  # the rest: last segment and query
    segments: tuple[str, ...]
    opaque: bool


def url_shape(url: str) -> UrlShape:
    parsed = can_ada.parse(url)
    origin = f"{parsed.protocol}//{parsed.host}"
    path: str = parsed.pathname
    segments = tuple(s for s in path.split("/") if s)
    first = segments[0] if segments else ""
    prefix = f"{origin}/" if not first or is_opaque(first) else f"{origin}/{first}/"
    cut = path.rfind("/") + 1
    return UrlShape(
        prefix,
        origin + path[:cut],
        path[cut:] + parsed.search,
        segments,
        any(is_opaque(s) for s in segments),
    )


@dataclass(frozen=True)
class BlockedPrefix:
    """A prefix that crossed a budget: why, and what it counted before and refused since."""

    prefix: str
    reason: str
    urls: int  # distinct requests counted before it was blocked
    refused: int  # pushes refused and queued seeds skipped since


_BLOOM_BITS, _BLOOM_HASHES = bloom_size(2 * 4096, 0.01)


class AvoidTraps(Facade):
    """Blocks a URL prefix once one of ``policy``'s budgets is crossed: further pushes under it
    are refused (``Reason.TRAP``), its queued seeds are skipped when popped and reported
    inwards as ``Skipped``; seeds in flight finish; other prefixes go on.

    Budgets count candidates: an offer that a facade further in refuses still counts; the same
    request offered again does not count twice. Place it outside ``retry`` and ``revisit`` (it
    checks what they hand out) and inside scope filters (it does not track out-of-scope URLs);
    keep ``dedup`` too.

    Per prefix it keeps the counts and a 9.6 KB Bloom filter of what it has counted (so a
    repeat is not counted twice, about 1% of new URLs are taken for repeats), plus one small
    count per directory seen; a blocked prefix keeps only its reason and counts.
    """

    def __init__(self, inner: Frontier, policy: TrapPolicy | None = None) -> None:
        super().__init__(inner)
        self.policy = policy or TrapPolicy()
        self._limits = self.policy.limits()
        self._traps = self.core.state(_NAMESPACE)
        self._blocked = self.core.state(BLOCKED_NAMESPACE)
        self._logged: set[str] = set()

    # -- admission ------------------------------------------------------------------------------

    def _over(self, shape: UrlShape, seed: Seed) -> str | None:
        """Count ``seed`` under its prefix; the budget it crosses, if any."""
        max_urls, max_fanout, max_random, max_depth, max_repetitions = self._limits
        if len(shape.segments) > max_depth:
            return f"path depth {len(shape.segments)} > {max_depth:g}"
        if shape.segments:
            segment, times = Counter(shape.segments).most_common(1)[0]
            if times > max_repetitions:
                return f"segment {segment!r} repeated {times} > {max_repetitions:g} times"
        record: dict[str, Any] = self._traps.get(shape.prefix) or {
            "urls": 0, "random": 0, "bits": bytes(_BLOOM_BITS // 8 + 1)}  # fmt: skip
        bits = bytearray(record["bits"])
        if not _bloom_add(bits, seed.fingerprint):
            return None  # offered before: counted then
        reason = None
        record["urls"] += 1
        if record["urls"] > max_urls:
            reason = f"more than {max_urls:g} URLs"
        if shape.opaque:
            record["random"] += 1
            if record["random"] > max_random:
                reason = reason or f"more than {max_random:g} opaque-looking URLs"
        kid = mmh3.mmh3_x64_128_digest(f"{shape.directory}\x00{shape.child}".encode())
        if _bloom_add(bits, kid):
            key = f"{shape.prefix}\x00d{shape.directory}"
            fanout = self._traps.get(key, 0) + 1
            self._traps[key] = fanout
            if fanout > max_fanout:
                reason = reason or f"fan-out of {shape.directory} > {max_fanout:g}"
        record["bits"] = bytes(bits)
        self._traps[shape.prefix] = record
        return reason

    def _block(self, prefix: str, reason: str, urls: int) -> None:
        self._blocked[prefix] = [reason, urls, 0]
        self._traps.pop(prefix, None)
        for key in [k for k in self._traps if k.startswith(f"{prefix}\x00d")]:
            del self._traps[key]
        if prefix not in self._logged:
            self._logged.add(prefix)
            log.warning("trap: blocked %s: %s", prefix, reason)

    def _refused(self, prefix: str) -> None:
        self._traps[_REFUSED] = self._traps.get(_REFUSED, 0) + 1
        blocked = self._blocked.get(prefix)
        if blocked is not None:
            blocked[2] += 1
            self._blocked[prefix] = blocked

    def push(self, seed: Seed) -> Admission:
        check_seed(seed)
        shape = url_shape(seed.url)

        def push() -> Admission:
            if shape.prefix not in self._blocked:
                urls = (self._traps.get(shape.prefix) or {}).get("urls", 0)
                reason = self._over(shape, seed)
                if reason is None:
                    return self.inner.push(seed)
                self._block(shape.prefix, reason, urls + 1)
            self._refused(shape.prefix)
            return self.core.refuse(seed, Reason.TRAP)

        return self.inner.atomic(push)

    def push_many(self, seeds: Iterable[Seed]) -> list[Admission]:
        batch = check_seeds(seeds)

        def push() -> list[Admission]:
            return [self.push(seed) for seed in batch]

        return self.inner.atomic(push)

    def _taken_back(self, ready: Ready) -> bool:
        prefix = url_shape(ready.seed.url).prefix
        if prefix not in self._blocked:
            return False

        def skip() -> None:
            self.inner.report(Skipped(ready.seed, reason="trap"))
            self._refused(prefix)

        self.inner.atomic(skip)
        return True

    # -- inspection -----------------------------------------------------------------------------

    def refused(self) -> int:
        """Pushes refused and queued seeds skipped, apart from the crawl's request totals."""
        return int(self._traps.get(_REFUSED, 0))

    def blocked(self) -> list[BlockedPrefix]:
        """The blocked prefixes with their reasons and counts."""
        return blocked_prefixes(self.core)

    def unblock(self, prefix: str) -> bool:
        """Let a prefix through again, with fresh budgets; False when it was not blocked."""

        def unblock() -> bool:
            if self._blocked.pop(prefix, None) is None:
                return False
            self._logged.discard(prefix)
            return True

        return self.inner.atomic(unblock)


def blocked_prefixes(core: Any) -> list[BlockedPrefix]:
    """The crawl's blocked prefixes with their reasons and counts, in prefix order (a read of
    them only, whatever the crawl's other prefixes hold)."""
    blocked = core.state(BLOCKED_NAMESPACE)
    return [BlockedPrefix(prefix, *blocked[prefix]) for prefix in sorted(blocked)]


def moved_state(namespace: str, key: str) -> tuple[str, str]:
    """Where a facade state entry goes in this layout: a blocked prefix that an older one kept
    among the trap counts (``prefix NUL b``) goes to ``BLOCKED_NAMESPACE``, the rest stays."""
    if namespace == _NAMESPACE and key.endswith("\x00b"):
        return BLOCKED_NAMESPACE, key[:-2]
    return namespace, key


def move_blocked(core: Any) -> int:
    """Move the blocked prefixes a crawl of an older layout kept among its trap counts to
    their own namespace (``moved_state``); how many."""
    traps, blocked = core.state(_NAMESPACE), core.state(BLOCKED_NAMESPACE)
    old = [key for key in traps if moved_state(_NAMESPACE, key)[0] != _NAMESPACE]
    for key in old:
        blocked[moved_state(_NAMESPACE, key)[1]] = traps.pop(key)
    return len(old)


def _bloom_add(bits: bytearray, digest: bytes) -> bool:
    """Set a digest's bits; True when one was not set yet (the digest is new)."""
    new = False
    for p in bloom_positions(digest, _BLOOM_BITS, _BLOOM_HASHES):
        byte, mask = p >> 3, 0x80 >> (p & 7)
        if not bits[byte] & mask:
            bits[byte] |= mask
            new = True
    return new


register_facades(AvoidTraps)
