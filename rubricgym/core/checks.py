"""Named programmatic checks that an env provides for rubric criteria to reference.

A check is a pure function of a finished ``Trajectory`` (and, for step-scope checks, a step index): it never
needs a live env, so trajectories loaded from disk can be re-scored. ``rewards.CheckJudge`` runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

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


def check(name: str | CheckFn | None = None, scope: Scope = "trajectory", description: str = "") -> Any:
    """Turn ``fn(trajectory, step) -> CheckResult`` into a ``NamedCheck`` named after the function.

    ``@check``, ``@check(scope="step")`` or ``@check("other_name")``; the description defaults to the docstring.
    """

    def wrap(fn: CheckFn) -> NamedCheck:
        label = name if isinstance(name, str) else fn.__name__
        return NamedCheck(name=label, fn=fn, scope=scope, description=description or (fn.__doc__ or "").strip())

    return wrap(name) if callable(name) else wrap


def check_set(*named: NamedCheck) -> dict[str, NamedCheck]:
    """The checks by name (an env's ``check_set``); a name given twice is an error."""
    out: dict[str, NamedCheck] = {}
    for c in named:
        if c.name in out:
            raise ValueError(f"two checks are named {c.name!r}")
        out[c.name] = c
    return out
