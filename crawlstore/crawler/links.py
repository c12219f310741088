"""The links of an HTML page, with selectolax's lexbor HTML parser (the ``crawl`` extra)."""

from __future__ import annotations

from urllib.parse import urljoin

from selectolax.lexbor import LexborHTMLParser

__all__ = ["extract_links"]

_SKIPPED = ("#", "javascript:", "mailto:", "tel:", "data:")


def extract_links(html: bytes | str, url: str) -> list[str]:
    """The absolute URLs of the page's ``<a href>`` and ``<area href>`` links, resolved against
    its ``<base href>`` or ``url``, in page order. Links marked ``rel="nofollow"``, and all
    links of a page whose ``<meta name="robots">`` says ``nofollow``, are left out."""
    tree = LexborHTMLParser(html)
    for meta in tree.css("meta[name]"):
        name = (meta.attributes.get("name") or "").lower()
        if name == "robots" and "nofollow" in (meta.attributes.get("content") or "").lower():
            return []
    base = url
    if (tag := tree.css_first("base[href]")) is not None and (href := tag.attributes.get("href")):
        base = urljoin(url, href.strip())
    links = []
    for node in tree.css("a[href], area[href]"):
        if "nofollow" in (node.attributes.get("rel") or "").lower().split():
            continue
        href = (node.attributes.get("href") or "").strip()
        if href and not href.lower().startswith(_SKIPPED):
            links.append(urljoin(base, href))
    return links
