"""The documentation the tests in this folder hold to what it says: ``README.md`` and every page under ``docs/``."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is (file relative to the repo, 1-based line) and its dedented text."""

    path: str
    line: int
    lang: str
    text: str
    no_run: str | None = None
    """Why the block cannot run on its own, from a ``<!-- no-run: REASON -->`` line right above its fence (e.g. it
    talks to a server the reader started); None for a block that runs as written."""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"


def pages() -> list[Path]:
    """README.md and every Markdown page of the site, in a stable order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(lang: str, files: list[Path] | None = None) -> list[Block]:
    """Every ```lang block of ``files`` (default: all pages), indented ones (inside list items) included."""
    out = []
    for path in files if files is not None else pages():
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group("lang") == lang:
                line = text.count("\n", 0, m.start()) + 1
                above = text[: m.start()].rstrip().rsplit("\n", 1)[-1].strip()
                marker = re.fullmatch(r"<!--\s*no-run:(.*?)-->", above)
                no_run = marker.group(1).strip() if marker else None
                body = textwrap.dedent(m.group("body"))
                out.append(Block(str(path.relative_to(ROOT)), line, lang, body, no_run))
    return out


def section(path: Path, heading: str) -> str:
    """The text of ``path`` from the heading line ``heading`` (exact) to the next heading of the same or a higher
    level (lines inside code blocks are never headings); fails naming the page when the heading is gone."""
    lines = path.read_text(encoding="utf-8").splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    start, in_fence = None, False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^(#{1,6}) ", line)
        if start is None and not in_fence and line == heading:
            start = i
        elif start is not None and m and len(m.group(1)) <= level:
            return "\n".join(lines[start:i]) + "\n"
    if start is None:
        raise AssertionError(f"{path.relative_to(ROOT)} has no heading {heading!r} (a test reads this section)")
    return "\n".join(lines[start:]) + "\n"
