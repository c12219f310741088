"""How to install an optional extra, as every message that needs one says it.

crawlstore is installed from a checkout until it is published under its distribution name,
``crawlstore-lmdb`` (PyPI's ``crawlstore`` is another author's project): a hint never names a
package on an index.
"""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """The command that brings ``extra``."""
    return f"pip install -e '.[{extra}]' in a checkout of crawlstore"
