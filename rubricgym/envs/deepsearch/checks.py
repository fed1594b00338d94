"""The deep search env's named checks, its default rubric and per-task CaRR rubrics.

Every check is a pure function of a finished trajectory: it reads the task's hidden chain and each step's typed
record (``records.py``: search results, opened windows, find matches), never a live env or a raw info key.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from rubricgym.core.checks import NamedCheck, check
from rubricgym.core.types import CheckResult, Step, Trajectory
from rubricgym.envs.deepsearch import carr
from rubricgym.envs.deepsearch.records import RECORDS, Open, Search

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


def _searches(traj: Trajectory, before: int | None = None) -> list[tuple[Step, Search]]:
    return RECORDS.each(traj.steps if before is None else traj.steps[:before], Search)


def _opened(traj: Trajectory, before: int | None = None) -> set[str]:
    return {r.url for _, r in RECORDS.each(traj.steps if before is None else traj.steps[:before], Open)}


@check("outcome_correct", description="The stated answer matches the gold answer or an alias.")
def outcome_correct(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    _, at = answer_of(traj)
    return CheckResult.of(
        p["correct"],
        f"answered {p['answer']!r}, expected {traj.task.hidden.get('answer')!r}",
        [at] if at < len(traj.steps) else [],
    )


@check(
    "carr_rubric",
    description="The rubric reward C-GRPO mixes: half CaRR's chain (statements supported by cited seen content "
    "and connected to the answer entity), half the share of statements whose evidence the agent saw.",
)
def carr_rubric(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    rows = p["statements"]
    n_ok = sum(r["reachable"] for r in rows)
    return CheckResult(
        score=p["rubric"],
        met=bool(rows) and n_ok == len(rows),
        rationale=f"{n_ok}/{len(rows)} statements supported and reachable from E0; {len(p['cited'])} page(s) "
        f"cited; evidence seen for {p['evidence']:.0%} of them",
        details={
            "chain": p["chain"],
            "evidence": p["evidence"],
            "statements": rows,
            "cited": p["cited"],
            "identified": p["identified"],
            "unseen_cited": p["unseen_cited"],
        },
    )


@check("c_grpo", description="C-GRPO reward: the outcome if wrong, else (1-α)·outcome + α·R_rubric (α=0.3).")
def c_grpo(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    return CheckResult(
        score=p["c_grpo"],
        met=p["correct"],
        rationale=f"outcome {p['outcome']:g}, R_rubric {p['rubric']:.3f} -> {p['c_grpo']:.3f}",
        details={"outcome": p["outcome"], "rubric": p["rubric"], "alpha": carr.ALPHA},
    )


@check("answered", description="The episode ended with an answer.")
def answered(traj: Trajectory, step: int | None = None) -> CheckResult:
    text, at = answer_of(traj)
    return CheckResult.of(
        text is not None, "answered" if text is not None else "never answered", [at] if text is not None else []
    )


@check(
    "hops_searched",
    description="Each entity of the question's chain (not the answer) was searched for before "
    "answering: named in a query, or its page among the results and then opened.",
)
def hops_searched(traj: Trajectory, step: int | None = None) -> CheckResult:
    _, at = answer_of(traj)
    searches = _searches(traj, at)
    ents = {k: v for k, v in traj.task.hidden.get("entities", {}).items() if k != "E0"}
    if not ents:
        return _question_terms_searched(traj, searches)
    opened = _opened(traj, at)
    missing, evidence = [], set()
    for eid, e in sorted(ents.items()):
        names = [n for n in [e.get("name"), *e.get("aliases", [])] if n]
        url = e.get("url")
        hit = [
            s.index
            for s, search in searches
            if any(carr.mentions(search.query, n) for n in names)
            or url in opened
            and any(r.url == url for r in search.results if url)
        ]
        if hit:
            evidence.add(hit[0])
        else:
            missing.append(eid)
    score = 1 - len(missing) / len(ents)
    return CheckResult(
        score=score,
        met=not missing,
        evidence=sorted(evidence),
        rationale="every entity searched" if not missing else f"never searched: {', '.join(missing)}",
    )


def _question_terms_searched(traj: Trajectory, searches: list[tuple[Step, Search]]) -> CheckResult:
    """A question whose chain names no entity but the answer: the share of its key words the searches used."""
    question = traj.task.hidden.get("question") or traj.task.prompt
    answer = carr.normalize(" ".join([traj.task.hidden.get("answer", ""), *traj.task.hidden.get("aliases", [])]))
    terms = carr.content_words(question) - set(answer.split())
    if not terms:
        return CheckResult.of(bool(searches), f"{len(searches)} search(es); the question has no key words")
    used: set[str] = set()
    evidence = []
    for s, search in searches:
        new = carr.content_words(search.query) & terms - used
        if new:
            used |= new
            evidence.append(s.index)
    score = len(used) / len(terms)
    return CheckResult(
        score=score,
        met=score >= carr.LEXICAL_RECALL,
        evidence=evidence,
        rationale=f"searched {len(used)}/{len(terms)} key words of the question"
        + (f"; never: {', '.join(sorted(terms - used)[:8])}" if terms - used else ""),
    )


@check("cited_pages_opened", description="Every cited page was opened before it was cited.")
def cited_pages_opened(traj: Trajectory, step: int | None = None) -> CheckResult:
    text, at = answer_of(traj)
    cited = carr.cited_urls(text or "")
    if not cited:
        return CheckResult.of(False, "no citations")
    opened = _opened(traj, at)
    missing = [u for u in cited if u not in opened]
    return CheckResult(
        score=1 - len(missing) / len(cited),
        met=not missing,
        rationale="all cited pages opened" if not missing else f"cited but never opened: {missing}",
        evidence=[at] if at < len(traj.steps) else [],
    )


@check("no_unseen_citations", description="No cited page is one the agent never saw (pitfall, phrased positively).")
def no_unseen_citations(traj: Trajectory, step: int | None = None) -> CheckResult:
    p = parts(traj)
    unseen, cited = p["unseen_cited"], p["cited"]
    score = 1.0 if not cited else 1 - len(unseen) / len(cited)
    return CheckResult(
        score=score, met=not unseen, rationale="no unseen page cited" if not unseen else f"cited unseen pages: {unseen}"
    )


@check("no_repeated_searches", description="No identical search was repeated.")
def no_repeated_searches(traj: Trajectory, step: int | None = None) -> CheckResult:
    searches = _searches(traj)
    seen: set[tuple[str, int]] = set()
    repeats = []
    for s, search in searches:
        key = (" ".join(search.query.casefold().split()), search.k)
        if key in seen:
            repeats.append(s.index)
        seen.add(key)
    score = 1.0 if not searches else 1 - len(repeats) / len(searches)
    return CheckResult(
        score=score, met=not repeats, evidence=repeats, rationale=f"{len(repeats)} repeated of {len(searches)} searches"
    )


@check("step_valid", scope="step", description="This step's action was a well-formed tool call that ran.")
def step_valid(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = traj.steps[step or 0]
    reason = s.action.parse_error or s.tool_error
    return CheckResult.of(reason is None, reason or "valid call", [s.index])


@check(
    "step_new_evidence",
    scope="step",
    description="This step showed the agent a supporting sentence of a rubric statement it had not seen yet.",
)
def step_new_evidence(traj: Trajectory, step: int | None = None) -> CheckResult:
    s = traj.steps[step or 0]
    before = carr.seen_by_url(traj.steps[: s.index])
    now = carr.seen_by_url([s])
    new = []
    for st in traj.task.hidden.get("statements", []):
        for ev in st.get("evidence", []):
            if carr.contains_sentence(now.get(ev["url"], ""), ev["text"]) and not carr.contains_sentence(
                before.get(ev["url"], ""), ev["text"]
            ):
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
        why = (
            f"entities not identified: {unfilled}"
            if unfilled
            else f"supported by {r['via']}"
            if r["supported"]
            else "no cited content the agent saw supports it"
        )
        return CheckResult.of(r["supported"], f"{r['text']}: {why}", details=r)

    return check(
        f"statement_{k}",
        description=f"Rubric statement {k} of the task is identified and supported by cited content the agent saw.",
    )(fn)


ALL: dict[str, NamedCheck] = {
    c.name: c
    for c in (
        outcome_correct,
        carr_rubric,
        c_grpo,
        answered,
        hops_searched,
        cited_pages_opened,
        no_unseen_citations,
        no_repeated_searches,
        step_valid,
        step_new_evidence,
        *(_statement_check(k) for k in range(1, MAX_STATEMENTS + 1)),
    )
}

RUBRIC_FILE = Path(__file__).with_name("rubric.yaml")
DEFAULT_RUBRIC: dict[str, Any] = yaml.safe_load(RUBRIC_FILE.read_text(encoding="utf-8"))
_BY_ID = {c["id"]: c for c in DEFAULT_RUBRIC["criteria"]}
_OUTCOME = _BY_ID["outcome_correct"]
_PROCESS = [c for c in DEFAULT_RUBRIC["criteria"] if c["id"] not in ("outcome_correct", "carr_rubric")]


def task_rubric(task_id: str, hidden: dict[str, Any]) -> dict[str, Any] | None:
    """A task's own CaRR rubric: one criterion per statement (with its entities) plus outcome and process.

    A task without statements has no rubric of its own: the env's default rubric (whose ``carr_rubric`` check
    derives the chain from the answer, see ``carr.derived_statements``) scores it exactly as the env rewards it.
    Either way the total is gated by correctness (C-GRPO): a wrong answer scores 0. The statements' criteria say
    which are supported; the chain and the evidence seen are scored by the ``carr_rubric`` check, so the task
    rubric's total is the env's reward.
    """
    statements = hidden.get("statements", [])[:MAX_STATEMENTS]
    if not statements:
        return None
    crits = [
        {
            "id": st.get("id") or f"S{k}",
            "text": st["text"],
            "level": "essential",
            "scope": "trajectory",
            "stage": "answer",
            "check": f"statement_{k}",
            "entities": list(st["entities"]),
        }
        for k, st in enumerate(statements, 1)
    ]
    return {
        "id": f"deepsearch/{task_id}",
        "version": "1",
        "criteria": copy.deepcopy([_OUTCOME, *crits, *_PROCESS]),
        "aggregation": {
            "method": "carr",
            "alpha": carr.ALPHA,
            "outcome_check": "outcome_correct",
            "rubric_check": "carr_rubric",
        },
    }
