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


_GIT_HEAD = re.compile(r'^diff --git ("(?:[^"\\]|\\.)*"|\S+) ("(?:[^"\\]|\\.)*"|\S+)\s*$')
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def unquote_path(p: str) -> str:
    """A patch header path as written by git: C-quoted names (``"a/x\\ny"``) are decoded, others kept."""
    if not (len(p) >= 2 and p.startswith('"') and p.endswith('"')):
        return p
    body, out, i = p[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _C_ESCAPES:
                out.append(_C_ESCAPES[nxt])
                i += 2
                continue
            if body[i + 1 : i + 4].isdigit():
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
        out += c.encode("utf-8", "surrogateescape")
        i += 1
    return out.decode("utf-8", "surrogateescape")


def _strip(p: str) -> str | None:
    p = p.rstrip("\n")
    p = p.strip() if p.strip().startswith('"') else p.split("\t")[0].strip()
    p = unquote_path(p)
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
        head = _GIT_HEAD.match(line.rstrip("\n"))
        if head:  # a file with no hunks (a new empty file) has only this header
            path = _strip(head.group(2)) or _strip(head.group(1)) or ""
            cur = FilePatch(path=path, old_path=_strip(head.group(1)), new_path=_strip(head.group(2)))
            files.append(cur)
            hunk = None
            i += 1
            continue
        if cur is not None and not cur.hunks and line.startswith("new file mode"):
            cur.old_path = None
        elif cur is not None and not cur.hunks and line.startswith("deleted file mode"):
            cur.new_path = None
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _strip(line[4:]), _strip(lines[i + 1][4:])
            if cur is None or cur.hunks or (cur.path not in (old, new)):
                cur = FilePatch(path=new or old or "", old_path=old, new_path=new)
                files.append(cur)
            else:  # the --- / +++ pair of the file its ``diff --git`` line announced
                cur.old_path, cur.new_path = old, new
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


INFRASTRUCTURE_NAMES = frozenset(
    {
        "conftest.py",
        "pytest.ini",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "noxfile.py",
        "sitecustomize.py",
        "usercustomize.py",
        ".pytest.ini",
    }
)
SHADOW_ROOTS = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "pytest.py", "_pytest.py", "pluggy.py", "py.py"}
)


def is_test_infrastructure(path: str) -> bool:
    """True for files that steer how tests run or are judged: test files, pytest/tox configuration, start-up
    hooks (``sitecustomize.py``, ``*.pth``) and modules named like the test runner's own (``pytest.py``)."""
    p = PurePosixPath(path)
    return (
        is_test_path(path)
        or p.name in INFRASTRUCTURE_NAMES
        or p.suffix == ".pth"
        or any(part in SHADOW_ROOTS for part in p.parts[:2])
    )


_TAMPER = [
    (re.compile(p), why)
    for p, why in (
        (r"\b_pytest\b|\bpluggy\b", "uses pytest internals"),
        (r"^\s*(import\s+pytest\b|from\s+pytest\b)|\bimport_module\(\s*['\"]pytest", "imports pytest"),
        (r"\bTestReport\b|\bCallInfo\b|\bpytest_\w+|\bhookimpl\b|\bhookwrapper\b", "touches pytest hooks or reports"),
        (r"\bos\._exit\b", "ends the process with os._exit"),
        (r"^(sys\.exit|exit|quit|os\.kill|raise\s+SystemExit)\b", "exits the process when imported"),
        (r"RUBRICGYM|rubricgym", "refers to the grader"),
        (r"/proc/self/fd|\bgc\.get_(objects|referrers)\b|\bsys\._getframe\b", "inspects the running process"),
        (r"__builtins__|\bbuiltins\.\w+\s*=", "rewrites builtins"),
    )
]


def tampering_lines(patch: str, test_files: list[str] | None = None) -> list[str]:
    """Added lines of non-test Python files in ``patch`` that reach for test machinery (``path: why: line``)."""
    tests = set(test_files or [])
    found = []
    for fp in parse_patch(patch):
        if not fp.path.endswith(".py") or is_test_path(fp.path) or fp.path in tests:
            continue
        for h in fp.hunks:
            old = set(h.old)
            for line in h.new:
                if line in old:
                    continue
                for rx, why in _TAMPER:
                    if rx.search(line):
                        found.append(f"{fp.path}: {why}: {line.strip()[:120]}")
                        break
    return found
