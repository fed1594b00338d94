"""Reading a committed diagnosis against the case: which condition it names, which can't-miss differentials the
agent considered or excluded, and which exams its reasoning cites (the inputs of ``diagnose``'s info and checks)."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from rubricgym.core.tools import ToolError
from rubricgym.envs.clinical.matching import NameIndex, fold
from rubricgym.envs.clinical.patient import analyte_index, condition_index
from rubricgym.envs.clinical.schema import KnowledgeBase


def match_diagnosis(kb: KnowledgeBase, facts: dict[str, Any], text: str) -> str | None:
    """``"case"`` when the text names the case's diagnosis (aliases and ICD-10 aware), else the KB id or None."""
    own = facts.get("condition")
    hit = condition_index(kb).resolve(text)
    if own is not None and hit == own:
        return "case"
    d = facts.get("diagnosis", {})
    case_names = NameIndex([("case", [d.get("name", ""), *d.get("aliases", [])], d.get("icd10"))])
    if case_names.resolve(text) == "case" and (hit is None or own is None or hit == own):
        return "case"
    return hit


def considered_conditions(
    kb: KnowledgeBase, facts: dict[str, Any], ordered: Collection[str], texts: list[str]
) -> list[str]:
    """The case's can't-miss conditions that ``texts`` name, or whose key exams were ``ordered`` (excluded)."""
    index = condition_index(kb)
    ids = {i for t in set(texts) if t for _, _, i in index.contained(t)}
    blob = " ".join(f" {fold(t)} " for t in texts if t)
    out = []
    for item in facts.get("cant_miss", []):
        names = [item["name"], *item.get("aliases", [])]
        excluded = any(k in ordered for k in item.get("key_exams", []))
        if item["id"] in ids or excluded or any(f" {fold(n)} " in blob for n in names):
            out.append(item["id"])
    return out


def cited_exams(kb: KnowledgeBase, reason: str) -> list[str]:
    """The exams and analytes ``reason`` names."""
    return sorted({i for _, _, i in analyte_index(kb).contained(reason)})


def differential_list(value: Any) -> list[str]:
    """A differential given as a list, or as one string separated by commas, semicolons or lines."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [p.strip() for p in re.split(r"[;,\n]", value) if p.strip()]
    if isinstance(value, list):
        return [str(v) for v in value if v is not None and str(v).strip()]
    raise ToolError('differential must be a list of diagnoses, e.g. ["pulmonary embolism", "pericarditis"]')
