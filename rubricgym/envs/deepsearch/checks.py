"""The deep search env's named checks, its default rubric and per-task CaRR rubrics.

Every check is a pure function of a finished trajectory: it reads the task's hidden chain and what each step
recorded in ``Step.info`` (search results, opened windows, find matches), never a live env.
"""

from __future__ import annotations

from typing import Any

from rubricgym.core.checks import NamedCheck, check
from rubricgym.core.types import CheckResult, Step, Trajectory
from rubricgym.envs.deepsearch import carr

MAX_STATEMENTS = 24


def answer_of(traj: Trajectory) -> tuple[str | None, int]:
    """The text of the successful answer call and its step index (``None, len(steps)`` if none)."""
    for s in reversed(traj.steps):
        call = s.action.tool_call
        if call is not None and call.name == "answer" and s.action.parse_error is None and s.tool_error is None:
            return str(call.arguments.get("text", "")), s.index
    return None, len(traj.steps)


def parts(traj: Trajectory) -> dict[str, Any]:
    """``carr.score`` of the trajectory's answer given the steps before it."""
    text, at = answer_of(traj)
    return carr.score(traj.task.hidden, text, traj.steps[:at])


def _calls(traj: Trajectory, tool: str, before: int | None = None) -> list[Step]:
    steps = traj.steps if before is None else traj.steps[:before]
    return [s for s in steps if s.info.get("tool") == tool and s.tool_error is None]


@check("outcome_correct", description="The stated answer matches the gold answer or an alias.")
def outcome_correct(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    _, at = answer_of(traj)
    return CheckResult.of(p["correct"], f"answered {p['answer']!r}, expected {traj.task.hidden.get('answer')!r}",
                          [at] if at < len(traj.steps) else [])


@check("carr_rubric", description="CaRR R_rubric: share of statements supported by cited seen content and "
                                  "connected to the answer entity.")
def carr_rubric(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    rows = p["statements"]
    n_ok = sum(r["reachable"] for r in rows)
    return CheckResult(score=p["rubric"], met=bool(rows) and n_ok == len(rows),
                       rationale=f"{n_ok}/{len(rows)} statements supported and reachable from E0; "
                                 f"{len(p['cited'])} page(s) cited",
                       details={"statements": rows, "cited": p["cited"], "identified": p["identified"],
                                "unseen_cited": p["unseen_cited"]})


@check("c_grpo", description="C-GRPO reward: the outcome if wrong, else (1-α)·outcome + α·R_rubric (α=0.3).")
def c_grpo(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    return CheckResult(score=p["c_grpo"], met=p["correct"],
                       rationale=f"outcome {p['outcome']:g}, R_rubric {p['rubric']:.3f} -> {p['c_grpo']:.3f}",
                       details={"outcome": p["outcome"], "rubric": p["rubric"], "alpha": carr.ALPHA})


@check("answered", description="The episode ended with an answer.")
def answered(traj: Trajectory, step: int | None = None) -> CheckResult:
    text, at = answer_of(traj)
    return CheckResult.of(text is not None, "answered" if text is not None else "never answered",
                          [at] if text is not None else [])


@check("hops_searched", description="Each entity of the chain was searched for (named in a query, or its page "
                                    "among the results) before answering.")
def hops_searched(traj: Trajectory, step: int | None = None) -> CheckResult:
    _, at = answer_of(traj)
    searches = _calls(traj, "search", at)
    ents = traj.task.hidden.get("entities", {})
    if not ents:
        return CheckResult.of(bool(searches), f"{len(searches)} search(es); the task names no hidden entities")
    missing, evidence = [], set()
    for eid, e in sorted(ents.items()):
        names = [n for n in [e.get("name"), *e.get("aliases", [])] if n]
        hit = [s.index for s in searches if any(carr.mentions(str(s.info.get("query", "")), n) for n in names)
               or any(r.get("url") == e.get("url") for r in s.info.get("results", []) if e.get("url"))]
        if hit:
            evidence.add(hit[0])
        else:
            missing.append(eid)
    score = 1 - len(missing) / len(ents)
    return CheckResult(score=score, met=not missing, evidence=sorted(evidence),
                       rationale="every entity searched" if not missing else f"never searched: {', '.join(missing)}")


@check("cited_pages_opened", description="Every cited page was opened before it was cited.")
def cited_pages_opened(traj: Trajectory, step: int | None = None) -> CheckResult:
    text, at = answer_of(traj)
    cited = carr.cited_urls(text or "")
    if not cited:
        return CheckResult.of(False, "no citations")
    opened = {s.info.get("url") for s in _calls(traj, "open", at)}
    missing = [u for u in cited if u not in opened]
    return CheckResult(score=1 - len(missing) / len(cited), met=not missing,
                       rationale="all cited pages opened" if not missing else f"cited but never opened: {missing}",
                       evidence=[at] if at < len(traj.steps) else [])


@check("no_unseen_citations", description="No cited page is one the agent never saw (pitfall, phrased positively).")
def no_unseen_citations(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    unseen, cited = p["unseen_cited"], p["cited"]
    score = 1.0 if not cited else 1 - len(unseen) / len(cited)
    return CheckResult(score=score, met=not unseen,
                       rationale="no unseen page cited" if not unseen else f"cited unseen pages: {unseen}")


@check("no_repeated_searches", description="No identical search was repeated.")
def no_repeated_searches(traj: Trajectory, step: int | None = None) -> CheckResult:
    searches = _calls(traj, "search")
    seen: set[tuple[str, int]] = set()
    repeats = []
    for s in searches:
        key = (" ".join(str(s.info.get("query", "")).casefold().split()), int(s.info.get("k", 5)))
        if key in seen:
            repeats.append(s.index)
        seen.add(key)
    score = 1.0 if not searches else 1 - len(repeats) / len(searches)
    return CheckResult(score=score, met=not repeats, evidence=repeats,
                       rationale=f"{len(repeats)} repeated of {len(searches)} searches")


@check("step_valid", scope="step", description="This step's action was a well-formed tool call that ran.")
def step_valid(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = traj.steps[step or 0]
    reason = s.action.parse_error or s.tool_error
    return CheckResult.of(reason is None, reason or "valid call", [s.index])


@check("step_new_evidence", scope="step",
       description="This step showed the agent a supporting sentence of a rubric statement it had not seen yet.")
def step_new_evidence(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = traj.steps[step or 0]
    before = carr.seen_by_url(traj.steps[: s.index])
    now = carr.seen_by_url([s])
    new = []
    for st in traj.task.hidden.get("statements", []):
        for ev in st.get("evidence", []):
            if carr.contains_sentence(now.get(ev["url"], ""), ev["text"]) and not carr.contains_sentence(
                    before.get(ev["url"], ""), ev["text"]):
                new.append(st.get("id"))
                break
    return CheckResult.of(bool(new), f"new evidence for {new}" if new else "no new evidence", [s.index])


def _statement_check(k: int) -> NamedCheck:
    def fn(traj: Trajectory, step: int | None = None) -> CheckResult:
        rows = parts(traj)["statements"]
        if k > len(rows):
            return CheckResult.of(False, f"the task has {len(rows)} statements, not {k}")
        r = rows[k - 1]
        unfilled = [e for e, ok in r["filled"].items() if not ok]
        why = (f"entities not identified: {unfilled}" if unfilled else
               f"supported by {r['via']}" if r["supported"] else "no cited content the agent saw supports it")
        return CheckResult.of(r["supported"], f"{r['text']}: {why}", details=r)

    return check(f"statement_{k}", description=f"Rubric statement {k} of the task is identified and supported "
                                                 "by cited content the agent saw.")(fn)


ALL: dict[str, NamedCheck] = {c.name: c for c in (
    outcome_correct, carr_rubric, c_grpo, answered, hops_searched, cited_pages_opened, no_unseen_citations,
    no_repeated_searches, step_valid, step_new_evidence, *(_statement_check(k) for k in range(1, MAX_STATEMENTS + 1)),
)}

_PROCESS = [
    {"id": "hops_searched", "text": "Searches for every entity of the chain.", "level": "important",
     "scope": "trajectory", "stage": "gather", "check": "hops_searched"},
    {"id": "cited_opened", "text": "Opens every page before citing it.", "level": "important",
     "scope": "trajectory", "stage": "answer", "check": "cited_pages_opened"},
    {"id": "no_unseen_citations", "text": "Cites no page it never saw.", "level": "pitfall",
     "scope": "trajectory", "stage": "answer", "check": "no_unseen_citations", "applies_if": "answered"},
    {"id": "no_repeated_searches", "text": "Does not repeat an identical search.", "level": "pitfall",
     "scope": "trajectory", "stage": "gather", "check": "no_repeated_searches", "applies_if": "tool:search"},
    {"id": "valid_step", "text": "The step is a valid tool call.", "level": "optional", "scope": "step",
     "check": "step_valid"},
    {"id": "new_evidence", "text": "The step finds evidence for a statement not seen before.", "level": "optional",
     "scope": "step", "stage": "gather", "check": "step_new_evidence"},
]
_OUTCOME = {"id": "outcome_correct", "text": "The final answer is correct.", "level": "essential",
            "scope": "trajectory", "stage": "answer", "check": "outcome_correct"}

DEFAULT_RUBRIC: dict[str, Any] = {
    "id": "deepsearch",
    "version": "2",
    "criteria": [
        _OUTCOME,
        {"id": "carr_rubric", "text": "The answer's facts are supported by cited pages the agent read and connect "
                                      "the answer to every constraint of the question.",
         "level": "important", "scope": "trajectory", "stage": "answer", "check": "carr_rubric"},
        *_PROCESS,
    ],
    "aggregation": {"method": "carr", "alpha": carr.ALPHA, "outcome_check": "outcome_correct",
                    "rubric_check": "carr_rubric"},
}


def task_rubric(task_id: str, hidden: dict[str, Any]) -> dict[str, Any]:
    """A task's own CaRR rubric: one criterion per statement (with its entities) plus outcome and process."""
    statements = hidden.get("statements", [])[:MAX_STATEMENTS]
    crits = [{"id": st.get("id") or f"S{k}", "text": st["text"], "level": "essential", "scope": "trajectory",
              "stage": "answer", "check": f"statement_{k}", "entities": list(st["entities"])}
             for k, st in enumerate(statements, 1)]
    return {"id": f"deepsearch/{task_id}", "version": "1", "criteria": [_OUTCOME, *crits, *_PROCESS],
            "aggregation": {"method": "carr" if crits else "rar", "alpha": carr.ALPHA,
                            "outcome_check": "outcome_correct"}}
