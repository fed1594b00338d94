"""How numbers look in tables and reports: one formatter for every CLI table and the trainers' displays."""

from __future__ import annotations


def fmt_number(x: float | None, spec: str = ".3f", missing: str = "-") -> str:
    """``x`` with the format ``spec`` (``".3f"``, ``".2f"``, ``".4g"``...), or ``missing`` when there is none."""
    return missing if x is None else format(x, spec)
