"""Reading text and JSONL files whose errors name the file and the line, and setting aside the lines of a run's
JSONL file that an interrupted write cut short."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from rubricgym.core.safeio import append_lines, atomic_write, parse_line


def read_jsonl(path: str | Path, error: type[Exception] = ValueError) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` of every non-blank line; a line that is not JSON (or not UTF-8 text)
    raises ``error``."""
    with open(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise error(
                    f"{path}:{lineno}: not UTF-8 text (byte {raw[e.start]:#04x} at column {e.start + 1}); "
                    "is it a binary file?"
                ) from None
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise error(f"{path}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None


def read_text(path: str | Path, error: type[Exception] = ValueError) -> str:
    """The UTF-8 text of ``path``; bytes that are not UTF-8 raise ``error`` naming the file, line and column."""
    raw = Path(path).read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise error(
            f"{path}:{line}: not UTF-8 text (byte {raw[e.start]:#04x} at column {column}); is it a binary file, "
            "or saved in another encoding? Save it as UTF-8"
        ) from None


REMOVED_SUFFIX = ".removed"
"""Lines taken out of a run's JSONL file are appended to ``FILE.removed`` beside it, never thrown away."""


def unreadable_lines(path: str | Path) -> list[int]:
    """The (1-based) numbers of the lines of ``path`` that are not JSON: what a write cut short by a kill leaves."""
    if not Path(path).exists():
        return []
    lines = Path(path).read_bytes().split(b"\n")
    return [i + 1 for i, raw in enumerate(lines) if raw.strip() and parse_line(raw)[1] is not None]


def set_aside_lines(path: str | Path, numbers: Collection[int]) -> Path | None:
    """Move the lines ``numbers`` (1-based) of ``path`` to ``path.removed`` (appended, one per line), rewriting
    ``path`` atomically without them; the ``.removed`` file, or ``None`` when there was nothing to move. A kill
    in between leaves a line in both files, never in neither."""
    path = Path(path)
    if not numbers:
        return None
    lines = path.read_bytes().split(b"\n")
    moved = [raw for i, raw in enumerate(lines) if i + 1 in numbers]
    kept = [raw for i, raw in enumerate(lines) if i + 1 not in numbers and raw.strip()]
    aside = path.with_name(path.name + REMOVED_SUFFIX)
    append_lines(aside, b"".join(raw + b"\n" for raw in moved))
    atomic_write(path, b"".join(raw + b"\n" for raw in kept))
    return aside
