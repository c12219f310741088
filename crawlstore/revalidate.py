"""``Revalidate``: conditional requests from stored validators, and recording new ones."""

from __future__ import annotations

import functools
import logging

from . import journal
from .frontier.base import Frontier
from .frontier.protocol import Done
from .seed import Seed
from .url import parse_http_url
from .validators import Headers, Validator, Validators

log = logging.getLogger("crawlstore.revalidate")

__all__ = ["Revalidate"]

_CONDITIONAL_METHODS = frozenset({"GET", "HEAD"})


class Revalidate:
    """Makes recrawls cheap: a page seen before is requested with ``If-None-Match`` (its ETag)
    and ``If-Modified-Since`` (its Last-Modified); a ``304 Not Modified`` means unchanged.

    Only GET and HEAD over http(s) are revalidated. Validators are recorded when the page's
    handling went through: ``done()`` reports the seed and records them in one transaction, so
    a page whose extraction failed is fetched in full next time.
    """

    def __init__(self, validators: Validators) -> None:
        self.validators = validators
        #: Validators a server sent that could not be kept (a CR or LF, too long, a
        #: Last-Modified that is no date): the page still counts as done, without them.
        #: Counted when the transaction that reads them commits (at once outside one).
        self.dropped = 0
        self._warned: set[str] = set()

    @staticmethod
    def applies(seed: Seed) -> bool:
        """Whether ``seed`` is revalidated: GET and HEAD only."""
        return seed.method in _CONDITIONAL_METHODS

    def headers(self, seed: Seed) -> dict[str, str]:
        """The conditional headers for ``seed`` (none when nothing is stored)."""
        if not self.applies(seed):
            return {}
        return self.headers_of(seed, self.validators.get(seed.fingerprint))

    def headers_of(self, seed: Seed, stored: Validator | None) -> dict[str, str]:
        """The conditional headers for ``seed`` from ``stored``, its validators as read
        already (``headers`` reads them)."""
        if stored is None or not self.applies(seed):
            return {}
        headers = {}
        if stored.etag is not None:
            headers["If-None-Match"] = stored.etag
        if stored.last_modified is not None:
            headers["If-Modified-Since"] = stored.last_modified
        return headers

    @staticmethod
    def unchanged(status: int) -> bool:
        """Whether a response status says the page did not change."""
        return status == 304

    def record(self, seed: Seed, status: int, headers: Headers) -> None:
        """Keep a response's validators: a 2xx replaces them (one without validators clears
        them: they described another body); a 304 keeps them, with any field it updates."""
        read = status == 304 and self.applies(seed)  # only a 304 merges with what is stored
        stored = self.validators.get(seed.fingerprint) if read else None
        fresh = self._fresh(seed, status, headers, stored)
        if fresh is not None:
            self.validators.put(seed.fingerprint, fresh)

    def _fresh(
        self, seed: Seed, status: int, headers: Headers, stored: Validator | None
    ) -> Validator | None:
        """What ``record`` would store for this response (None: nothing to write)."""
        if not self.applies(seed):
            return None
        fresh, problems = Validator.parse_headers(headers)
        if problems:
            self._dropped(seed, problems)
        if status == 304:
            return stored.merged(fresh) if stored is not None and fresh else None
        return fresh if 200 <= status < 300 else None

    def _dropped(self, seed: Seed, problems: list[str]) -> None:
        count = functools.partial(self._count_dropped, len(problems))
        txn = journal.current()
        if txn is None:
            count()
        else:  # once the transaction commits: a step run again after a conflict counts once
            txn.on_commit(count)
        host = parse_http_url(seed.url).hostname
        if host not in self._warned:
            self._warned.add(host)
            log.warning(
                "%s sent validators that cannot be sent back, dropped (logged once a host): "
                "%s, for %s",
                host,
                "; ".join(problems),
                seed.url,
            )

    def _count_dropped(self, n: int) -> None:
        self.dropped += n

    def done(
        self,
        frontier: Frontier,
        seed: Seed,
        status: int,
        headers: Headers,
        *,
        content_hash: str | None = None,
    ) -> None:
        """Report ``seed`` done and record its validators, in one transaction. A 304 is
        unchanged; a full answer to a conditional request is changed; otherwise nobody knows."""

        def write() -> None:
            report, validator = self.outcome(seed, status, headers, content_hash=content_hash)
            frontier.report(report)
            if validator is not None:
                self.validators.put(seed.fingerprint, validator)

        frontier.atomic(write)

    def outcome(
        self, seed: Seed, status: int, headers: Headers, *, content_hash: str | None = None
    ) -> tuple[Done, Validator | None]:
        """What ``done()`` writes, without writing it: the ``Done`` report and the validator to
        store (None: nothing to store), for a unit of a group commit
        (``worker.finish(report, links, validator=validator)``)."""
        stored = self.validators.get(seed.fingerprint) if self.applies(seed) else None
        unchanged = True if self.unchanged(status) else (False if stored is not None else None)
        report = Done(seed, unchanged=unchanged, content_hash=content_hash, status=status)
        return report, self._fresh(seed, status, headers, stored)
