"""The Layout on the Development page matches the package tree: every package and top-level module of
``rubricgym/`` is listed, and everything listed exists (the old README's layout said suites live in arena/)."""

from __future__ import annotations

import re

from tests.docs.pages import DOCS, ROOT, section

PACKAGE = ROOT / "rubricgym"


def listed() -> set[str]:
    block = re.search(r"```\n(.*?)```", section(DOCS / "development.md", "## Layout"), re.S)
    assert block is not None, "docs/development.md's Layout shows the tree in a code block"
    names = set()
    for line in block.group(1).splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            names.add(line.split()[0])
    return names


def test_the_layout_lists_every_package_and_module():
    names = listed()
    actual = {f"{p.name}/" for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    actual |= {p.name for p in PACKAGE.glob("*.py") if not p.name.startswith("cli_") and p.name != "__main__.py"}
    missing = actual - names
    assert not missing, f"docs/development.md's Layout does not list {sorted(missing)}: add a line saying what each is"
    gone = {n for n in names if not (PACKAGE / n.rstrip("/")).exists()}
    assert not gone, f"docs/development.md's Layout lists {sorted(gone)}, which rubricgym/ does not have"
    assert "suites/" in names and "arena/" in names
