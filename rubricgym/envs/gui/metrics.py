"""GUI run metrics (MobileGym's): success rate SR, mean progress PR, false completion FC, overdue termination
OT, unexpected side effects USE, and pass@k over repeated attempts of a task (the unbiased estimator of
Chen et al. 2021, "Evaluating Large Language Models Trained on Code")."""

from __future__ import annotations

from collections import defaultdict
from math import comb
from typing import Any

from rubricgym.core.types import Trajectory

KEYS = ("success", "progress", "false_completion", "overdue")


def pass_at_k(n: int, c: int, k: int) -> float:
    """The probability that at least one of ``k`` attempts drawn from ``n`` (``c`` successful) succeeds."""
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def gui_metrics(trajs: list[Trajectory]) -> dict[str, Any] | None:
    """SR, PR, FC, OT, USE and pass@k of the trajectories whose summary a GUI env wrote (``None``: none did)."""
    rows = [t for t in trajs if all(k in (t.outcome.summary or {}) for k in KEYS)]
    if not rows:
        return None
    n = len(rows)

    def rate(key: str) -> float:
        return sum(bool(t.outcome.summary[key]) for t in rows) / n

    by_task: dict[str, list[bool]] = defaultdict(list)
    for t in rows:
        by_task[t.task.id].append(bool(t.outcome.summary["success"]))
    most = min(len(v) for v in by_task.values())
    ks = [k for k in (1, 2, 4, 8, 16) if k <= most]
    return {
        "episodes": n,
        "tasks": len(by_task),
        "SR": rate("success"),
        "PR": sum(float(t.outcome.summary["progress"]) for t in rows) / n,
        "FC": rate("false_completion"),
        "OT": rate("overdue"),
        "USE": sum(bool(t.outcome.summary.get("side_effects")) for t in rows) / n,
        "pass@k": {str(k): sum(pass_at_k(len(v), sum(v), k) for v in by_task.values()) / len(by_task) for k in ks},
    }


def format_metrics(m: dict[str, Any]) -> str:
    passes = " ".join(f"pass@{k} {v:.3f}" for k, v in m["pass@k"].items())
    return (
        f"GUI ({m['episodes']} episodes, {m['tasks']} tasks): SR {m['SR']:.3f}  PR {m['PR']:.3f}  "
        f"FC {m['FC']:.3f}  OT {m['OT']:.3f}  USE {m['USE']:.3f}  {passes}"
    )
