"""The calculator env's named checks (its default rubric is ``rubric.yaml`` beside this file).

They read each step's typed record (``records.py``), never ``Step.info`` keys: a renamed key raises."""

from __future__ import annotations

from rubricgym.core.checks import check, check_set
from rubricgym.core.types import CheckResult, Step, Trajectory
from rubricgym.envs.toy.arith import evaluate
from rubricgym.envs.toy.records import RECORDS, Answer, Calculation


def _calc_values(traj: Trajectory, before: int | None = None) -> list[float]:
    steps = traj.steps if before is None else traj.steps[:before]
    return [float(r.value) for _, r in RECORDS.each(steps, Calculation)]


def _solution_values(traj: Trajectory) -> list[float]:
    """The value of each of the solution's operations, in order (the last is the answer)."""
    return [float(evaluate(expr)) for expr in traj.task.hidden.get("steps", [])]


def _among(value: float, values: list[float]) -> bool:
    return any(abs(value - v) < 1e-6 for v in values)


def _valid(step: Step) -> bool:
    return step.action.parse_error is None and step.tool_error is None


@check(description="The final answer equals the true answer.")
def final_answer_correct(traj: Trajectory, step: int | None = None) -> CheckResult:
    last = traj.steps[-1] if traj.steps else None
    answer = RECORDS.get(last, Answer) if last else None
    ok = bool(answer and answer.correct)
    return CheckResult.of(
        ok,
        f"answered {traj.outcome.answer!r}, expected {traj.task.hidden.get('answer')!r}",
        [last.index] if last else [],
    )


@check(description="The episode ended with a call of the answer tool.")
def answered(traj: Trajectory, step: int | None = None) -> CheckResult:
    ok = traj.outcome.terminated and traj.outcome.answer is not None
    return CheckResult.of(ok, "answered" if ok else "never called answer")


@check(description="At least one calculator call succeeded.")
def used_calculator(traj: Trajectory, step: int | None = None) -> CheckResult:
    idx = [s.index for s in traj.steps if s.action.tool_call and s.action.tool_call.name == "calculator" and _valid(s)]
    return CheckResult.of(bool(idx), f"{len(idx)} successful calculator call(s)", idx)


@check(description="Every action was a well-formed tool call that ran without error.")
def no_invalid_actions(traj: Trajectory, step: int | None = None) -> CheckResult:
    if not traj.steps:
        return CheckResult.of(False, "no steps")
    bad = [s.index for s in traj.steps if not _valid(s)]
    score = 1.0 - len(bad) / len(traj.steps)
    return CheckResult(
        score=score, met=not bad, rationale=f"{len(bad)} invalid of {len(traj.steps)} steps", evidence=bad
    )


@check(description="The answered value was computed with the calculator before answering.")
def answer_grounded(traj: Trajectory, step: int | None = None) -> CheckResult:
    last = traj.steps[-1] if traj.steps else None
    answer = RECORDS.get(last, Answer) if last else None
    if last is None or answer is None:
        return CheckResult.of(False, "no answer given")
    seen = _calc_values(traj, before=last.index)
    ok = any(abs(v - answer.value) < 1e-6 for v in seen)
    return CheckResult.of(
        ok, "answer appears among calculator results" if ok else "answer was never computed", [last.index]
    )


@check(description="Some calculator call computed one of the solution's intermediate values: the work got somewhere.")
def made_progress(traj: Trajectory, step: int | None = None) -> CheckResult:
    targets = _solution_values(traj)
    hits = [s.index for s, r in RECORDS.each(traj.steps, Calculation) if _among(float(r.value), targets)]
    return CheckResult.of(bool(hits), f"{len(hits)} calculator call(s) computed a value of the solution", hits)


@check(description="The share of the solution's operations whose result the calculator computed.")
def steps_computed(traj: Trajectory, step: int | None = None) -> CheckResult:
    targets = _solution_values(traj)
    seen = _calc_values(traj)
    done = sum(_among(t, seen) for t in targets)
    score = done / len(targets) if targets else 0.0
    return CheckResult(
        score=score,
        met=bool(targets) and done == len(targets),
        rationale=f"{done} of the solution's {len(targets)} operation(s) computed",
        evidence=[s.index for s, r in RECORDS.each(traj.steps, Calculation) if _among(float(r.value), targets)],
    )


@check(description="The answer is a calculator result of work that computed part of the solution (not a guess, "
       "and not a number computed off the problem).")  # fmt: skip
def answer_from_work(traj: Trajectory, step: int | None = None) -> CheckResult:
    grounded, progress = answer_grounded(traj), made_progress(traj)
    ok = bool(grounded.met and progress.met)
    why = f"{grounded.rationale}; {progress.rationale}"
    return CheckResult.of(ok, why, sorted({*grounded.evidence, *progress.evidence}))


@check(scope="step", description="This step's action was a well-formed tool call that ran.")
def step_valid(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = traj.steps[step or 0]
    reason = s.action.parse_error or s.tool_error
    return CheckResult.of(reason is None, reason or "valid call", [s.index])


@check(
    scope="step",
    description="This step computed one of the solution's intermediate values, or answered correctly.",
)
def step_progress(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = traj.steps[step or 0]
    record = RECORDS.of(s)
    if isinstance(record, Answer) and record.correct:
        return CheckResult.of(True, "correct answer", [s.index])
    hidden = traj.task.hidden
    targets: set[float] = set()
    for expr in hidden.get("steps", []):
        targets.add(float(evaluate(expr)))
    value = record.value if isinstance(record, Calculation | Answer) else None
    ok = isinstance(record, Calculation) and any(abs(float(record.value) - t) < 1e-6 for t in targets)
    return CheckResult.of(ok, f"computed {value}" if value is not None else "no value computed", [s.index])


ALL = check_set(
    final_answer_correct,
    answered,
    used_calculator,
    no_invalid_actions,
    answer_grounded,
    made_progress,
    steps_computed,
    answer_from_work,
    step_valid,
    step_progress,
)
