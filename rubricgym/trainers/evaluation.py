"""Held-out evaluation of a policy: per-task rewards and outcomes, means and bootstrap confidence intervals, and
the base-vs-trained gains (outcome first, with a warning when the rubric reward and the outcome moved apart)."""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.core.fmt import disagreement, fmt_ci
from rubricgym.suites.stats import bootstrap_ci

__all__ = ["EvalResult", "bootstrap_ci", "gain_lines", "paired_difference", "paired_outcome_difference"]


class EvalResult(BaseModel):
    """A policy's scores on held-out tasks (one greedy rollout per task unless ``samples`` > 1)."""

    model_config = ConfigDict(extra="forbid")

    tag: str
    step: int
    task_ids: list[str]
    rewards: list[float]
    """The rubric total per task (``nan`` where verdicts failed)."""
    success: list[float] = Field(default_factory=list)
    """Per task 1 when the episode solved it (``Outcome.succeeded``: the env's verdict, else an outcome reward of 1),
    else 0; summaries written before the flag existed hold the outcome reward (partial credit) instead."""
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

    @property
    def binary(self) -> bool:
        """Every task's outcome is solved (1) or not (0), so the mean outcome is a solve rate."""
        return bool(self.success) and all(s in (0.0, 1.0) for s in self.success)

    @property
    def outcome_name(self) -> tuple[str, str]:
        """What the outcome mean is called and its format: the ``solve rate`` (a share) where every task's outcome
        is 0 or 1, else the mean ``outcome reward`` (clinical-v0 gives partial credit: its mean is no solve rate)."""
        return ("solve rate", ".1%") if self.binary else ("outcome reward", ".3f")

    def outcome_text(self) -> str | None:
        """The outcome mean with its CI (``solved 20.8% [95% CI ...]``), or ``None`` when the env reports none."""
        if not self.success:
            return None
        name, spec = self.outcome_name
        label = "solved" if self.binary else name
        return f"{label} {format(self.success_mean, spec)} {fmt_ci(self.success_ci, spec)}"

    def line(self) -> str:
        """The outcome first, then the rubric reward, each with its 95% CI."""
        outcome = self.outcome_text()
        return (
            f"{self.tag:>8}: {outcome + '  ' if outcome else ''}rubric reward {self.mean:.3f} {fmt_ci(self.ci)}  "
            f"({len(self.task_ids)} held-out tasks)"
        )


def _paired(after: list[float], before: list[float], seed: int) -> tuple[float, tuple[float, float]]:
    d = [a - b for a, b in zip(after, before, strict=True) if math.isfinite(a) and math.isfinite(b)]
    return (float(np.mean(d)) if d else math.nan), bootstrap_ci(d, seed=seed)


def _same_tasks(after: EvalResult, before: EvalResult) -> None:
    if after.task_ids != before.task_ids:
        raise ValueError("paired comparison needs the same held-out tasks in the same order")


def paired_difference(after: EvalResult, before: EvalResult, seed: int = 0) -> tuple[float, tuple[float, float]]:
    """Mean per-task improvement of ``after`` over ``before`` (same tasks) and its bootstrap CI."""
    _same_tasks(after, before)
    return _paired(after.rewards, before.rewards, seed)


def paired_outcome_difference(
    after: EvalResult, before: EvalResult, seed: int = 0
) -> tuple[float, tuple[float, float]]:
    """Mean per-task change of the env's outcome (the solve rate's gain for 0/1 outcomes) and its bootstrap CI."""
    _same_tasks(after, before)
    return _paired(after.success, before.success, seed)


def gain_lines(
    after: EvalResult, before: EvalResult, *, env: str | None = None, prefix: str = "gain: ", levels: bool = False
) -> list[str]:
    """The paired gains of ``after`` over ``before``, the outcome's first (``levels``: with both means, ``solve
    rate 20.8% -> 12.5% (gain -8.3% [95% CI ...])``), and the warning line when the rubric reward and the outcome
    moved in opposite directions (``env``: what ``rubricgym check`` should look at)."""

    def part(name: str, spec: str, b: float, t: float, d: float, ci: tuple[float, float]) -> str:
        gain = f"{format(d, '+' + spec)} {fmt_ci(ci, '+' + spec)}"
        return f"{name} {format(b, spec)} -> {format(t, spec)} (gain {gain})" if levels else f"{name} {gain}"

    diff, ci = paired_difference(after, before)
    rubric = part("rubric reward", ".3f", before.mean, after.mean, diff, ci)
    if not (after.success and before.success):
        return [f"{prefix}{rubric}"]
    name, spec = (after if not after.binary else before).outcome_name  # a solve rate only if both are 0/1
    odiff, oci = paired_outcome_difference(after, before)
    outcome = part(name, spec, before.success_mean, after.success_mean, odiff, oci)
    warning = disagreement(diff, before.success_mean, after.success_mean, env=env, outcome=name, spec=spec)
    return [f"{prefix}{outcome}, {rubric}"] + ([warning] if warning else [])
