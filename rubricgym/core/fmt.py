"""How numbers look in tables and reports: one formatter for every CLI table and the trainers' displays, and the
one wording of an outcome beside a rubric reward (every summary shows the solve rate first and says when the two
moved apart)."""

from __future__ import annotations

from collections.abc import Sequence

from rubricgym.core.types import SOLVED_AT, Outcome

__all__ = ["SOLVED_AT", "disagreement", "fmt_ci", "fmt_number", "solve_rate"]


def fmt_number(x: float | None, spec: str = ".3f", missing: str = "-") -> str:
    """``x`` with the format ``spec`` (``".3f"``, ``".2f"``, ``".4g"``...), or ``missing`` when there is none."""
    return missing if x is None else format(x, spec)


def fmt_ci(ci: Sequence[float] | None, spec: str = ".3f", missing: str = "-") -> str:
    """A confidence interval as ``[95% CI lo, hi]``, or ``missing`` when there is none."""
    return missing if not ci else f"[95% CI {format(ci[0], spec)}, {format(ci[1], spec)}]"


def solve_rate(outcomes: Sequence[Outcome]) -> float | None:
    """The share of episodes that solved their task (``Outcome.succeeded``: the env's verdict, else an outcome
    reward of 1); ``None`` when there is no episode."""
    return sum(o.succeeded for o in outcomes) / len(outcomes) if outcomes else None


def disagreement(
    rubric_gain: float,
    outcome_before: float,
    outcome_after: float,
    *,
    env: str | None = None,
    outcome: str = "solve rate",
    spec: str = ".1%",
) -> str | None:
    """A warning when the rubric reward and the outcome (the solve rate, or a partial-credit env's mean outcome
    reward) moved in opposite directions, else ``None``: a rubric that rises while fewer tasks are solved pays for
    something other than solving them, and a summary must not let the rubric gain hide that."""
    outcome_gain = outcome_after - outcome_before
    if not (rubric_gain > 0 > outcome_gain or rubric_gain < 0 < outcome_gain):
        return None  # same direction, or one of them did not move (nan compares false: no warning)
    moved = f"{format(outcome_before, spec)} -> {format(outcome_after, spec)}"
    where = f"; see rubricgym check {env}" if env else ""
    if rubric_gain > 0:
        return (
            f"warning: rubric reward rose ({rubric_gain:+.3f}) while the {outcome} fell ({moved}): "
            f"the rubric may pay for activity{where}"
        )
    return (
        f"warning: rubric reward fell ({rubric_gain:+.3f}) while the {outcome} rose ({moved}): "
        f"the rubric may not pay for what solves the task{where}"
    )
