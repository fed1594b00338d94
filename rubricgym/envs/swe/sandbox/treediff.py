"""Diff two directory trees into a ``patch -p1`` applicable unified diff, and fingerprint a tree.

Self-contained (standard library only, no rubricgym imports) because container backends run this file's source
inside the sandbox with ``python3 -c``. Never follows symlinks and reads only regular files, so a link or a FIFO
planted in the work dir cannot make the host read a host file or block.
"""

from __future__ import annotations

import difflib
import json
import os
import stat
import sys

IGNORED_DIRS = frozenset({".git", ".hg", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox"})
IGNORED_SUFFIXES = (".pyc", ".pyo")
MAX_DIFF_FILE = 4 * 1024 * 1024


def walk(root: str) -> dict[str, os.stat_result]:
    """``{relative path: lstat}`` of every non-directory entry under ``root`` (ignored dirs skipped)."""
    out: dict[str, os.stat_result] = {}
    if not os.path.isdir(root):
        return out
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel) if rel else root))
        except OSError:
            continue
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if e.name not in IGNORED_DIRS:
                    stack.append(path)
            elif not e.name.endswith(IGNORED_SUFFIXES):
                out[path] = st
    return out


def fingerprint(root: str) -> dict[str, list[int]]:
    """``{relative path: [size, mtime_ns]}`` of every entry (links and special files included)."""
    return {p: [st.st_size, st.st_mtime_ns] for p, st in walk(root).items()}


def read_regular(root: str, rel: str, limit: int = MAX_DIFF_FILE) -> bytes | str:
    """The bytes of a regular file, or a one-line description of what the entry is instead."""
    full = os.path.join(root, rel)
    try:
        st = os.lstat(full)
    except OSError as e:
        return f"unreadable ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"symbolic link to {os.readlink(full)}"
    if not stat.S_ISREG(st.st_mode):
        return "special file (not diffed)"
    if st.st_size > limit:
        return f"large file of {st.st_size} bytes (not diffed)"
    fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit + 1)


def _lines(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def file_diff(rel: str, old: bytes | str | None, new: bytes | str | None) -> str:
    """The git-style diff of one file; ``None`` means absent on that side."""
    head = [f"diff --git a/{rel} b/{rel}\n"]
    if isinstance(old, str) or isinstance(new, str):
        what = old if isinstance(old, str) else new
        return "".join(head) + f"# {rel}: {what}\n"
    old_lines = [] if old is None else _lines(old)
    new_lines = [] if new is None else _lines(new)
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    if old_lines is None or new_lines is None:
        return "".join(head) + f"Binary files a/{rel} and b/{rel} differ\n"
    out = list(difflib.unified_diff(old_lines, new_lines, "/dev/null" if old is None else f"a/{rel}",
                                    "/dev/null" if new is None else f"b/{rel}"))
    if not out:
        return ""
    text = []
    for line in out:
        text.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(head + text)


def diff_trees(old_root: str | os.PathLike[str], new_root: str | os.PathLike[str]) -> str:
    """Unified diff turning ``old_root`` into ``new_root`` (paths sorted, ``a/``/``b/`` prefixes)."""
    old_root, new_root = os.fspath(old_root), os.fspath(new_root)
    old, new = walk(old_root), walk(new_root)
    parts = []
    for rel in sorted(set(old) | set(new)):
        a = read_regular(old_root, rel) if rel in old else None
        b = read_regular(new_root, rel) if rel in new else None
        if a == b:
            continue
        parts.append(file_diff(rel, a, b))
    return "".join(parts)


if __name__ == "__main__":  # used inside container sandboxes: python3 -c SOURCE diff|fingerprint ARGS
    if sys.argv[1] == "diff":
        sys.stdout.write(diff_trees(sys.argv[2], sys.argv[3]))
    else:
        sys.stdout.write(json.dumps(fingerprint(sys.argv[2])))
