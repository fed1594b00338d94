"""The clinical env's named checks: DiagGym's reward parts, physician-style criteria and step-level process checks.

Every check is a pure function of the trajectory: the env records what it resolved (exam ids, costs, abnormal
results, the can't-miss conditions a differential covered) in each step's typed record (``records.py``) and the
case's scoring facts in ``task.hidden``, so saved trajectories re-score without the knowledge base.
"""

from __future__ import annotations

from rubricgym.core.checks import check, check_set
from rubricgym.core.types import CheckResult, Step, Trajectory
from rubricgym.envs.clinical.records import RECORDS, Ask, ClinicalRecord, Diagnose, Order
from rubricgym.envs.clinical.rewards import MAX_REWARD

INVASIVE = 2
"""Invasiveness from which an exam needs a history first and a reason to be in the work-up."""
COSTLY = 300.0
COST_BUDGET = 2000.0
"""Dollars above the key exams' cost at which the cost criterion reaches 0."""


def _tool(s: Step) -> str | None:
    """The tool that ran at ``s`` (``None``: a malformed call or a failed tool)."""
    record = RECORDS.get(s, ClinicalRecord)
    return record.tool if record is not None and s.tool_error is None else None


def _orders(traj: Trajectory) -> list[tuple[Step, Order]]:
    return RECORDS.each(traj.steps, Order)


def _final(traj: Trajectory) -> Diagnose | None:
    """The diagnosis that ended the episode, if one did."""
    return RECORDS.get(traj.steps[-1], Diagnose) if traj.steps else None


@check(description="A diagnosis was issued with the diagnose tool (DiagGym's 0.1 term).")
def diagnosis_issued(traj: Trajectory, step: int | None = None) -> CheckResult:
    ok = _final(traj) is not None
    return CheckResult.of(ok, "diagnosed" if ok else "never called diagnose", [traj.steps[-1].index] if ok else [])


@check(description="The final diagnosis names the case's diagnosis (aliases and ICD-10 codes count).")
def diagnosis_correct(traj: Trajectory, step: int | None = None) -> CheckResult:
    final = _final(traj)
    want = traj.task.hidden.get("diagnosis", {}).get("name")
    ok = final is not None and final.correct
    evidence = [traj.steps[-1].index] if final is not None else []
    return CheckResult.of(ok, f"said {final.diagnosis if final is not None else None!r}, case is {want!r}", evidence)


@check(description="F1 of the ordered exams against the case's key exams (DiagGym).")
def exam_f1(traj: Trajectory, step: int | None = None) -> CheckResult:
    final = _final(traj)
    if not traj.task.hidden.get("key_exams"):
        return CheckResult.not_applicable("the case names no key exam")
    if final is None:
        return CheckResult(score=0.0, met=False, rationale="no diagnosis, no F1")
    f1 = final.exam_f1
    return CheckResult(
        score=f1,
        met=f1 >= 0.999,
        rationale=f"precision {final.exam_precision:.2f}, recall {final.exam_recall:.2f}",
        evidence=[s.index for s, _ in _orders(traj)],
    )


@check(
    description="The env reward: DiagGym's accuracy + 0.5·F1 (+0.1 for issuing it, paid with a correct "
    "diagnosis only), over its maximum."
)
def diaggym_reward(traj: Trajectory, step: int | None = None) -> CheckResult:
    final = _final(traj)
    total = 0.0
    if final is not None:  # a trajectory recorded before the gated reward has DiagGym's own value only
        total = final.reward if final.reward is not None else final.diaggym / MAX_REWARD
    return CheckResult(score=total, met=total >= 1.0 - 1e-9, rationale=f"reward {total:.3f}")


@check(
    description="The work-up had a purpose: an exam was ordered because the stated working diagnosis calls for "
    "it (random activity has none, even when its final guess happens to be right)."
)
def purposeful(traj: Trajectory, step: int | None = None) -> CheckResult:
    fits = [s.index for s, o in _orders(traj) if o.fits_impression]
    return CheckResult.of(bool(fits), f"{len(fits)} order(s) follow a stated working diagnosis", fits)


@check(description="Share of the case's key exams that were ordered (a panel reporting them counts).")
def key_exams_ordered(traj: Trajectory, step: int | None = None) -> CheckResult:
    keys = traj.task.hidden.get("key_exams", [])
    covered = {k for _, o in _orders(traj) for k in o.covers}
    if not keys:
        return CheckResult.not_applicable("the case names no key exam")
    score = len(covered & set(keys)) / len(keys)
    missing = sorted(set(keys) - covered)
    return CheckResult(
        score=score,
        met=not missing,
        rationale="missing: " + (", ".join(missing) or "none"),
        evidence=[s.index for s, o in _orders(traj) if o.covers],
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
    final = _final(traj)
    got = set(final.considered if final is not None else [])
    score = len(got & set(wanted)) / len(wanted)
    return CheckResult(
        score=score, met=score == 1.0, rationale="not considered: " + (", ".join(sorted(set(wanted) - got)) or "none")
    )


@check(
    description="No invasive (level >= 2) or costly (>= $300) exam outside the key exams and the "
    "differential's rule-out tests."
)
def no_unnecessary_exams(traj: Trajectory, step: int | None = None) -> CheckResult:
    bad = [(s, o) for s, o in _orders(traj) if not o.justified and (o.invasiveness >= INVASIVE or o.cost >= COSTLY)]
    if _final(traj) is None:
        return CheckResult(score=0.0, met=False, rationale="no diagnosis: the work-up led nowhere")
    score = max(0.0, 1.0 - 0.34 * len(bad))
    return CheckResult(
        score=score,
        met=not bad,
        rationale="unnecessary: " + (", ".join(o.name for _, o in bad) or "none"),
        evidence=[s.index for s, _ in bad],
    )


@check(
    description="The diagnosis's reasoning cites results actually seen, abnormal ones when there were any "
    "(programmatic stand-in for an LLM judge of consistency)."
)
def reasoning_consistent(traj: Trajectory, step: int | None = None) -> CheckResult:
    final = _final(traj)
    if final is None or not final.reason:
        return CheckResult.of(False, "no reasoning given")
    if final.cites_unseen:
        return CheckResult.of(False, "cites results never obtained: " + ", ".join(final.cites_unseen))
    if final.cites_abnormal:
        return CheckResult.of(True, "cites abnormal results: " + ", ".join(final.cites_abnormal))
    if not final.any_abnormal and any(_tool(s) in ("ask", "examine") for s in traj.steps):
        return CheckResult.of(True, "no abnormal result to cite; reasoning rests on history and examination")
    return CheckResult(
        score=0.5 if final.cites else 0.25,
        met=False,
        rationale="reasoning does not cite the abnormal results seen",
    )


@check(
    description="Score of the case's weighted physician rubric (DiagBench style): Σ w·met / Σ w over the items "
    "that can be checked without an LLM."
)
def physician_rubric(traj: Trajectory, step: int | None = None) -> CheckResult:
    hidden, final = traj.task.hidden, _final(traj)
    orders = [o for _, o in _orders(traj)]
    ordered = {k for o in orders for k in [o.exam, *o.covers]}
    asked = {f for _, a in RECORDS.each(traj.steps, Ask) for f in a.matched}
    considered = set(final.considered if final is not None else [])
    invasive_bad = any(not o.justified and o.invasiveness >= INVASIVE for o in orders)
    got = total = 0.0
    missed = []
    for item in hidden.get("rubric", []):
        kind, target = item.get("kind", "judge"), item.get("target")
        if kind == "judge" or (kind == "avoid_invasive" and not orders):
            continue  # an LLM item; "avoids invasive tests" says nothing of an agent that ordered nothing
        met = {
            "diagnosis": final is not None and final.correct,
            "exam_ordered": target in ordered,
            "considered": target in considered,
            "asked": target in asked,
            "avoid_invasive": final is not None and not invasive_bad,
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
    for _, o in _orders(traj):
        if o.exam not in seen:
            seen.add(o.exam)
            cost += o.cost
    diagnosed = _final(traj) is not None
    excess = max(0.0, cost - float(traj.task.hidden.get("key_cost", 0)))
    score = max(0.0, 1.0 - excess / COST_BUDGET) if diagnosed else 0.0
    return CheckResult(
        score=score,
        met=excess == 0 and diagnosed,
        rationale=f"${cost:.0f} spent, ${excess:.0f} beyond the key exams",
    )


@check(description="Invasiveness burden of exams outside the justified ones: 1 with none, 0 at a total level of 6.")
def workup_invasiveness(traj: Trajectory, step: int | None = None) -> CheckResult:
    burden = sum(o.invasiveness for _, o in _orders(traj) if not o.justified)
    diagnosed = _final(traj) is not None
    score = max(0.0, 1.0 - burden / 6) if diagnosed else 0.0
    return CheckResult(score=score, met=burden == 0 and diagnosed, rationale=f"unjustified burden {burden}")


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
    order = RECORDS.get(s, Order)
    if order is None or s.tool_error is not None:
        return CheckResult.of(False, "not a valid order", [s.index])
    fits = order.fits_impression if order.fits_impression is not None else len(order.impression) >= 3
    ok = fits and len(order.reason.split()) >= 2
    if not fits:
        why = "the impression names no condition this exam bears on"
    else:
        why = "follows from the working diagnosis, with a reason" if ok else "no reason given (two words or more)"
    return CheckResult.of(ok, why, [s.index])


@check(scope="step", description="This order does not repeat an exam already resulted.")
def no_repeat_exam(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = _step(traj, step)
    order = RECORDS.get(s, Order)
    ok = order is not None and s.tool_error is None and not order.repeat
    return CheckResult.of(ok, "new exam" if ok else "repeated exam or invalid order", [s.index])


@check(scope="step", description="An invasive exam (level >= 2) comes after at least one history question.")
def history_before_invasive(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = _step(traj, step)
    order = RECORDS.get(s, Order)
    if order is None or s.tool_error is not None or order.invasiveness < INVASIVE:
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
