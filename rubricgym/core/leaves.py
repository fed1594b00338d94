"""``leaves``: the scalar leaves of a JSON-like value with their paths (what the leak audit scans ``hidden`` for)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every scalar leaf of a JSON-like value with its path (``a.b[2].c``); ``None`` leaves are skipped."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from leaves(v, f"{path}[{i}]")
    elif value is not None:
        yield path, value
