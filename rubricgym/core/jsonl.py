"""Reading text and JSONL files whose errors name the file and the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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
