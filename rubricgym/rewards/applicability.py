"""When a criterion applies: its ``applies_if`` conditions, evaluated on the trajectory before any judge runs.

A pitfall such as "leaves the test files unchanged" says nothing about an agent that edited nothing, and a
citation criterion nothing about one that never answered: crediting them anyway pays doing nothing. A criterion
whose conditions do not all hold gets a not-applicable verdict, which leaves numerator and denominator of every
aggregate. A condition is one of

- a built-in: ``answered`` (the episode has a non-empty final answer), ``acted`` (at least one well-formed tool
  call ran), ``edited`` (a step's typed record is a ``core.steprecord.Edits`` that changed files: the env
  declares its records as ``step_records``, and one that declares none makes the condition an error),
  ``tool:NAME`` (a call of tool NAME ran without error);
- the name of one of the env's checks: it applies when the check is met (a check that is itself N/A or unmet
  makes the criterion N/A); a built-in wins over an env check of the same name;
- either, prefixed with ``not:`` to negate it; alternatives joined by ``|`` hold when any of them does
  (``edited|not:no_destructive_commands``: the agent edited something or ran a destructive command).

For a step-scope criterion the built-ins look at the steps up to and including the judged one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rubricgym.core.registry import spec
from rubricgym.core.steprecord import Edits, RecordError, env_records
from rubricgym.core.types import CheckResult, Step, Trajectory

RunCheck = Callable[[str, Trajectory, int | None], CheckResult | str]
"""Runs an env check by name: its result or an error message (``CheckJudge.run_check``)."""


def _ran(step: Step) -> bool:
    return step.action.tool_call is not None and step.action.parse_error is None and step.tool_error is None


def _answered(traj: Trajectory, steps: list[Step]) -> bool:
    return bool((traj.outcome.answer or "").strip())


def _edited(traj: Trajectory, steps: list[Step]) -> bool:
    """A step changed files, as its typed record says (a record that does not parse raises ``RecordError``)."""
    env_id = traj.task.env_id
    try:
        records = env_records(spec(env_id).load())
    except (KeyError, ImportError, TypeError) as e:
        raise RecordError(f"'edited' reads the step records of env {env_id!r}, which cannot be loaded: {e}") from None
    if records is None:
        raise RecordError(
            f"'edited' reads the env's typed step records and {env_id!r} declares none: give the env class "
            "`step_records = StepRecords(...)` (rubricgym.core.steprecord), the records of its editing tools "
            "subclassing Edits"
        )
    return any(isinstance(r := records.of(s), Edits) and r.changed_files for s in steps)


BUILTIN: dict[str, Callable[[Trajectory, list[Step]], bool]] = {  # one per core.rubric.BUILTIN_CONDITIONS
    "answered": _answered,
    "acted": lambda traj, steps: any(_ran(s) for s in steps),
    "edited": _edited,
}
"""Built-in conditions, each a function of the trajectory and the steps it may look at."""


@dataclass(frozen=True)
class Applicability:
    """Whether a criterion applies, why, or why that could not be decided (``error``)."""

    applies: bool
    reason: str = ""
    error: str | None = None


def _holds(name: str, traj: Trajectory, step: int | None, run_check: RunCheck) -> tuple[bool | None, str]:
    """(holds, what was found), or (None, error message)."""
    steps = traj.steps if step is None else traj.steps[: step + 1]
    if name in BUILTIN:
        try:
            return BUILTIN[name](traj, steps), name
        except RecordError as e:
            return None, f"condition {name!r}: {e}"
    if name.startswith("tool:"):
        tool = name.removeprefix("tool:")
        return any(_ran(s) and s.action.tool_call and s.action.tool_call.name == tool for s in steps), name
    result = run_check(name, traj, step)
    if isinstance(result, str):
        return None, f"condition {name!r}: {result} (built-ins: {', '.join(BUILTIN)}, tool:NAME)"
    return result.applicable and result.met, f"{name}: {result.rationale}" if result.rationale else name


def applicability(
    conditions: list[str] | None, traj: Trajectory, step: int | None, run_check: RunCheck
) -> Applicability:
    """Evaluate ``conditions`` (all must hold) for ``traj`` (at ``step`` for step-scope criteria)."""
    for cond in conditions or []:
        found = []
        for alt in cond.split("|"):  # any alternative may hold
            negated = alt.startswith("not:")
            holds, why = _holds(alt.removeprefix("not:"), traj, step, run_check)
            if holds is None:
                return Applicability(False, error=why)
            if holds != negated:
                break
            found.append(why)
        else:
            return Applicability(False, reason=f"not applicable: {cond!r} does not hold ({'; '.join(found)})")
    return Applicability(True)
