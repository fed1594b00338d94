"""LLM versions of the CaRR steps, for real corpora where names and sentences do not match verbatim.

``llm_score`` follows CaRR with an OpenAI-compatible endpoint as the grader: (1) the outcome, exact/alias match
first and the LLM only when that fails; (2) the identity of each hidden entity as the answer states it
(references stripped); (3) for each statement whose entities are all identified, whether the content the agent
actually saw of its cited pages fully supports it; (4) BFS connectivity, the evidence read (``carr.evidence_seen``)
and C-GRPO with the same pure functions as the programmatic path. An endpoint failure or an unreadable reply is an
error value, never a zero score.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rubricgym.core.llm import ChatClient, EndpointError
from rubricgym.core.types import Trajectory
from rubricgym.envs.deepsearch import carr
from rubricgym.envs.deepsearch.checks import answer_of
from rubricgym.rewards.aggregate import c_grpo_reward, carr_rubric_reward

MAX_CONTENT_CHARS = 8000
_JSON = re.compile(r"\{.*\}", re.DOTALL)

OUTCOME_PROMPT = """Question: {question}
Gold answer: {gold} (also accepted: {aliases})
Response's answer: {answer}
Does the response's answer name the same entity as the gold answer? Reply with JSON only: {{"correct": true}} or
{{"correct": false}}."""

IDENTIFY_PROMPT = """A response answered a question. The question's hidden entities are described by these
statements, where <E0> is the answer and <E1>, <E2>, ... are intermediate entities:
{statements}

Response (references removed):
{response}

For each entity, give the name the response states for it, or null if the response does not identify it.
Reply with JSON only, e.g. {{"E0": "name", "E1": null}}."""

SUPPORT_PROMPT = """Statement: {statement}

Content the reader saw on the pages cited for it:
{content}

Is the statement fully supported by this content alone (every part of it stated or directly implied)?
Reply with JSON only: {{"supported": true}} or {{"supported": false}}."""


class GradeError(RuntimeError):
    """The grader's reply could not be used."""


async def _ask(client: ChatClient, prompt: str) -> dict[str, Any]:
    result = await client.chat([{"role": "user", "content": prompt}], temperature=0.0, max_tokens=300)
    text = result.message.content or ""
    m = _JSON.search(text)
    if m is None:
        raise GradeError(f"the grader replied without a JSON object: {text[:120]!r}")
    try:
        data = json.loads(m.group(0))
    except json.JSONDecodeError as e:
        raise GradeError(f"the grader's JSON is invalid ({e.msg}): {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise GradeError(f"the grader's JSON is not an object: {text[:120]!r}")
    return data


def _flag(data: dict[str, Any], key: str) -> bool:
    value = data.get(key)
    if not isinstance(value, bool):
        raise GradeError(f"the grader's reply has no boolean {key!r}: {json.dumps(data)[:120]}")
    return value


async def llm_outcome(client: ChatClient, question: str, hidden: dict[str, Any], answer: str) -> bool:
    """Whether ``answer`` names the gold entity: exact/alias match, else the grader's judgement."""
    names = [hidden.get("answer", ""), *hidden.get("aliases", [])]
    if carr.outcome_match(answer, [n for n in names if n], hidden.get("confusable", [])):
        return True
    if not answer.strip():
        return False
    prompt = OUTCOME_PROMPT.format(
        question=question,
        gold=hidden.get("answer"),
        aliases=", ".join(hidden.get("aliases", [])) or "none",
        answer=answer,
    )
    return _flag(await _ask(client, prompt), "correct")


async def llm_score(client: ChatClient, trajectory: Trajectory, alpha: float = carr.ALPHA) -> dict[str, Any]:
    """CaRR outcome, R_rubric and C-GRPO of ``trajectory`` with an LLM grader; ``error`` is set on failure."""
    hidden = trajectory.task.hidden
    text, at = answer_of(trajectory)
    out: dict[str, Any] = {
        "correct": False,
        "outcome": 0.0,
        "rubric": 0.0,
        "c_grpo": 0.0,
        "statements": [],
        "error": None,
    }
    if text is None:
        return out
    try:
        answer = carr.answer_line(text)
        correct = await llm_outcome(client, trajectory.task.prompt, hidden, answer)
        statements = hidden.get("statements", [])
        listing = "\n".join(f"- {st['text']}" for st in statements) or "- <E0> is the answer"
        ids = await _ask(client, IDENTIFY_PROMPT.format(statements=listing, response=carr.strip_references(text)))
        names = {k: v for k, v in ids.items() if isinstance(v, str) and v.strip()}
        filled = {eid: (correct if eid == "E0" else eid in names) for eid in hidden.get("entities", {"E0": {}})}
        names["E0"] = answer
        cited = carr.cited_urls(text)
        seen = carr.seen_by_url(trajectory.steps[:at])
        content = "\n\n".join(f"[{u}]\n{seen[u]}" for u in cited if u in seen)[:MAX_CONTENT_CHARS]
        rows = []
        for st in statements:
            ok = all(filled.get(e, False) for e in st["entities"]) and bool(content)
            if ok:
                prompt = SUPPORT_PROMPT.format(statement=carr.fill(st["text"], names), content=content)
                ok = _flag(await _ask(client, prompt), "supported")
            rows.append({"id": st.get("id"), "text": st["text"], "entities": list(st["entities"]), "supported": ok})
    except (EndpointError, GradeError) as e:  # no score: a grader failure must not read as a bad answer
        out.update(correct=None, outcome=None, rubric=None, c_grpo=None, error=f"{type(e).__name__}: {e}")
        return out
    chain = carr_rubric_reward([r["entities"] for r in rows], [r["supported"] for r in rows]) if rows else 0.0
    evidence = carr.evidence_seen(hidden, rows, carr.read_by_url(trajectory.steps[:at])) if correct else 0.0
    rubric = (1 - carr.EVIDENCE_WEIGHT) * chain + carr.EVIDENCE_WEIGHT * evidence
    outcome = 1.0 if correct else 0.0
    out.update(
        correct=correct,
        outcome=outcome,
        rubric=rubric,
        chain=chain,
        evidence=evidence,
        statements=rows,
        identified=filled,
        c_grpo=c_grpo_reward(outcome, rubric, alpha) if rows else outcome,
    )
    return out
