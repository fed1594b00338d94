"""Real cases from a JSONL file in a DiagBench-like format, and the scoring facts a task hides.

One JSON object per line (``CaseRecord`` in ``case.py``)::

    {"id": "mi-001", "profile": {"age": 61, "sex": "M", "history": ["hypertension"], "medications": [...],
     "social": "Smokes 20 a day."}, "complaint": "central chest pain for 40 minutes",
     "history": {"chest pain spreading to the left arm": "Yes, it goes down my left arm.", ...},
     "examination": {"general": "Grey and sweaty.", ...},
     "results": {"ECG": "ST elevation in II, III, aVF", "Troponin I": 3.1, "CBC": {"Haemoglobin": 14.1}},
     "diagnosis": {"name": "Inferior STEMI", "aliases": ["STEMI"], "icd10": "I21.1"},
     "key_exams": ["ECG", "Troponin I"], "differential": ["aortic dissection"], "cant_miss": ["aortic dissection"],
     "rubric": [{"text": "Orders an ECG within the first turns", "weight": 3, "kind": "exam_ordered",
                 "target": "ECG"}]}

Exam names resolve through the catalogue's names and aliases (results of exams a case does not give come back
normal, or shifted by ``condition`` when the case names a knowledge-base condition). A broken line fails before
any episode starts, naming the file, the line, the case and the field.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.core.jsonl import read_text
from rubricgym.envs.clinical.case import CaseRecord, RubricItem
from rubricgym.envs.clinical.matching import fold
from rubricgym.envs.clinical.patient import condition_index, exam_index
from rubricgym.envs.clinical.schema import KnowledgeBase

ALWAYS_JUSTIFIED = ("vitals", "spo2", "bedside_glucose")
EXAMPLE_CASES = Path(__file__).with_name("data") / "example_cases.jsonl"
"""Twenty hand-written cases in the real-case format (14 knowledge-base conditions, 6 others)."""


class CaseFileError(ValueError):
    """A case file that does not fit the format; the message names the file, line, case and field."""


def load_cases(path: str | Path, kb: KnowledgeBase) -> list[CaseRecord]:
    """Every case of a JSONL file, validated and with exam names resolved to catalogue ids.

    Memoised per file version, so building one env per episode does not re-read a large file (do not mutate
    the returned cases)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise CaseFileError(f"{p}: no such case file (JSONL, one case per line)")
    return _load_cases(p.resolve(), p.stat().st_mtime_ns, kb)


@functools.lru_cache(maxsize=8)
def _load_cases(p: Path, stamp: int, kb: KnowledgeBase) -> list[CaseRecord]:
    out: list[CaseRecord] = []
    seen: set[str] = set()
    for n, line in enumerate(read_text(p, CaseFileError).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{n}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            raise CaseFileError(f"{where}: not valid JSON: {e}") from None
        cid = data.get("id", "?") if isinstance(data, dict) else "?"
        try:
            rec = CaseRecord.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"]) or "(record)"
            raise CaseFileError(f"{where} (case {cid!r}), field {field!r}: {err['msg']}") from None
        if rec.id in seen:
            raise CaseFileError(f"{where} (case {rec.id!r}), field 'id': appears twice in the file")
        seen.add(rec.id)
        out.append(_resolve(rec, kb, f"{where} (case {rec.id!r})"))
    if not out:
        raise CaseFileError(f"{p}: the file has no cases")
    return out


def _exam_id(kb: KnowledgeBase, name: str, where: str, field: str, analytes: bool = False) -> str:
    index = exam_index(kb)
    found = index.names.get(fold(name))
    if found is None and analytes:
        found = next(
            (e.id for e in kb.exams.values() if fold(name) in {fold(e.id), fold(e.name), *map(fold, e.aliases)}), None
        )
    if found is None:
        close = ", ".join(index.suggest(name, 4))
        hint = f" (close: {close})" if close else ""
        raise CaseFileError(f"{where}, field {field!r}: unknown exam {name!r}{hint}")
    return found


def _check_kind(kb: KnowledgeBase, eid: str, value: Any, where: str, field: str) -> None:
    exam = kb.exams[eid]
    if isinstance(value, str) and exam.is_analyte:
        raise CaseFileError(f"{where}, field {field!r}: {exam.name} is numeric ({exam.unit}); give a number")
    if not isinstance(value, str) and not exam.is_analyte and not exam.members:
        raise CaseFileError(f"{where}, field {field!r}: {exam.name} is a report; give its text")
    if not isinstance(value, str) and exam.members:
        raise CaseFileError(f"{where}, field {field!r}: {exam.name} is a panel; give {{analyte: value}} or text")


def _resolve(rec: CaseRecord, kb: KnowledgeBase, where: str) -> CaseRecord:
    results: dict[str, Any] = {}
    for name, value in rec.results.items():
        eid = _exam_id(kb, name, where, f"results.{name}", analytes=True)
        exam = kb.exams[eid]
        if isinstance(value, dict):
            if not exam.members:
                raise CaseFileError(f"{where}, field 'results.{name}': only a panel takes {{analyte: value}}")
            value = {_exam_id(kb, a, where, f"results.{name}.{a}", analytes=True): v for a, v in value.items()}
            for aid, v in value.items():
                _check_kind(kb, aid, v, where, f"results.{name}.{aid}")
        else:
            _check_kind(kb, eid, value, where, f"results.{name}")
        results[eid] = value
    keys = [_exam_id(kb, k, where, "key_exams") for k in rec.key_exams]
    for item in rec.rubric:
        if item.kind == "exam_ordered" and item.target:
            item.target = _exam_id(kb, item.target, where, "rubric.target")
    condition = rec.condition
    if condition is not None and condition not in kb.conditions:
        raise CaseFileError(f"{where}, field 'condition': {condition!r} is not a knowledge-base condition")
    if condition is None:
        index = condition_index(kb)
        code = (rec.diagnosis.icd10 or "").replace(".", "").upper()
        condition = index.names.get(fold(rec.diagnosis.name)) or (index.codes.get(code) if code else None)
    return rec.model_copy(update={"results": results, "key_exams": keys, "condition": condition})


def fixed_results(kb: KnowledgeBase, case: CaseRecord) -> dict[str, float | str]:
    """The case's given results by analyte or exam id (panels given as {analyte: value} are flattened)."""
    out: dict[str, float | str] = {}
    for eid, value in case.results.items():
        if isinstance(value, dict):
            out.update({a: v if isinstance(v, str) else float(v) for a, v in value.items()})
        else:
            out[eid] = value if isinstance(value, str) else float(value)
    return out


def scoring_facts(kb: KnowledgeBase, case: CaseRecord) -> dict[str, Any]:
    """What the checks need and the agent never sees: diagnosis, key exams, can't-miss conditions, rubric."""
    index = condition_index(kb)
    cant_miss = []
    for name in case.cant_miss:
        cid = name if name in kb.conditions else index.resolve(name)
        cond = kb.conditions.get(cid or "")
        cant_miss.append(
            {
                "id": cid or name,
                "name": cond.name if cond else name,
                "aliases": list(cond.aliases) if cond else [],
                "key_exams": list(cond.key_exams) if cond else [],
            }
        )
    differential = [d if d in kb.conditions else (index.resolve(d) or d) for d in case.differential]
    justified = set(case.key_exams) | set(ALWAYS_JUSTIFIED)
    for d in differential:
        if d in kb.conditions:
            justified.update(kb.conditions[d].key_exams)
    rubric = case.rubric or default_rubric_items(kb, case, cant_miss)
    return {
        "diagnosis": case.diagnosis.model_dump(),
        "condition": case.condition,
        "key_exams": list(case.key_exams),
        "key_analytes": {k: kb.analytes_of(k) for k in case.key_exams},
        "cant_miss": cant_miss,
        "differential": differential,
        "justified": sorted(justified),
        "key_cost": sum(kb.exams[k].cost for k in case.key_exams),
        "rubric": [r.model_dump(exclude_defaults=False) for r in rubric],
    }


def default_rubric_items(kb: KnowledgeBase, case: CaseRecord, cant_miss: list[dict[str, Any]]) -> list[RubricItem]:
    """The physician rubric of a real case that gives none: diagnosis, key exams, can't-miss, no invasive excess."""
    items = [RubricItem(text=f"Reaches the diagnosis of {case.diagnosis.name}.", weight=5, kind="diagnosis")]
    items += [
        RubricItem(text=f"Orders {kb.exams[k].name}.", weight=3, kind="exam_ordered", target=k) for k in case.key_exams
    ]
    items += [
        RubricItem(text=f"Considers and excludes {c['name']}.", weight=2, kind="considered", target=c["id"])
        for c in cant_miss
    ]
    items.append(
        RubricItem(text="Avoids invasive tests the presentation does not call for.", weight=2, kind="avoid_invasive")
    )
    return items
