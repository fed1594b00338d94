"""Diff two directory trees into a ``patch -p1`` applicable unified diff, and fingerprint a tree.

Self-contained (standard library only, no rubricgym imports) because container backends run this file's source
inside the sandbox with ``python3 -c``. Never follows symlinks and reads only regular files, so a link or a FIFO
planted in the work dir cannot make the host read a host file or block.
"""

from __future__ import annotations

import difflib
import errno
import json
import os
import resource
import stat
import sys
from contextlib import suppress

IGNORED_DIRS = frozenset({".git", ".hg", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".tox"})
IGNORED_SUFFIXES = (".pyc", ".pyo")
MAX_DIFF_FILE = 4 * 1024 * 1024
MAX_DIFF_TOTAL = 32 * 1024 * 1024
"""Past this many bytes of diff, the remaining changed files are listed by name only."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_beneath(
    root: str | int,
    rel: str,
    flags: int = os.O_RDONLY,
    mode: int = 0o644,
    make_dirs: bool = False,
    owner: int | None = None,
) -> int:
    """An fd for ``root/rel`` opened one component at a time, each relative to its parent's fd, never
    following a symbolic link (``O_NOFOLLOW`` at every level).

    A process that swaps a folder for a link while we work can make the open fail, never make it land outside
    ``root`` (a path, or an open folder's fd). ``rel`` must be normalised (no ``..``). ``make_dirs`` creates
    missing parent folders (owned by ``owner`` when given). Raises ``OSError`` (``ELOOP``/``ENOTDIR`` for a link
    on the way).
    """
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise OSError(1, "'..' is not allowed", rel)
    fd = os.open(".", _DIR_FLAGS, dir_fd=root) if isinstance(root, int) else os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            try:
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make_dirs:
                    raise
                with suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                nfd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                if owner is not None:
                    os.fchown(nfd, owner, owner)
            os.close(fd)
            fd = nfd
        if not parts:
            return fd
        last = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return last


def _entries(fd: int) -> list[tuple[str, os.stat_result]]:
    out = []
    with suppress(OSError), os.scandir(fd) as it:
        for e in it:
            with suppress(OSError):
                out.append((e.name, e.stat(follow_symlinks=False)))
    return out


def walk(root: str) -> dict[str, os.stat_result]:
    """``{relative path: lstat}`` of every non-directory entry under ``root`` (ignored dirs skipped).

    A depth-first walk of folder descriptors, each opened relative to its parent without following links, so
    neither a link nor a path longer than ``PATH_MAX`` (a deeply nested tree) hides a file. Past a depth that
    would use half the open-file limit, folders are reopened from the deepest ancestor still held.
    """
    out: dict[str, os.stat_result] = {}
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return out
    keep = max(16, min(4096, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 2))
    frames: list[tuple[str, int | None, list[tuple[str, os.stat_result]]]] = [("", top, _entries(top))]
    try:
        while frames:
            rel, fd, entries = frames[-1]
            if not entries:
                frames.pop()
                if fd is not None:
                    os.close(fd)
                continue
            name, st = entries.pop()
            path = f"{rel}/{name}" if rel else name
            if not stat.S_ISDIR(st.st_mode):
                if not name.endswith(IGNORED_SUFFIXES):
                    out[path] = st
                continue
            if name in IGNORED_DIRS:
                continue
            base_rel, base_fd = next((r, f) for r, f, _ in reversed(frames) if f is not None)
            try:
                child = open_beneath(base_fd, path[len(base_rel) + 1 :] if base_rel else path, _DIR_FLAGS)
            except OSError:
                continue
            listed = _entries(child)
            if len(frames) >= keep:
                os.close(child)
                frames.append((path, None, listed))
            else:
                frames.append((path, child, listed))
    finally:
        for _, fd, _ in frames:
            if fd is not None:
                os.close(fd)
    return out


def fingerprint(root: str) -> dict[str, list[int]]:
    """``{relative path: [size, mtime_ns]}`` of every entry (links and special files included)."""
    return {p: [st.st_size, st.st_mtime_ns] for p, st in walk(root).items()}


def read_regular(root: str, rel: str, limit: int = MAX_DIFF_FILE) -> bytes | str:
    """The bytes of a regular file, or a one-line description of what the entry is instead."""
    try:
        fd = open_beneath(root, rel, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):
            try:
                return f"symbolic link to {quote_path(read_link(root, rel))}"
            except OSError:
                pass
        return f"unreadable ({e.strerror})"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return "special file (not diffed)"
        if st.st_size > limit:
            return f"large file of {st.st_size} bytes (not diffed)"
        return f.read(limit + 1)


def read_link(root: str, rel: str) -> str:
    """The target of the symbolic link ``root/rel`` (its parents opened without following links)."""
    parent, _, name = rel.rpartition("/")
    fd = open_beneath(root, parent, _DIR_FLAGS)
    try:
        return os.readlink(name, dir_fd=fd)
    finally:
        os.close(fd)


_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def quote_path(path: str) -> str:
    """``path`` as git writes it in a patch header: C-quoted when it holds a control character, a quote, a
    backslash or a non-ASCII byte (each such byte as an escape), so a name can never break the header lines."""
    raw = path.encode("utf-8", "surrogateescape")
    if all(0x20 <= b < 0x7F and b not in (0x22, 0x5C) for b in raw):
        return path
    out = []
    for b in raw:
        if b in _ESCAPES:
            out.append(_ESCAPES[b])
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _side(prefix: str, rel: str) -> str:
    q = quote_path(rel)
    return f'"{prefix}{q[1:]}' if q.startswith('"') else f"{prefix}{q}"


def _lines(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def file_diff(rel: str, old: bytes | str | None, new: bytes | str | None) -> str:
    """The git-style diff of one file; ``None`` means absent on that side (an empty new file gets its header)."""
    a, b = _side("a/", rel), _side("b/", rel)
    head = [f"diff --git {a} {b}\n"]
    if isinstance(old, str) or isinstance(new, str):  # a description of a non-regular entry, not contents
        what = old if isinstance(old, str) else new
        return "".join(head) + f"# {quote_path(rel)}: {what!s}\n"
    old_lines = [] if old is None else _lines(old)
    new_lines = [] if new is None else _lines(new)
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    if old_lines is None or new_lines is None:
        return "".join(head) + f"Binary files {a} and {b} differ\n"
    out = list(
        difflib.unified_diff(old_lines, new_lines, "/dev/null" if old is None else a, "/dev/null" if new is None else b)
    )
    if not out:
        return "".join(head) if old is None or new is None else ""
    text = []
    for line in out:
        text.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(head + text)


def diff_trees(
    old_root: str | os.PathLike[str], new_root: str | os.PathLike[str], max_bytes: int = MAX_DIFF_TOTAL
) -> str:
    """Unified diff turning ``old_root`` into ``new_root`` (paths sorted, ``a/``/``b/`` prefixes).

    Past ``max_bytes`` of diff the remaining changed files are named in a closing comment, not diffed.
    """
    old_root, new_root = os.fspath(old_root), os.fspath(new_root)
    old, new = walk(old_root), walk(new_root)
    parts: list[str] = []
    size = 0
    left: list[str] = []
    for rel in sorted(set(old) | set(new)):
        a = read_regular(old_root, rel) if rel in old else None
        b = read_regular(new_root, rel) if rel in new else None
        if a == b:
            continue
        part = "" if left else file_diff(rel, a, b)
        if left or size + len(part) > max_bytes:
            left.append(rel)
            continue
        parts.append(part)
        size += len(part)
    if left:
        names = " ".join(quote_path(r) for r in left[:50])
        parts.append(
            f"# diff truncated at {max_bytes} bytes; {len(left)} more changed file(s) not "
            f"diffed: {names}{' ...' if len(left) > 50 else ''}\n"
        )
    return "".join(parts)


if __name__ == "__main__":  # used inside container sandboxes: python3 -c SOURCE diff|fingerprint ARGS
    if sys.argv[1] == "diff":
        sys.stdout.write(diff_trees(sys.argv[2], sys.argv[3]))
    else:
        sys.stdout.write(json.dumps(fingerprint(sys.argv[2])))
