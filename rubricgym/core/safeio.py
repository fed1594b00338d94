"""Writing the files of a run directory without ever following a symbolic link, and reading JSON lines safely.

A run directory is read back (resume, ``show``, ``score``, the arena's cache), so a link planted in it must not
redirect a write outside it, and one damaged line must not stop a whole run. ``append_lines`` opens with
``O_NOFOLLOW`` and refuses anything but a regular file; ``atomic_write`` writes a fresh temporary file beside the
target and renames it over (a rename replaces a link, it never writes through one); ``parse_line`` turns one
line into a JSON value or a reason it is skipped (not UTF-8, not JSON, nested too deeply).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


class UnsafePathError(OSError):
    """A file the project writes is a symbolic link or not a regular file."""


def open_append(path: str | Path) -> int:
    """A descriptor appending to ``path`` (created if missing); a symlink or a non-regular file is refused."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafePathError(
                f"{path} is a symbolic link: rubricgym never writes through a link in a run directory "
                "(remove the link, or write the run elsewhere)"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePathError(f"{path} is not a regular file: remove it or write the run elsewhere")
    return fd


def append_lines(path: str | Path, data: bytes) -> None:
    """Append ``data`` (whole lines) to ``path``, fsynced; a torn last line is first closed with a newline."""
    fd = open_append(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a line torn by a kill stays its own (skipped) line
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | Path, data: bytes | str) -> Path:
    """Write ``path`` whole or not at all: a temporary file beside it, fsynced, renamed over it."""
    path = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def parse_line(raw: bytes) -> tuple[Any, str | None]:
    """``(value, None)`` for a good JSON line, ``(None, why)`` for one to skip."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, f"not UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})"
    try:
        return json.loads(text), None
    except RecursionError:  # json's decoder stops at the interpreter's recursion limit, cleanly
        return None, "JSON nested too deeply"
    except ValueError as e:
        return None, f"not JSON ({str(e).split(':')[0]})"
