"""Bounds on the numbers users type: every CLI option and config number is finite and within a stated range.

Click's own ``min``/``max`` let NaN through (every comparison with NaN is false: ``audit-judge --threshold nan``
never flagged anything) and say nothing when no bound is given (``serve --idle-timeout 1e-9`` spun a core,
``--workers`` had no ceiling). ``bounded(lo, hi)`` is the one typer callback every numeric option uses instead; the
message names the option, the value and the range, so the user knows what to type.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer

Number = int | float

MAX_SEED = 2**63 - 1
"""The largest seed anything accepts (NumPy's and the wire protocol's range)."""


def bound_error(value: Number, lo: Number | None, hi: Number | None) -> str | None:
    """Why ``value`` is not a finite number in ``[lo, hi]`` (``None`` bounds are open), or ``None`` when it is:
    ``"must be at least 1 (a number in [1, 64]), got 0"``."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number in {span(lo, hi)}, got {value}"
    if lo is not None and value < lo:
        return f"must be at least {lo} (a number in {span(lo, hi)}), got {value}"
    if hi is not None and value > hi:
        return f"must be at most {hi} (a number in {span(lo, hi)}), got {value}"
    return None


def span(lo: Number | None, hi: Number | None) -> str:
    """``[lo, hi]`` as a user reads it (``[1, ...]`` when unbounded above)."""
    return f"[{'...' if lo is None else lo}, {'...' if hi is None else hi}]"


def bounded(lo: Number | None, hi: Number | None) -> Callable[[typer.CallbackParam, Any], Any]:
    """A typer option callback refusing numbers outside ``[lo, hi]`` or not finite (``None`` passes: unset).

    ``typer.Option(callback=bounded(0.0, 1.0))``: ``--threshold nan`` ends with ``Invalid value for
    '--threshold': --threshold must be a finite number in [0.0, 1.0], got nan``.
    """

    def check(param: typer.CallbackParam, value: Any) -> Any:
        for v in value if isinstance(value, list | tuple) else [value]:
            if isinstance(v, int | float) and not isinstance(v, bool):
                reason = bound_error(v, lo, hi)
                if reason is not None:
                    raise typer.BadParameter(f"{(param.opts or [param.name])[0]} {reason}")
        return value

    return check
