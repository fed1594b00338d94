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
normal, or shifted by ``condition`` when the case names a knowledge-base condition); a numeric result may also be
text with its unit ("13.4 g/dL", "Elevated"), shown as given. Every problem of every case is reported at once, before
any episode starts, naming the file, the line, the case and the field; ``lenient`` loading keeps the valid cases and
lists the rest. A line ``{"kb_overlay": {"exams": [...], "conditions": [...]}}`` adds to the catalogue
(``overlay.py``).
"""

from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.core.jsonl import read_text
from rubricgym.envs.clinical.case import CaseRecord, RubricItem
from rubricgym.envs.clinical.matching import fold
from rubricgym.envs.clinical.patient import EXAM_FILLER, analyte_index, condition_index, exam_index
from rubricgym.envs.clinical.schema import KnowledgeBase

ALWAYS_JUSTIFIED = ("vitals", "spo2", "bedside_glucose")
EXAMPLE_CASES = Path(__file__).with_name("data") / "example_cases.jsonl"
"""Twenty hand-written cases in the real-case format (14 knowledge-base conditions, 6 others)."""


class CaseFileError(ValueError):
    """A case file that does not fit the format; the message lists every problem (file, line, case and field)."""

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or [message]


@dataclass
class CaseLoad:
    """What reading a case file gave: the valid cases and, per case left out, why (every problem at once)."""

    path: Path
    cases: list[CaseRecord] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    """Case (``line N`` when it has no id) -> its problems."""
    lines: dict[str, int] = field(default_factory=dict)
    """Loaded case id -> its line in the file (for messages to the file's owner)."""

    @property
    def problems(self) -> list[str]:
        return [p for ps in self.skipped.values() for p in ps]

    def summary(self) -> str:
        head = f"{self.path}: {len(self.cases)} case(s) loaded, {len(self.skipped)} left out"
        return head + "".join(f"\n  {p}" for p in self.problems)


def load_cases(path: str | Path, kb: KnowledgeBase, strict: bool = True) -> list[CaseRecord]:
    """Every case of a JSONL file, validated and with exam names resolved to catalogue ids.

    ``strict`` (the default) raises one ``CaseFileError`` listing every problem of every case; otherwise the valid
    cases load and the others are left out with a warning that lists why (``read_cases`` returns the report).
    Memoised per file version, so building one env per episode does not re-read a large file (do not mutate
    the returned cases)."""
    load = read_cases(path, kb)
    if load.skipped and strict:
        raise CaseFileError(
            f"{load.summary()}\n(fix these, or load only the valid cases: `--env-arg lenient=true` on the command "
            "line, `lenient=True` in Python)",
            load.problems,
        )
    if load.skipped:
        warnings.warn(load.summary(), stacklevel=2)
    if not load.cases:
        raise CaseFileError(f"{load.path}: the file has no valid case")
    return load.cases


def read_cases(path: str | Path, kb: KnowledgeBase) -> CaseLoad:
    """The valid cases of a JSONL file and every problem of the others (nothing raised for a bad case)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise CaseFileError(f"{p}: no such case file (JSONL, one case per line)")
    return _read_cases(p.resolve(), p.stat().st_mtime_ns, kb)


@functools.lru_cache(maxsize=8)
def _read_cases(p: Path, stamp: int, kb: KnowledgeBase) -> CaseLoad:
    load = CaseLoad(p)
    seen: set[str] = set()
    for n, line in enumerate(read_text(p, CaseFileError).splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{n}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as e:
            load.skipped[f"line {n}"] = [f"{where}: not valid JSON: {e}"]
            continue
        if isinstance(data, dict) and set(data) == {"kb_overlay"}:
            continue  # the file's knowledge-base overlay (overlay.py), not a case
        cid = str(data.get("id", f"line {n}")) if isinstance(data, dict) else f"line {n}"
        try:
            rec = CaseRecord.model_validate(data)
        except ValidationError as e:
            load.skipped[cid] = [
                f"{where} (case {cid!r}), field {'.'.join(str(x) for x in err['loc']) or '(record)'!r}: {err['msg']}"
                for err in e.errors()
            ]
            continue
        if rec.id in seen:
            load.skipped[f"{rec.id} (line {n})"] = [f"{where} (case {rec.id!r}), field 'id': appears twice in the file"]
            continue
        seen.add(rec.id)
        problems: list[str] = []
        resolved = _resolve(rec, kb, f"{where} (case {rec.id!r})", problems)
        if problems:
            load.skipped[rec.id] = problems
        else:
            load.cases.append(resolved)
            load.lines[resolved.id] = n
    return load


def _exam_id(kb: KnowledgeBase, name: str, where: str, field: str, problems: list[str], analytes: bool = False) -> str:
    """The catalogue id ``name`` names, by the rule an order uses (exact, contained with filler words, a word-by-word
    typo); an analyte (panel member) too with ``analytes``. A problem is recorded, and ``""`` returned, otherwise."""
    index = exam_index(kb)
    found = index.names.get(fold(name))
    if found is None and analytes:
        folded = fold(name)
        found = next(
            (e.id for e in kb.exams.values() if folded in {fold(e.id), fold(e.name), *map(fold, e.aliases)}), None
        )
    if found is None:
        found = index.resolve(name, filler=EXAM_FILLER)
    if found is None and analytes:
        found = analyte_index(kb).resolve(name, filler=EXAM_FILLER)
    if found is None:
        close = ", ".join(index.suggest(name, 4))
        hint = f" (close: {close}; or add it to a knowledge-base overlay)" if close else ""
        problems.append(f"{where}, field {field!r}: unknown exam {name!r}{hint}")
        return ""
    return found


def _check_kind(kb: KnowledgeBase, eid: str, value: Any, where: str, field: str) -> str | None:
    exam = kb.exams[eid]
    if not isinstance(value, str) and not exam.is_analyte and not exam.members:
        return f"{where}, field {field!r}: {exam.name} is a report; give its text"
    if not isinstance(value, str) and exam.members:
        return f"{where}, field {field!r}: {exam.name} is a panel; give {{analyte: value}} or text"
    return None  # an analyte takes a number, or text with its unit ("13.4 g/dL", "Elevated"): shown as given


def _resolve(rec: CaseRecord, kb: KnowledgeBase, where: str, problems: list[str]) -> CaseRecord:
    results: dict[str, Any] = {}
    for name, value in rec.results.items():
        eid = _exam_id(kb, name, where, f"results.{name}", problems, analytes=True)
        if not eid:
            continue
        exam = kb.exams[eid]
        if isinstance(value, dict):
            if not exam.members:
                problems.append(f"{where}, field 'results.{name}': only a panel takes {{analyte: value}}")
                continue
            members = {}
            for a, v in value.items():
                aid = _exam_id(kb, a, where, f"results.{name}.{a}", problems, analytes=True)
                if aid:
                    members[aid] = v
                    problem = _check_kind(kb, aid, v, where, f"results.{name}.{a}")
                    problems += [problem] if problem else []
            value = members
        else:
            problem = _check_kind(kb, eid, value, where, f"results.{name}")
            problems += [problem] if problem else []
        results[eid] = value
    keys = [k for k in (_exam_id(kb, k, where, "key_exams", problems) for k in rec.key_exams) if k]
    for item in rec.rubric:
        if item.kind == "exam_ordered" and item.target:
            item.target = _exam_id(kb, item.target, where, "rubric.target", problems) or item.target
    condition = rec.condition
    if condition is not None and condition not in kb.conditions:
        problems.append(f"{where}, field 'condition': {condition!r} is not a knowledge-base condition")
        condition = None
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
