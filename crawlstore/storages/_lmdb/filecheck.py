"""Checking a store file before LMDB maps it: is it LMDB, and is every page it can read there?

LMDB maps the whole file and trusts it: a read of a page past the end of a torn copy kills the
process with SIGBUS. A file LMDB wrote and closed may still end before its last page number,
though: a page allocated and freed again within one transaction (a *loose* page) goes to the
free list without ever being written. So the rule is: every page past the end of the file must
be a free page, which the free list (a small tree, read here with py-lmdb's offline verifier
and never handed to the engine) can tell. It is read only when the file is short.
"""

from __future__ import annotations

import array
import os
from pathlib import Path
from typing import IO, Any

import lmdb.verify

from ...errors import CorruptStore, NotAStore, StoreError

__all__ = ["check_file"]

_MAGIC = (0xBEEFC0DE).to_bytes(4, "little")
#: LMDB 0.9 on 64 bits: a page header (16 bytes), then the meta record, whose last page number
#: is at 136 and transaction id at 144; the page size is kept at 40.
_META_END = 152


def check_file(path: Path) -> bool:
    """True when ``path`` exists and LMDB can read all of it; False when it does not exist.

    ``NotAStore`` when it is not LMDB; ``CorruptStore`` when it is torn: shorter than its
    newest meta page says, with a page it can reach missing. Other processes may write the
    file meanwhile: the meta pages are read before the size (LMDB writes a commit's pages, which
    extend the file, before its meta page), and a short file's free list is read again when a
    commit came in between."""
    try:
        with open(path, "rb") as f:
            for _ in range(5):
                page_size, txn_id, pages = _newest_meta(f, path)
                size = os.fstat(f.fileno()).st_size
                if size >= pages * page_size:
                    return True
                try:
                    _check_short_tail(f, path, size, page_size, pages)
                    return True
                except CorruptStore:
                    if _newest_meta(f, path)[1] == txn_id:
                        raise  # no commit came in between: the file is torn
            raise CorruptStore(f"{path} changes under every check of its end: written meanwhile")
    except FileNotFoundError:
        return False
    except PermissionError:
        raise StoreError(f"{path} cannot be read (no permission)") from None
    except IsADirectoryError:
        raise NotAStore(f"{path} is a directory, not a store file") from None


def _newest_meta(f: IO[bytes], path: Path) -> tuple[int, int, int]:
    """(page size, transaction id, pages in use) of the newest of the two meta pages."""
    f.seek(0)
    head = f.read(_META_END)
    if len(head) < _META_END or head[16:20] != _MAGIC:
        raise NotAStore(f"{path} is not a crawlstore store (no LMDB header)")
    page_size = int.from_bytes(head[40:44], "little")
    if not 512 <= page_size <= 65536 or page_size & (page_size - 1):
        raise CorruptStore(f"{path}: its meta page gives a page size of {page_size}")
    f.seek(page_size)
    second = f.read(_META_END)
    metas = [m for m in (head, second) if len(m) == _META_END and m[16:20] == _MAGIC]
    newest = max(metas, key=lambda m: int.from_bytes(m[144:152], "little"))
    txn_id = int.from_bytes(newest[144:152], "little")
    return page_size, txn_id, int.from_bytes(newest[136:144], "little") + 1


def _check_short_tail(f: IO[bytes], path: Path, size: int, page_size: int, pages: int) -> None:
    """Raise ``CorruptStore`` unless every page the file does not hold in full, up to
    ``pages``, is on the free list of the newest commit."""
    whole = size // page_size
    end = pages * page_size
    torn = f"{path} is torn: it holds {size} bytes, its last committed page ends at {end}"
    try:
        free, problems = _free_among(f, size, range(whole, pages))
    except lmdb.verify.VerifyError as exc:
        raise CorruptStore(f"{torn} ({exc})") from None
    if problems:
        raise CorruptStore(f"{torn}, and its free list is damaged: {problems[0]}")
    missing = [pg for pg in range(whole, pages) if pg not in free]
    if missing:
        raise CorruptStore(
            f"{torn}: {len(missing)} of the {pages - whole} pages past its end hold data "
            f"(first: page {missing[0]})"
        )


def _free_among(f: IO[bytes], size: int, wanted: range) -> tuple[set[int], list[str]]:
    """Which of the ``wanted`` pages the newest commit's free list holds, and the free list's
    problems; ``VerifyError`` when the meta pages cannot be read at all. The list's tree is
    walked by py-lmdb's verifier; its page lists are searched in C (a large file can free a
    hundred thousand pages)."""
    verify: Any = lmdb.verify  # its walker's parts are not typed
    verifier = verify._Verifier(f, size)
    verifier.detect_engine()
    verifier.load_metas()
    verifier.live = bytearray(verifier.next_pgno)
    verifier.free = bytearray(verifier.next_pgno)
    verifier._verify_tree("freeDB", verifier.meta.free, verify._cmp_int, None, is_free=True)
    problems = list(verifier.errors)
    wanted_pages, free = set(wanted), set()
    for txnid, data in verifier.free_records:
        pages = array.array("Q")
        if len(data) % pages.itemsize == 0:
            pages.frombytes(data)
        if not pages or pages[0] != len(pages) - 1:
            problems.append(f"freeDB: record {txnid} is not a list of pages")
            continue
        free |= wanted_pages.intersection(pages[1:])
    return free, problems
