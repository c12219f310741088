"""Every install hint crawlstore gives installs crawlstore: PyPI's ``crawlstore`` is another
author's project, and this one is not published yet (it will be ``crawlstore-lmdb``), so each
``pip install`` in the README, the docs and the package's messages installs from a checkout."""

from __future__ import annotations

import re
import shlex

from helpers import ROOT

#: A hint: ``pip install`` and what follows on its line, up to a backtick, a quote that ends
#: a string, a comment, ``&&`` or the end of the line.
_HINT = re.compile(r"pip install ([^`\n#&\"]*)")


def hints() -> list[tuple[str, str]]:
    """(where, what it installs) of every hint."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "crawlstore").rglob("*.py"))]  # fmt: skip
    found = []
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for match in _HINT.finditer(line):
                found.append((f"{path.relative_to(ROOT)}:{n}", match.group(1).strip()))
    return found


def test_every_install_hint_installs_from_a_checkout() -> None:
    found = hints()
    assert len(found) >= 20  # the README's, the docs' and the messages' (install_hint)
    for where, args in found:
        words = [w for w in shlex.split(args.replace("{extra}", "x")) if not w.startswith("-")]
        assert words, (where, args)  # what it installs: a checkout ('.', '.[extra]', a path)
        assert words[0].startswith((".", "/")), f"{where}: pip install {args}"


def test_the_distribution_is_not_pypi_s_crawlstore() -> None:
    names = re.findall(r'(?m)^name = "([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert names == ["crawlstore-lmdb"]
