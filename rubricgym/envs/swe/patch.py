"""Read unified diffs: which files a patch touches and the (old, new) text of each hunk.

The oracle agent turns a gold patch into ``str_replace`` edits with ``hunk_edits``; checks and grading use
``patch_files`` to know which files hold the bug and which are tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
TEST_DIRS = frozenset({"tests", "test", "testing"})


@dataclass
class Hunk:
    old_start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)


@dataclass
class FilePatch:
    path: str
    old_path: str | None
    new_path: str | None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def is_new(self) -> bool:
        return self.old_path is None

    @property
    def is_deleted(self) -> bool:
        return self.new_path is None


def _strip(p: str) -> str | None:
    p = p.split("\t")[0].strip()
    if p == "/dev/null":
        return None
    return p[2:] if p.startswith(("a/", "b/")) else p


def parse_patch(text: str) -> list[FilePatch]:
    """The files and hunks of a unified diff (git-style or plain)."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    hunk: Hunk | None = None
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _strip(line[4:]), _strip(lines[i + 1][4:])
            cur = FilePatch(path=new or old or "", old_path=old, new_path=new)
            files.append(cur)
            hunk = None
            i += 2
            continue
        m = _HUNK.match(line)
        if m and cur is not None:
            hunk = Hunk(old_start=int(m.group(1)))
            cur.hunks.append(hunk)
        elif hunk is not None and line[:1] in (" ", "-", "+"):
            body = line[1:]
            if line[0] in (" ", "-"):
                hunk.old.append(body)
            if line[0] in (" ", "+"):
                hunk.new.append(body)
        elif hunk is not None and line.startswith("\\"):
            for side in (hunk.old, hunk.new):  # "\ No newline at end of file" applies to the line above
                if side and side[-1].endswith("\n") and lines[i - 1][1:] == side[-1]:
                    side[-1] = side[-1][:-1]
        i += 1
    return files


def patch_files(text: str) -> list[str]:
    """Paths (relative to the repository root) that a patch touches, in order."""
    return list(dict.fromkeys(fp.path for fp in parse_patch(text) if fp.path))


def hunk_edits(fp: FilePatch) -> list[tuple[str, str]]:
    """``(old text, new text)`` of each hunk of ``fp`` (context lines included on both sides)."""
    return [("".join(h.old), "".join(h.new)) for h in fp.hunks]


def is_test_path(path: str) -> bool:
    """True for test code: ``test_*.py``, ``*_test.py``, ``conftest.py`` or anything under a tests dir."""
    p = PurePosixPath(path)
    name = p.name
    if name == "conftest.py" or (name.endswith(".py") and (name.startswith("test_") or name[:-3].endswith("_test"))):
        return True
    return any(part in TEST_DIRS for part in p.parts[:-1])
