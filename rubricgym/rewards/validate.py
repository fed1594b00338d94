"""Rubric checks that need the env: every named check must exist before anything is scored.

A criterion naming a check the env does not have would otherwise be skipped or error quietly while the remaining
criteria give totals that look fine; scoring refuses it up front and says which names are close.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

from rubricgym.rewards.rubric import Rubric


def unknown_checks(rubric: Rubric, checks: Collection[str], env_id: str) -> list[str]:
    """One message per check name in ``rubric`` that ``checks`` (the env's) lacks; empty when all exist."""
    out = []

    def missing(name: str, where: str) -> None:
        close = difflib.get_close_matches(name, list(checks), n=3, cutoff=0.5)
        known = ", ".join(sorted(checks))
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else f"; {env_id} has: {known}"
        out.append(f"rubric {rubric.id!r}: {where} names check {name!r}, which {env_id} does not have{hint}")

    for c in rubric.criteria:
        if c.check is not None and c.check not in checks:
            missing(c.check, f"criterion {c.id!r}")
    ids = {c.id for c in rubric.criteria}
    for field in ("outcome_check", "rubric_check"):
        name = getattr(rubric.aggregation, field, None)
        if name and name not in checks and name not in ids:
            missing(name, f"aggregation.{field}")
    return out
