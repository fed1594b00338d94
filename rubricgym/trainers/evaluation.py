"""Held-out evaluation of a policy: per-task rewards, means and bootstrap confidence intervals."""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.suites.stats import bootstrap_ci

__all__ = ["EvalResult", "bootstrap_ci", "paired_difference"]


class EvalResult(BaseModel):
    """A policy's scores on held-out tasks (one greedy rollout per task unless ``samples`` > 1)."""

    model_config = ConfigDict(extra="forbid")

    tag: str
    step: int
    task_ids: list[str]
    rewards: list[float]
    """The rubric total per task (``nan`` where verdicts failed)."""
    success: list[float] = Field(default_factory=list)
    """The env's outcome reward per task (1 = solved)."""
    mean: float
    ci: tuple[float, float]
    success_mean: float
    success_ci: tuple[float, float]

    @classmethod
    def of(cls, tag: str, step: int, task_ids: list[str], rewards: list[float], success: list[float]) -> EvalResult:
        finite = [r for r in rewards if math.isfinite(r)]
        return cls(
            tag=tag,
            step=step,
            task_ids=task_ids,
            rewards=rewards,
            success=success,
            mean=float(np.mean(finite)) if finite else math.nan,
            ci=bootstrap_ci(rewards),
            success_mean=float(np.mean(success)) if success else math.nan,
            success_ci=bootstrap_ci(success),
        )

    def line(self) -> str:
        """Rubric reward and outcome with CIs; the outcome reads as ``solved`` (a share) where every task's outcome
        is 0 or 1, else as the mean ``outcome reward`` (clinical-v0 gives partial credit: its mean is no solve rate)."""
        lo, hi = self.success_ci
        if all(s in (0.0, 1.0) for s in self.success):
            outcome = f"solved {self.success_mean:.1%} [{lo:.1%}, {hi:.1%}]"
        else:
            outcome = f"outcome reward {self.success_mean:.3f} [{lo:.3f}, {hi:.3f}]"
        return (
            f"{self.tag:>8}: rubric reward {self.mean:.3f} [95% CI {self.ci[0]:.3f}, {self.ci[1]:.3f}]  {outcome}  "
            f"({len(self.task_ids)} held-out tasks)"
        )


def paired_difference(after: EvalResult, before: EvalResult, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """Mean per-task improvement of ``after`` over ``before`` (same tasks) and its bootstrap CI."""
    if after.task_ids != before.task_ids:
        raise ValueError("paired comparison needs the same held-out tasks in the same order")
    d = [a - b for a, b in zip(after.rewards, before.rewards, strict=True) if math.isfinite(a) and math.isfinite(b)]
    return (float(np.mean(d)) if d else math.nan), bootstrap_ci(d, seed=seed)
