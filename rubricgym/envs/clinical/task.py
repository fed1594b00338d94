"""One case as a ``Task``: what the agent is shown, what it is scored on, and the rubric that scores it.

The prompt and ``params["case"]`` carry only the case's public fields; the fields that say the answer
(``visibility.SECRET_CASE_FIELDS``) and the scoring facts (``cases.scoring_facts``) travel in ``hidden``. A case's
free-text physician items become LLM-judged criteria over the env's default rubric.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from rubricgym.core.rubric import Rubric
from rubricgym.core.types import Task
from rubricgym.envs.clinical.case import CaseRecord
from rubricgym.envs.clinical.cases import scoring_facts
from rubricgym.envs.clinical.visibility import SECRET_CASE_FIELDS, article, opaque_id

if TYPE_CHECKING:
    from rubricgym.envs.clinical.env import ClinicalEnv

REASONING_JUDGE = (
    "Read the results and findings the agent obtained and its final diagnosis with its reasoning. Met if the "
    "reasoning only relies on results and findings that were actually obtained, accounts for the abnormal ones, "
    "and the diagnosis follows from them; unmet if it cites results never obtained, ignores a result that "
    "contradicts the diagnosis, or gives no reasoning."
)


HELDOUT_PRESENTATION_SHARE = 4
"""One patient presentation in ``HELDOUT_PRESENTATION_SHARE`` (by a stable hash of its text) is held out."""


def presentation(case: CaseRecord) -> str:
    """What the prompt says of the patient: "A 47-year-old woman presents with palpitations."."""
    p = case.profile
    return f"{article(p.age)} {p.describe()} presents with {case.complaint}."


def heldout_presentation(case: CaseRecord) -> bool:
    """Whether the case's presentation is one only held-out tasks show (never a training prompt word for word).

    Presentations are short (age, sex, history, complaint) and recur: without this, 5 of the demo's 16 held-out
    cardiology prompts were training prompts word for word. A stable hash (not Python's salted ``hash``).
    """
    digest = hashlib.sha1(f"clinical-v0|presentation|{presentation(case)}".encode()).hexdigest()
    return int(digest[:8], 16) % HELDOUT_PRESENTATION_SHARE == 0


def case_task(env: ClinicalEnv, case: CaseRecord, split: str = "train") -> Task:
    """The task of one case (synthetic or real) in ``env`` (its knowledge base, overlay, turn budget, rubric)."""
    prompt = (
        f"{presentation(case)} You have at most {env.max_steps} "
        "turns; commit to a diagnosis with the diagnose tool before they run out."
    )
    record = case.model_dump(exclude_defaults=True)
    params: dict[str, Any] = {"case": {k: v for k, v in record.items() if k not in SECRET_CASE_FIELDS}}
    if env.kb_path:
        params["kb"] = env.kb_path
    if env.overlay_path:
        params["kb_overlay"] = env.overlay_path
    hidden = scoring_facts(env.kb, case)
    hidden["case_id"] = case.id
    if env.label_space:
        hidden["label_space"] = list(env.label_space)
    hidden["case_record"] = {k: v for k, v in record.items() if k in SECRET_CASE_FIELDS}
    return Task(
        id=opaque_id(case.id),
        env_id=env.env_id,
        split=split,
        prompt=prompt,
        params=params,
        hidden=hidden,
        rubric=case_rubric(env, case),
    )


def case_rubric(env: ClinicalEnv, case: CaseRecord) -> dict[str, Any] | None:
    """The default rubric plus the case's free-text physician items as LLM-judged criteria (None if none)."""
    judged = [r for r in case.rubric if r.kind == "judge"]
    if not judged:
        return None
    rubric = env.default_rubric().model_dump(exclude_none=True)
    rubric["id"] = f"{rubric['id']}+{case.id}"
    rubric["criteria"] += [
        {"id": f"case_item_{i}", "text": r.text, "weight": r.weight, "judge": r.text} for i, r in enumerate(judged)
    ]
    return rubric


def reasoning_judged(default: Rubric) -> dict[str, Any]:
    """``default`` with its reasoning criterion judged by an LLM (``REASONING_JUDGE``) instead of its check."""
    rubric = default.model_dump(exclude_none=True)
    for c in rubric["criteria"]:
        if c["id"] == "reasoning":
            c.pop("check")
            c["judge"] = REASONING_JUDGE
    return rubric
