"""Named programmatic checks that an env provides for rubric criteria to reference.

A check is a pure function of a finished ``Trajectory`` (and, for step-scope checks, a step index): it never
needs a live env, so trajectories loaded from disk can be re-scored. ``rewards.CheckJudge`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rubricgym.core.types import CheckResult, Trajectory

Scope = Literal["step", "trajectory"]
CheckFn = Callable[[Trajectory, int | None], CheckResult]


@dataclass(frozen=True)
class NamedCheck:
    """A programmatic check with the name rubric criteria use to reference it."""

    name: str
    fn: CheckFn
    scope: Scope = "trajectory"
    description: str = ""

    def __call__(self, trajectory: Trajectory, step: int | None = None) -> CheckResult:
        if self.scope == "step" and step is None:
            raise ValueError(f"check {self.name!r} is step-scoped: pass the index of the step to check")
        if step is not None and not 0 <= step < len(trajectory.steps):
            raise IndexError(f"check {self.name!r}: step {step} out of range (trajectory has {len(trajectory.steps)})")
        return self.fn(trajectory, step)


def check(name: str, scope: Scope = "trajectory", description: str = "") -> Callable[[CheckFn], NamedCheck]:
    """Decorator that turns ``fn(trajectory, step) -> CheckResult`` into a ``NamedCheck``."""

    def wrap(fn: CheckFn) -> NamedCheck:
        return NamedCheck(name=name, fn=fn, scope=scope, description=description or (fn.__doc__ or "").strip())

    return wrap
