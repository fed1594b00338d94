"""The judge protocol and ``CheckJudge``, which runs an env's named programmatic checks.

A judge answers ``can_judge(criterion)`` and ``await judge(criterion, trajectory, step, rubric=...)``. The
process reward model sends each criterion to the first of its judges that can judge it: ``CheckJudge`` takes
criteria with a ``check``, ``LLMJudge`` those with a ``judge`` instruction or plain text. A check that returns
``CheckResult.not_applicable`` gives a not-applicable verdict.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Protocol, runtime_checkable

from rubricgym.core.checks import NamedCheck
from rubricgym.core.registry import spec
from rubricgym.core.types import CheckResult, Trajectory
from rubricgym.rewards.rubric import Criterion, Rubric
from rubricgym.rewards.verdict import Evidence, Verdict


@runtime_checkable
class Judge(Protocol):
    """Anything that turns (criterion, trajectory, optional step) into a ``Verdict``."""

    id: str

    def can_judge(self, criterion: Criterion) -> bool: ...

    async def judge(
        self,
        criterion: Criterion,
        trajectory: Trajectory,
        step: int | None = None,
        *,
        rubric: Rubric | None = None,
    ) -> Verdict: ...


def env_checks(env_id: str) -> dict[str, NamedCheck]:
    """The named checks env ``env_id`` provides (``spec(env_id).load().checks()``)."""
    return dict(spec(env_id).load().checks())


class CheckJudge:
    """Deterministic judge: runs the env's named check that a criterion's ``check`` field names.

    ``checks`` overrides the lookup (a mapping of name to ``NamedCheck``); by default each trajectory's env
    provides them. A missing check, a scope mismatch or a check that raises becomes an error verdict.
    """

    id = "check"
    model = None

    def __init__(self, checks: Mapping[str, NamedCheck] | None = None):
        self._override = dict(checks) if checks is not None else None
        self._by_env: dict[str, dict[str, NamedCheck] | str] = {}

    def can_judge(self, criterion: Criterion) -> bool:
        return criterion.check is not None

    def checks_for(self, env_id: str) -> dict[str, NamedCheck] | str:
        """The checks of ``env_id``, or why they cannot be had (an error message)."""
        if self._override is not None:
            return self._override
        if env_id not in self._by_env:
            try:
                self._by_env[env_id] = env_checks(env_id)
            except (KeyError, ImportError, TypeError) as e:
                self._by_env[env_id] = f"cannot load the checks of env {env_id!r}: {e}"
        return self._by_env[env_id]

    def run_check(self, name: str, trajectory: Trajectory, step: int | None = None) -> CheckResult | str:
        """Run check ``name`` on ``trajectory``: its ``CheckResult``, or an error message."""
        checks = self.checks_for(trajectory.task.env_id)
        if isinstance(checks, str):
            return checks
        named = checks.get(name)
        if named is None:
            return f"env {trajectory.task.env_id!r} has no check {name!r}; it has: " + (
                ", ".join(sorted(checks)) or "none"
            )
        if named.scope == "step" and step is None:
            return f"check {name!r} is step-scoped: give its criterion scope 'step'"
        try:
            return named(trajectory, step)
        except Exception as e:  # a broken check must not abort a scoring run; the verdict says what broke
            return f"check {name!r} raised {type(e).__name__}: {e}"

    async def judge(
        self,
        criterion: Criterion,
        trajectory: Trajectory,
        step: int | None = None,
        *,
        rubric: Rubric | None = None,
    ) -> Verdict:
        if criterion.check is None:
            return Verdict.failed(criterion.id, "CheckJudge needs a criterion with a 'check'", step=step, judge=self.id)
        t0 = time.perf_counter()
        result = self.run_check(criterion.check, trajectory, step)
        latency = time.perf_counter() - t0
        if isinstance(result, str):
            return Verdict.failed(criterion.id, result, step=step, judge=self.id, latency_s=latency)
        if not result.applicable:
            return Verdict.not_applicable(
                criterion.id,
                result.rationale or "the check does not apply",
                step=step,
                judge=self.id,
                latency_s=latency,
                details=dict(result.details),
            )
        return Verdict(
            criterion_id=criterion.id,
            step=step,
            score=result.score,
            met=result.met,
            rationale=result.rationale,
            evidence=Evidence(steps=list(result.evidence)),
            judge=self.id,
            latency_s=latency,
            details=dict(result.details),
        )
