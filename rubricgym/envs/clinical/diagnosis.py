"""Reading a committed diagnosis against the case: which condition it names, which can't-miss differentials the
agent considered or excluded, and which exams its reasoning cites (the inputs of ``diagnose``'s info and checks)."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from rubricgym.core.tools import ToolError
from rubricgym.envs.clinical.matching import _ICD, NameIndex, fold
from rubricgym.envs.clinical.patient import analyte_index, condition_index
from rubricgym.envs.clinical.schema import KnowledgeBase

PRIMARY_END = re.compile(
    r"[;,\n/(\[?]| - | or | vs\.? | versus | with | secondary to | due to | complicated by | and | plus ",
    re.IGNORECASE,
)
"""Where a diagnosis's primary clause ends: what follows is a qualifier, a cause or an alternative."""


def primary_clause(text: str) -> str:
    """The committed diagnosis of ``text``: its first clause ("Inferior STEMI" of "Inferior STEMI; consider PE")."""
    return PRIMARY_END.split(f" {text.strip()} ", maxsplit=1)[0].strip()


def match_diagnosis(kb: KnowledgeBase, facts: dict[str, Any], text: str) -> str | None:
    """``"case"`` when the primary clause of ``text`` names the case's diagnosis and no other condition (aliases
    and ICD-10 aware); else the one KB condition it names, ``"several"`` when it names more than one, or None.

    Only the primary clause counts: a string listing every condition commits to none of them, and alternatives
    belong in the ``differential`` field, which is scored as such."""
    primary = primary_clause(text) or text
    index = condition_index(kb)
    d = facts.get("diagnosis", {})
    names = [n for n in [d.get("name", ""), *d.get("aliases", [])] if n]
    own = facts.get("condition")
    same = {own} | {index.names.get(fold(n)) for n in names}
    case_index = NameIndex([("case", names, d.get("icd10"))], id_is_name=False)
    hits = {i for _, _, i in index.contained(primary)} | {
        index.codes[c.replace(".", "")] for c in _ICD.findall(primary.upper()) if c.replace(".", "") in index.codes
    }
    case_codes = {c.replace(".", "") for c in _ICD.findall(primary.upper())} & set(case_index.codes)
    named_case = bool(case_index.contained(primary)) or bool(case_codes) or (own is not None and own in hits)
    if not hits and not named_case:  # a typo of one name: the closest, as before
        hit = index.resolve(primary)
        hits = {hit} if hit else set()
        named_case = case_index.resolve(primary) == "case" or (own is not None and hit == own)
    others = hits - same
    if named_case and not others:
        return "case"
    if len(others) > 1 or (named_case and others):
        return "several"
    return next(iter(others), None)


MAX_CONSIDERED = 6
"""The most conditions a differential (with the impressions and reasoning) may name and still count as
considered; a longer list is a shotgun, not a differential."""


def considered_conditions(
    kb: KnowledgeBase, facts: dict[str, Any], ordered: Collection[str], texts: list[str]
) -> list[str]:
    """The case's can't-miss conditions that ``texts`` name, or whose key exams were ``ordered`` (excluded).

    Texts naming more than ``MAX_CONSIDERED`` conditions in all count for nothing (only the exclusions)."""
    index = condition_index(kb)
    named = {i for t in set(texts) if t for _, _, i in index.contained(t)}
    if len(named) > MAX_CONSIDERED:  # a list of everything considers nothing: only exclusions by exam count
        texts, named = [], set()
    ids = named
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


def impression_fit(kb: KnowledgeBase, facts: dict[str, Any], impression: str, covered: Collection[str]) -> bool:
    """Whether an order follows from its stated impression: the impression names a condition (of the knowledge
    base, or the case's own diagnosis) and the exam, or a panel reporting it (``covered``: the exam id and its
    analytes), is one of that condition's key exams or a bedside basic. "unsure" justifies nothing."""
    named = {i for _, _, i in condition_index(kb).contained(impression)}
    wanted = {k for c in named if c in kb.conditions for k in kb.conditions[c].key_exams}
    d = facts.get("diagnosis", {})
    case_index = NameIndex(
        [("case", [n for n in [d.get("name", ""), *d.get("aliases", [])] if n], None)], id_is_name=False
    )
    if case_index.contained(impression) or facts.get("condition") in named:
        named.add("case")
        wanted |= set(facts.get("key_exams", []))
    wanted |= {"vitals", "spo2", "bedside_glucose"}
    return bool(named) and bool(wanted & set(covered))
