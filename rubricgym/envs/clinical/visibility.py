"""What a clinical task shows and what it hides: the case fields that say the answer, opaque task ids, the secrets
the leak audit scans for, and how a chart names the patient."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from rubricgym.core.leaves import leaves
from rubricgym.core.types import Task
from rubricgym.envs.clinical.matching import fold
from rubricgym.envs.clinical.overlay import kb_with_overlay

SECRET_CASE_FIELDS = frozenset(
    {"id", "diagnosis", "condition", "key_exams", "differential", "cant_miss", "rubric", "results"}
)
"""Fields of a case record that say the answer: they travel in ``Task.hidden``, never in ``params`` (which a
remote client can read) or the id. A real case's ``results`` are among them: the tests a case has results for
are mostly the ones that settle it (its key exams), and the agent sees a result only by ordering the test."""


@functools.lru_cache(maxsize=16)
def _exam_names(kb: str | None, overlay: str | None) -> str:
    """Every exam name and alias of the catalogue, folded, space-separated and padded (for substring tests)."""
    names = [n for e in kb_with_overlay(kb, overlay).exams.values() for n in (e.name, *e.aliases)]
    return " " + " | ".join(fold(n) for n in names) + " "


def has_overlay(cases: str) -> bool:
    """Whether a cases file carries a ``kb_overlay`` line (read before its cases, so they can use its exams);
    read once per file version, as the cases are (an env is built per episode)."""
    path = Path(cases).expanduser()
    return path.is_file() and _has_overlay(path.resolve(), path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _has_overlay(path: Path, stamp: int) -> bool:
    return b'"kb_overlay"' in path.read_bytes()


def article(number: int) -> str:
    """ "An" before a number said with a vowel first (8, 11, 18, 80-89), else "A"."""
    return "An" if str(number).startswith("8") or number in (11, 18) else "A"


def opaque_id(case_id: str) -> str:
    """A task id that names the case without saying anything about it (a case's own id often names the
    diagnosis): deterministic, and distinct for distinct case ids."""
    return "case-" + hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:16]


def case_secrets(task: Task) -> list[tuple[str, Any]]:
    """The diagnosis (name, aliases, ICD-10 code, KB condition), the case's own id, the key exams and the
    can't-miss conditions; the rubric's wording and the rule-out lists are derived from these. A name that the
    exam catalogue or the case's own findings use ("family history of diabetes") is public, not a secret; what
    the patient says about a finding is not public ("my GP said it is appendicitis" is a leak the audit reports)."""
    h = task.hidden
    keep = ("diagnosis", "condition", "case_id", "key_exams", "key_analytes")
    out = [(p, v) for p, v in leaves({k: h[k] for k in keep if k in h})]
    out += [(p, v) for p, v in leaves({"cant_miss": h.get("cant_miss", [])}) if ".key_exams" not in p]
    catalogue = _exam_names(task.params.get("kb"), task.params.get("kb_overlay"))
    case = dict(task.params.get("case", {}))
    case["history"] = list(case.get("history", {}))  # a finding's name is public; what the patient says is not
    public = catalogue + " | " + fold(json.dumps(case))
    return [(p, v) for p, v in out if p.startswith("key_") or f" {fold(str(v))} " not in public]
