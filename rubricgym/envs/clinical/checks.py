"""The clinical env's named checks: DiagGym's reward parts, physician-style criteria and step-level process checks.

Every check is a pure function of the trajectory: the env records what it resolved (exam ids, costs, abnormal
results, the can't-miss conditions a differential covered) in each step's ``info`` and the case's scoring
facts in ``task.hidden``, so saved trajectories re-score without the knowledge base.
"""

from __future__ import annotations

from typing import Any

from rubricgym.core.checks import check, check_set
from rubricgym.core.types import CheckResult, Step, Trajectory
from rubricgym.envs.clinical.rewards import MAX_REWARD

INVASIVE = 2
"""Invasiveness from which an exam needs a history first and a reason to be in the work-up."""
COSTLY = 300.0
COST_BUDGET = 2000.0
"""Dollars above the key exams' cost at which the cost criterion reaches 0."""


def _tool(s: Step) -> str | None:
    return s.info.get("tool") if s.tool_error is None and s.action.parse_error is None else None


def _orders(traj: Trajectory) -> list[Step]:
    return [s for s in traj.steps if _tool(s) == "order"]


def _final(traj: Trajectory) -> dict[str, Any]:
    last = traj.steps[-1] if traj.steps else None
    return last.info if last is not None and _tool(last) == "diagnose" else {}


@check(description="A diagnosis was issued with the diagnose tool (DiagGym's 0.1 term).")
def diagnosis_issued(traj: Trajectory, step: int | None = None) -> CheckResult:
    ok = bool(_final(traj))
    return CheckResult.of(ok, "diagnosed" if ok else "never called diagnose", [traj.steps[-1].index] if ok else [])


@check(description="The final diagnosis names the case's diagnosis (aliases and ICD-10 codes count).")
def diagnosis_correct(traj: Trajectory, step: int | None = None) -> CheckResult:
    info = _final(traj)
    want = traj.task.hidden.get("diagnosis", {}).get("name")
    ok = bool(info.get("correct"))
    evidence = [traj.steps[-1].index] if info else []
    return CheckResult.of(ok, f"said {info.get('diagnosis')!r}, case is {want!r}", evidence)


@check(description="F1 of the ordered exams against the case's key exams (DiagGym).")
def exam_f1(traj: Trajectory, step: int | None = None) -> CheckResult:
    info = _final(traj)
    if not traj.task.hidden.get("key_exams"):
        return CheckResult.not_applicable("the case names no key exam")
    if not info:
        return CheckResult(score=0.0, met=False, rationale="no diagnosis, no F1")
    f1 = float(info["exam_f1"])
    return CheckResult(
        score=f1,
        met=f1 >= 0.999,
        rationale=f"precision {info['exam_precision']:.2f}, recall {info['exam_recall']:.2f}",
        evidence=[s.index for s in _orders(traj)],
    )


@check(
    description="The env reward: DiagGym's accuracy + 0.5·F1 (+0.1 for issuing it, paid with a correct "
    "diagnosis only), over its maximum."
)
def diaggym_reward(traj: Trajectory, step: int | None = None) -> CheckResult:
    info = _final(traj)
    # a trajectory recorded before the gated reward has DiagGym's own value only
    total = float(info["reward"]) if "reward" in info else float(info.get("diaggym", 0.0)) / MAX_REWARD
    return CheckResult(score=total, met=total >= 1.0 - 1e-9, rationale=f"reward {total:.3f}")


@check(
    description="The work-up had a purpose: an exam was ordered because the stated working diagnosis calls for "
    "it (random activity has none, even when its final guess happens to be right)."
)
def purposeful(traj: Trajectory, step: int | None = None) -> CheckResult:
    fits = [s.index for s in _orders(traj) if s.info.get("fits_impression")]
    return CheckResult.of(bool(fits), f"{len(fits)} order(s) follow a stated working diagnosis", fits)


@check(description="Share of the case's key exams that were ordered (a panel reporting them counts).")
def key_exams_ordered(traj: Trajectory, step: int | None = None) -> CheckResult:
    keys = traj.task.hidden.get("key_exams", [])
    covered = {k for s in _orders(traj) for k in s.info.get("covers", [])}
    if not keys:
        return CheckResult.not_applicable("the case names no key exam")
    score = len(covered & set(keys)) / len(keys)
    missing = sorted(set(keys) - covered)
    return CheckResult(
        score=score,
        met=not missing,
        rationale="missing: " + (", ".join(missing) or "none"),
        evidence=[s.index for s in _orders(traj) if s.info.get("covers")],
    )


@check(
    description="A focused history and examination came first: >= 2 questions and >= 1 system examined "
    "before the first exam or the diagnosis."
)
def history_taken(traj: Trajectory, step: int | None = None) -> CheckResult:
    asked = examined = 0
    for s in traj.steps:
        t = _tool(s)
        if t in ("order", "diagnose"):
            break
        asked += t == "ask"
        examined += t == "examine"
    score = 0.5 * min(asked, 2) / 2 + 0.5 * (examined > 0)
    return CheckResult(score=score, met=score == 1.0, rationale=f"{asked} question(s), {examined} exam(s) first")


@check(
    description="Every can't-miss condition was named in the differential or an impression, or excluded by "
    "its key exam, before committing."
)
def cant_miss_considered(traj: Trajectory, step: int | None = None) -> CheckResult:
    wanted = [c["id"] for c in traj.task.hidden.get("cant_miss", [])]
    if not wanted:
        return CheckResult.not_applicable("the case names no can't-miss condition")
    got = set(_final(traj).get("considered", []))
    score = len(got & set(wanted)) / len(wanted)
    return CheckResult(
        score=score, met=score == 1.0, rationale="not considered: " + (", ".join(sorted(set(wanted) - got)) or "none")
    )


@check(
    description="No invasive (level >= 2) or costly (>= $300) exam outside the key exams and the "
    "differential's rule-out tests."
)
def no_unnecessary_exams(traj: Trajectory, step: int | None = None) -> CheckResult:
    bad = [
        s
        for s in _orders(traj)
        if not s.info.get("justified")
        and (s.info.get("invasiveness", 0) >= INVASIVE or s.info.get("cost", 0) >= COSTLY)
    ]
    if not _final(traj):
        return CheckResult(score=0.0, met=False, rationale="no diagnosis: the work-up led nowhere")
    score = max(0.0, 1.0 - 0.34 * len(bad))
    return CheckResult(
        score=score,
        met=not bad,
        rationale="unnecessary: " + (", ".join(s.info["name"] for s in bad) or "none"),
        evidence=[s.index for s in bad],
    )


@check(
    description="The diagnosis's reasoning cites results actually seen, abnormal ones when there were any "
    "(programmatic stand-in for an LLM judge of consistency)."
)
def reasoning_consistent(traj: Trajectory, step: int | None = None) -> CheckResult:
    info = _final(traj)
    if not info or not info.get("reason"):
        return CheckResult.of(False, "no reasoning given")
    if info.get("cites_unseen"):
        return CheckResult.of(False, "cites results never obtained: " + ", ".join(info["cites_unseen"]))
    if info.get("cites_abnormal"):
        return CheckResult.of(True, "cites abnormal results: " + ", ".join(info["cites_abnormal"]))
    if not info.get("any_abnormal") and any(_tool(s) in ("ask", "examine") for s in traj.steps):
        return CheckResult.of(True, "no abnormal result to cite; reasoning rests on history and examination")
    return CheckResult(
        score=0.5 if info.get("cites") else 0.25,
        met=False,
        rationale="reasoning does not cite the abnormal results seen",
    )


@check(
    description="Score of the case's weighted physician rubric (DiagBench style): Σ w·met / Σ w over the items "
    "that can be checked without an LLM."
)
def physician_rubric(traj: Trajectory, step: int | None = None) -> CheckResult:
    hidden, final = traj.task.hidden, _final(traj)
    ordered = {k for s in _orders(traj) for k in [s.info["exam"], *s.info.get("covers", [])]}
    asked = {f for s in traj.steps if _tool(s) == "ask" for f in s.info.get("matched", [])}
    considered = set(final.get("considered", []))
    invasive_bad = any(not s.info.get("justified") and s.info.get("invasiveness", 0) >= INVASIVE for s in _orders(traj))
    got = total = 0.0
    missed = []
    for item in hidden.get("rubric", []):
        kind, target = item.get("kind", "judge"), item.get("target")
        if kind == "judge" or (kind == "avoid_invasive" and not _orders(traj)):
            continue  # an LLM item; "avoids invasive tests" says nothing of an agent that ordered nothing
        met = {
            "diagnosis": bool(final.get("correct")),
            "exam_ordered": target in ordered,
            "considered": target in considered,
            "asked": target in asked,
            "avoid_invasive": bool(final) and not invasive_bad,
        }[kind]
        total += item["weight"]
        got += item["weight"] * met
        if not met:
            missed.append(item["text"])
    if total == 0:
        return CheckResult.not_applicable("no rubric item can be checked without an LLM")
    return CheckResult(score=got / total, met=got == total, rationale="missed: " + ("; ".join(missed) or "none"))


@check(description="Cost of the work-up beyond the key exams, scored 1 at no excess down to 0 at +$2000.")
def workup_cost(traj: Trajectory, step: int | None = None) -> CheckResult:
    seen: set[str] = set()
    cost = 0.0
    for s in _orders(traj):
        if s.info["exam"] not in seen:
            seen.add(s.info["exam"])
            cost += float(s.info.get("cost", 0))
    excess = max(0.0, cost - float(traj.task.hidden.get("key_cost", 0)))
    score = max(0.0, 1.0 - excess / COST_BUDGET) if _final(traj) else 0.0
    return CheckResult(
        score=score,
        met=excess == 0 and bool(_final(traj)),
        rationale=f"${cost:.0f} spent, ${excess:.0f} beyond the key exams",
    )


@check(description="Invasiveness burden of exams outside the justified ones: 1 with none, 0 at a total level of 6.")
def workup_invasiveness(traj: Trajectory, step: int | None = None) -> CheckResult:
    burden = sum(s.info.get("invasiveness", 0) for s in _orders(traj) if not s.info.get("justified"))
    score = max(0.0, 1.0 - burden / 6) if _final(traj) else 0.0
    return CheckResult(score=score, met=burden == 0 and bool(_final(traj)), rationale=f"unjustified burden {burden}")


# ---- step-level process checks ------------------------------------------------------------------------------


def _step(traj: Trajectory, step: int | None) -> Step:
    return traj.steps[step or 0]


@check(scope="step", description="This step is a well-formed tool call that ran.")
def step_valid(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = _step(traj, step)
    reason = s.action.parse_error or s.tool_error
    return CheckResult.of(reason is None, reason or "valid call", [s.index])


@check(
    scope="step",
    description="This order states a working diagnosis that calls for the exam (one of its key exams or a "
    "bedside basic) and a reason (as DiagGym asks).",
)
def order_justified(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = _step(traj, step)
    if _tool(s) != "order":
        return CheckResult.of(False, "not a valid order", [s.index])
    fits = s.info.get("fits_impression", len(s.info.get("impression", "")) >= 3)
    ok = bool(fits) and len(s.info.get("reason", "").split()) >= 2
    if not fits:
        why = "the impression names no condition this exam bears on"
    else:
        why = "follows from the working diagnosis, with a reason" if ok else "no reason given (two words or more)"
    return CheckResult.of(ok, why, [s.index])


@check(scope="step", description="This order does not repeat an exam already resulted.")
def no_repeat_exam(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = _step(traj, step)
    ok = _tool(s) == "order" and not s.info.get("repeat")
    return CheckResult.of(ok, "new exam" if ok else "repeated exam or invalid order", [s.index])


@check(scope="step", description="An invasive exam (level >= 2) comes after at least one history question.")
def history_before_invasive(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = _step(traj, step)
    if _tool(s) != "order" or s.info.get("invasiveness", 0) < INVASIVE:
        return CheckResult.of(True, "not an invasive order", [s.index])
    asked = any(_tool(p) == "ask" for p in traj.steps[: s.index])
    return CheckResult.of(asked, "history taken first" if asked else "invasive exam before any history", [s.index])


ALL = check_set(
    diagnosis_issued,
    diagnosis_correct,
    exam_f1,
    diaggym_reward,
    purposeful,
    key_exams_ordered,
    history_taken,
    cant_miss_considered,
    no_unnecessary_exams,
    reasoning_consistent,
    physician_rubric,
    workup_cost,
    workup_invasiveness,
    step_valid,
    order_justified,
    no_repeat_exam,
    history_before_invasive,
)
