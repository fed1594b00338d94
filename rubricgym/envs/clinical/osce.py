"""Import OSCE-layout case collections (MedQA-derived agent-clinic cases) into the case format of ``cases.py``.

The layout: ``OSCE_Examination`` with ``Objective_for_Doctor``, ``Patient_Actor`` (``Demographics`` as free text,
``History``, ``Symptoms`` {``Primary_Symptom``, ``Secondary_Symptoms``}, ``Past_Medical_History``,
``Social_History``, ``Review_of_Systems``, sometimes medications or allergies), ``Physical_Examination_Findings``
(``Vital_Signs`` then free-named sections, nested or flat), ``Test_Results`` (nested groups of named results:
strings with units, qualitative words, or ``Findings`` text) and ``Correct_Diagnosis``. Collections differ case to
case in nesting and naming, so every field is mapped by what it looks like, and every case gets a report of what
was mapped, renamed, added and dropped.

What a case says is kept as it says it: vital signs and examination text verbatim (a section with no system of
ours is examinable by its own name), results with their units, infant ages in months or days (a gestational age,
"born at 33 weeks' gestation", is a birth or pregnancy history, never the patient's age). A report given in parts
(``MRI_Brain: {Findings, Comments}``) is one exam's text, its parts in order; "Findings" or "Comments" is never an
exam. MIMIC-IV-style records (the same layout: empty fields, "Not Provided", unitless numbers) import too. A test the
catalogue lacks becomes a report exam of the file's knowledge-base overlay (its ``kb_overlay`` line), so the case
is still complete; a diagnosis that is a knowledge-base condition brings its aliases, key exams and differential.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubricgym.envs.clinical.diagnosis import case_vocabulary, map_diagnosis
from rubricgym.envs.clinical.matching import fold
from rubricgym.envs.clinical.patient import (
    EXAM_FILLER,
    SYSTEMS,
    analyte_index,
    exam_index,
    resolve_system,
)
from rubricgym.envs.clinical.schema import KnowledgeBase

_AGE = re.compile(
    r"(\d+(?:\.\d+)?)\s*[- ]?\s*(years?|yrs?|y|months?|mos?|weeks?|wks?|days?|d|hours?|hrs?|h)\b([- ]*old)?", re.I
)
_GESTATION_AFTER = re.compile(
    r"^\s*(?:['’]s?\s*|s['’]\s*)?(?:of\s+)?(?:\d+/\d+\s+)?(?:gestation|gestational|GA\b|pregnan|postmenstrual|corrected)",
    re.I,
)
_GESTATION_BEFORE = re.compile(r"(?:born at|delivered at|gestational age(?: of)?|\bGA(?: of)?:?|gestation:?)\s*$", re.I)
_AGED = re.compile(r"\b(?:aged?|age:)\s*$", re.I)
_SEX = (
    (re.compile(r"\b(female|woman|girl|lady|pregnant|f)\b", re.I), "F"),
    (re.compile(r"\b(male|man|boy|gentleman|m)\b", re.I), "M"),
)
_NUMBER = re.compile(r"^\s*([<>]=?\s*)?(-?\d[\d,]*(?:\.\d+)?)\s*(.*?)\s*$")
_REPORT_KEYS = {"findings", "finding", "result", "results", "report", "impression", "interpretation", "value"}
REPORT_PARTS = frozenset(
    _REPORT_KEYS
    | {"comments", "comment", "conclusion", "conclusions", "notes", "note", "description", "technique", "details"}
    | {"summary", "observations", "observation", "assessment", "additional findings", "other findings", "reading"}
    | {"unit", "units", "reference range", "reference", "normal range", "ref range", "flag", "remarks", "opinion"}
)
"""Sub-keys that are parts of one exam's report (``MRI_Brain: {Findings: ..., Comments: ...}``), never exams."""
_NOT_GIVEN = {"not provided", "not available", "not done", "not performed", "pending", "n a", "na", "none", "unknown"}
_NONE = {"none", "none significant", "nil", "n/a", "na", "not applicable", "unremarkable", "no significant history"}


@dataclass
class CaseReport:
    """What importing one record (of any layout, ``layouts.py``) did."""

    index: int
    case_id: str
    where: str = ""
    """Where the record is: ``FILE:LINE`` (JSONL) or ``FILE record N`` (a JSON list)."""
    mapped: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    """Tests the catalogue lacks, added to the overlay."""
    dropped: list[str] = field(default_factory=list)
    error: str | None = None
    """Why the record could not become a case (it is left out of the output)."""
    leaks: list[str] = field(default_factory=list)
    """Patient-visible text that names the diagnosis (the complaint, history, profile or examination): the agent
    would read the answer; the import refuses such a case unless told to allow it."""
    disclosed: list[str] = field(default_factory=list)
    """Test results that name the diagnosis: allowed (a diagnostic test may say what it detects, and the agent
    sees it only by ordering the test), reported."""
    diagnosis: str = ""
    maps_to: str | None = None
    """``knowledge base``, ``alias`` or ``neither`` (``diagnosis.map_diagnosis``)."""
    maps_via: str | None = None
    """The condition and the name it matched, when it maps."""
    oracle: dict[str, Any] | None = None
    """The env's oracle on the imported case: ``correct``, ``reward``, ``total`` (``verify.oracle_scores``)."""


def _humanise(key: str) -> str:
    """``Neurological_Examination`` -> ``neurological examination``; ``MRI_Brain`` -> ``MRI brain``."""
    words = key.replace("_", " ").split()
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)


def _sentence(text: str) -> str:
    text = str(text).strip()
    return text[:1].upper() + text[1:] if text else text


def _flatten(value: Any) -> str:
    """A nested section as one line: ``Cranial nerves: Intact; Motor: 5/5 in all limbs``."""
    if isinstance(value, dict):
        return "; ".join(f"{_sentence(_humanise(k))}: {_flatten(v)}" for k, v in value.items() if v not in (None, ""))
    if isinstance(value, list):
        return "; ".join(_flatten(v) for v in value if v not in (None, ""))
    return str(value).strip()


def _items(value: Any) -> list[str]:
    """A list given as a list, or as text separated by commas, semicolons or lines."""
    if isinstance(value, list):
        return [str(v).strip() for v in value if str(v).strip()]
    if isinstance(value, str):
        return [p.strip() for p in re.split(r"[;\n]|,(?![^(]*\))", value) if p.strip()]
    return []


def _age_matches(text: str) -> tuple[list[re.Match[str]], list[re.Match[str]]]:
    """``(ages, gestations)``: the age-like numbers of ``text`` ("34-year-old", "8 months"), and those that are a
    gestational age ("born at 32 weeks' gestation", "32 weeks pregnant", "at 28 weeks"), never the patient's age."""
    ages, gestations = [], []
    for m in _AGE.finditer(text):
        unit = m.group(2).lower()
        weeks = unit.startswith("w")
        before = text[: m.start()]
        pregnancy = weeks and re.search(r"\bat\s*$", before, re.I)  # "a woman at 32 weeks"
        gestation = _GESTATION_AFTER.match(text[m.end() :]) or _GESTATION_BEFORE.search(before) or pregnancy
        if gestation and not m.group(3) and (weeks or unit.startswith("mo")):  # never "N weeks old", "N years"
            gestations.append(m)
        else:
            ages.append(m)
    return ages, gestations


def gestational_age(text: Any) -> str | None:
    """The gestational age a demographics text gives ("32 weeks"), or ``None``: kept as what it is (a birth or a
    pregnancy), never read as the patient's age."""
    _, gestations = _age_matches(str(text or "") if not isinstance(text, dict) else "")
    if not gestations:
        return None
    m = gestations[0]
    unit = m.group(2).lower()
    return f"{m.group(1)} weeks" if unit.startswith("w") else f"{m.group(1)} {unit}"


def parse_demographics(text: Any) -> tuple[int | None, str, str]:
    """``(age, unit, sex)`` of free text such as "34-year-old female", "8-month-old boy", "newborn girl, 3 days";
    a mapping ``{Age, Sex|Gender}`` works too. Sex is ``U`` when the text does not say.

    The age keeps its unit: months and days for an infant (weeks become days, a fraction of a year under two
    becomes months, hours make a 0-day-old). A gestational age ("born at 32 weeks' gestation", "28 weeks
    pregnant") is not the patient's age (``gestational_age`` reads it). "N years old" or "aged N" wins over a
    bare duration elsewhere in the text."""
    if isinstance(text, dict):
        low = {k.lower(): v for k, v in text.items()}
        text = f"{low.get('age', '')} {low.get('sex', low.get('gender', ''))}"
    text = str(text or "")
    age: int | None = None
    unit = "years"
    ages, gestations = _age_matches(text)
    stated = [m for m in ages if m.group(3) or _AGED.search(text[: m.start()])]
    m = next(iter(stated or ages), None)
    if m:
        n, u = float(m.group(1)), m.group(2).lower()
        if u.startswith(("w", "wk")):
            age, unit = round(n * 7), "days"
        elif u.startswith("mo") or u == "months" or u == "month":
            age, unit = round(n), "months"
        elif u.startswith("d"):
            age, unit = round(n), "days"
        elif u.startswith("h"):
            age, unit = round(n / 24), "days"
        elif n < 2 and n != int(n):
            age, unit = round(n * 12), "months"
        else:
            age = round(n)
    elif re.search(r"\b(newborn|neonate|neonatal|preterm infant|premature infant)\b", text, re.I):
        age, unit = 0, "days"
    else:
        rest = text
        for g in gestations:  # never the gestational age's number
            rest = rest.replace(g.group(0), " ")
        bare = re.search(r"\b(\d{1,3})\b", rest)
        age = int(bare.group(1)) if bare else None
    sex = next((code for pattern, code in _SEX if pattern.search(text)), "U")
    return age, unit, sex


MAX_DEPTH = 32
"""Deepest nesting of objects and lists a record may have (OSCE records nest four or five levels)."""


def read_records(path: Path) -> Iterator[tuple[int, str, Any]]:
    """Each record of a JSONL file, a JSON list or a single JSON object: its 1-based position, where it is
    (``FILE:LINE`` or ``FILE record N``), and the record or the ``ValueError`` saying why it cannot be read."""
    text = path.read_text(encoding="utf-8-sig")
    stripped = text.lstrip()
    try:  # the whole file as one JSON value: a list of records, or one record
        whole = json.loads(stripped)
    except (json.JSONDecodeError, RecursionError):  # JSONL, or nested too deeply: read line by line below
        pass
    else:
        if isinstance(whole, list):
            yield from ((n, f"{path} record {n}", r) for n, r in enumerate(whole, 1))
        else:
            yield 1, f"{path}:1", whole
        return
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield n, f"{path}:{n}", json.loads(line)
            except json.JSONDecodeError as e:
                yield n, f"{path}:{n}", ValueError(f"not valid JSON: {e}")
            except RecursionError:
                yield n, f"{path}:{n}", ValueError(f"nested too deeply to read (at most {MAX_DEPTH} levels)")


def _depth(value: Any) -> int:
    """How deeply ``value``'s objects and lists nest (iterative: a deep record cannot exhaust the stack)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth + 1)
            if deepest > MAX_DEPTH:
                return deepest
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


_TEXT = (str,)
_SHAPES: dict[tuple[str, ...], tuple[tuple[type, ...], str]] = {
    ("Correct_Diagnosis",): (_TEXT, "text (the diagnosis' name)"),
    ("Objective_for_Doctor",): (_TEXT, "text"),
    ("Patient_Actor",): ((dict,), "an object (Demographics, History, Symptoms, ...)"),
    ("Patient_Actor", "Demographics"): ((str, int, float, dict), 'text such as "45-year-old man" or {"Age": ...}'),
    ("Patient_Actor", "History"): (_TEXT, "text"),
    ("Patient_Actor", "Symptoms"): ((dict, list, str), "an object (Primary_Symptom, Secondary_Symptoms) or a list"),
    ("Patient_Actor", "Symptoms", "Primary_Symptom"): (_TEXT, "text"),
}
"""The OSCE fields the case is built from, what each must be, and how to say it: anything else is free text or a
tree of findings, flattened as given."""


def shape_problem(osce: dict[str, Any]) -> str | None:
    """Why ``osce`` (an ``OSCE_Examination`` object) has a field of the wrong type or nests too deeply, or ``None``."""
    depth = _depth(osce)
    if depth > MAX_DEPTH:
        return f"nested more than {MAX_DEPTH} levels deep; an OSCE record nests a few levels"
    for path, (types, what) in _SHAPES.items():
        node: Any = osce
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node in (None, "", [], {}):  # absent or empty (MIMIC-IV-style records write "History": [])
            continue
        if path == ("Patient_Actor", "History") and isinstance(node, list) and all(isinstance(x, str) for x in node):
            continue  # a narrative given as a list of lines: read as one text
        if not (isinstance(node, types) and not isinstance(node, bool)):
            return f"{'.'.join(path)} must be {what}, got {type(node).__name__} {str(node)[:40]!r}"
    return None


class OsceImporter:
    """Converts OSCE records against one knowledge base, collecting the overlay exams they need."""

    overlay_prefix = "osce_"
    """How the ids of the overlay exams this importer adds begin."""

    def __init__(self, kb: KnowledgeBase, overlay: dict[str, dict[str, Any]] | None = None):
        self.kb = kb
        self.overlay: dict[str, dict[str, Any]] = {} if overlay is None else overlay
        """Overlay exams by id (shared by the importers of one file)."""

    # ---- exams ------------------------------------------------------------------------------------------------

    def exam(self, name: str) -> str | None:
        """The catalogue exam or analyte ``name`` names, by the rule an order uses (no loose match)."""
        folded = fold(name)
        for index in (exam_index(self.kb), analyte_index(self.kb)):
            if folded in index.names:
                return index.names[folded]
        for index in (exam_index(self.kb), analyte_index(self.kb)):
            found = index.resolve(name, filler=EXAM_FILLER)
            if found is not None:
                return found
        return None

    def _overlay_exam(self, name: str, text: str, report: CaseReport) -> str:
        slug = self.overlay_prefix + re.sub(r"[^a-z0-9]+", "_", fold(name)).strip("_")
        if slug not in self.overlay:
            self.overlay[slug] = {
                "id": slug,
                "name": _sentence(name),
                "kind": _kind(name),
                "normal": "Within normal limits.",
                "cost": 0,
                "invasiveness": 1,
                "turnaround_h": 1,
            }
        note = f"test {name!r} (not in the catalogue): overlay exam {slug!r}"
        if note not in report.added:
            report.added.append(note)
        return slug

    def _value(self, exam_id: str, raw: Any, label: str, report: CaseReport) -> float | str:
        """A result as the case format takes it: a number in the catalogue's unit, else the text as given."""
        exam = self.kb.exams[exam_id]
        text = str(raw).strip()
        if exam.is_analyte:
            if isinstance(raw, int | float):
                return float(raw)
            m = _NUMBER.match(text)
            if m and not m.group(1):
                unit, number = m.group(3), float(m.group(2).replace(",", ""))
                unit = re.sub(r"\s*\((?:ref|reference|normal)[^)]*\)\.?$", "", unit, flags=re.I).strip()  # its range
                if not unit or fold(unit) == fold(exam.unit or ""):
                    return number
                factor = _CONVERSIONS.get((_unit_key(unit), _unit_key(exam.unit or "")))
                if factor is not None:
                    value = round(number * factor, exam.decimals)
                    report.renamed.append(f"{label}: {text!r} converted to {value:g} {exam.unit}")
                    return value
                report.renamed.append(f"{label}: kept as given ({text!r}; the catalogue's unit is {exam.unit})")
        return text

    def is_report(self, name: str, value: dict[str, Any]) -> bool:
        """Whether ``value`` is one exam's report in parts (``MRI_Brain: {Findings, Comments}``), not a group of
        tests: its parts are text, and a part is named as a report part, or the exam is a catalogue report, or
        its name is an imaging study or procedure, with no part that is a test itself."""
        if any(isinstance(v, dict) for v in value.values()):
            return False
        if {fold(k) for k in value} & REPORT_PARTS:
            return True
        if any(self.exam(_humanise(k)) is not None or _kind(_humanise(k)) != "lab" for k in value):
            return False
        found = self.exam(name)
        if found is not None:
            exam = self.kb.exams[found]
            return not exam.members and not exam.is_analyte
        return _kind(name) != "lab"

    def _report_text(self, value: dict[str, Any], label: str, report: CaseReport) -> str:
        """A report's parts as one text, in the order given ("Findings: ... Comments: ..."); a bare
        ``{Value, Unit, Reference_Range}`` is the result "13.2 g/dL" (the catalogue's range applies)."""
        parts = {fold(k): v for k, v in value.items()}
        refs = ("reference range", "reference", "normal range", "ref range")
        if "value" in parts and set(parts) <= {"value", "unit", "units", *refs}:
            unit = parts.get("unit", parts.get("units", ""))
            for k in refs:
                if k in parts:
                    report.dropped.append(f"{label}: reference range {parts[k]!r} (the catalogue's range applies)")
            return f"{parts['value']} {unit}".strip()
        out = ""
        for key, part in value.items():
            text = f"{_sentence(_humanise(key))}: {_flatten(part)}"
            out = text if not out else f"{out} {text}" if out.rstrip()[-1:] in ".!?" else f"{out}; {text}"
        return out

    def results(
        self, tree: Any, report: CaseReport, prefix: str = "Test_Results", panel: str | None = None
    ) -> dict[str, Any]:
        """Named results of a nested ``Test_Results`` tree: panels by member, reports by their text (a report
        given in parts, ``MRI_Brain: {Findings, Comments}``, is one exam's text, its parts in order)."""
        out: dict[str, Any] = {}
        if not isinstance(tree, dict):
            if tree not in (None, ""):
                report.dropped.append(f"{prefix}: {str(tree)[:60]!r} (a result needs a name)")
            return out
        for key, value in tree.items():
            label, name = f"{prefix}.{key}", _humanise(key)
            if value in (None, "", {}, []):
                report.dropped.append(f"{label}: empty")
                continue
            if isinstance(value, str) and fold(value) in _NOT_GIVEN:
                report.dropped.append(f"{label}: {value.strip()!r} (no result given)")
                continue
            if fold(key) in REPORT_PARTS:  # "Findings" or "Comments" beside tests: never an exam of its own
                report.dropped.append(f"{label}: a note on {prefix.rsplit('.', 1)[-1]!r}, not a test (not kept)")
                continue
            if isinstance(value, dict) and self.is_report(name, value):
                value = self._report_text(value, label, report)
            found = self.exam(name)
            if isinstance(value, dict):
                if found is not None and self.kb.exams[found].members:
                    members = self.results(value, report, label, panel=found)
                    out[found] = {k: v for k, v in members.items() if not isinstance(v, dict)}
                    report.mapped.append(f"{label} -> panel {self.kb.exams[found].name}")
                else:  # a group ("Imaging", "Blood_Tests"): its members are the results
                    out.update(self.results(value, report, label))
                continue
            if isinstance(value, list):
                value = _flatten(value)
            if (
                panel is not None
                and found is not None
                and found not in {*self.kb.exams[panel].members, *self.kb.analytes_of(panel)}
            ):
                # a member named like another test ("Leukocytes" of a urinalysis is not the blood count's WBC)
                name = f"{self.kb.exams[panel].name} {name}"
                found = None
            if found is None:
                found = self._overlay_exam(name, str(value), report)
                out[found] = str(value).strip()
                continue
            exam = self.kb.exams[found]
            if exam.members and not isinstance(value, str):
                value = str(value)
            out[found] = self._value(found, value, label, report)
            report.mapped.append(f"{label} -> {exam.name}")
        return out

    # ---- one record -------------------------------------------------------------------------------------------

    def case(self, index: int, record: Any) -> tuple[dict[str, Any] | None, CaseReport]:
        report = CaseReport(index, f"osce-{index:04d}")
        if isinstance(record, Exception):
            report.error = str(record)
            return None, report
        osce = record.get("OSCE_Examination", record) if isinstance(record, dict) else None
        if not isinstance(osce, dict):
            report.error = "not an OSCE record (an object, usually under 'OSCE_Examination')"
            return None, report
        problem = shape_problem(osce)
        if problem is not None:
            report.error = problem
            return None, report
        actor = osce.get("Patient_Actor") or {}
        age, unit, sex = parse_demographics(actor.get("Demographics"))
        if age is None:
            report.error = f"Patient_Actor.Demographics {actor.get('Demographics')!r} gives no age"
            return None, report
        dx = str(osce.get("Correct_Diagnosis") or "").strip().rstrip(".")
        if not dx:
            report.error = "no Correct_Diagnosis"
            return None, report
        if not re.search(r"[^\W\d_]", dx):
            report.error = f"Correct_Diagnosis {dx!r} names no condition (give the diagnosis' name)"
            return None, report
        report.mapped.append(f"Demographics -> age {age} {unit}, sex {sex}")
        history, profile = self._history(actor, report)
        self._gestation(actor.get("Demographics"), age, unit, history, report)
        symptoms = actor.get("Symptoms") or {}
        primary = symptoms.get("Primary_Symptom") if isinstance(symptoms, dict) else None
        complaint = str(primary or osce.get("Objective_for_Doctor") or "feeling unwell").strip().rstrip(".")
        case: dict[str, Any] = {
            "id": report.case_id,
            "profile": {"age": age, "sex": sex, "age_unit": unit, **profile},
            "complaint": complaint[:1].lower() + complaint[1:] if complaint[:2] != complaint[:2].upper() else complaint,
            "history": history,
            "examination": self._examination(osce.get("Physical_Examination_Findings") or {}, report),
            "results": self.results(osce.get("Test_Results") or {}, report),
            "diagnosis": {"name": dx},
            "source": "osce",
        }
        self._diagnosis(case, report)
        report.leaks, report.disclosed = diagnosis_mentions(self.kb, case)
        for key in sorted(
            set(osce)
            - {
                "Objective_for_Doctor",
                "Patient_Actor",
                "Physical_Examination_Findings",
                "Test_Results",
                "Correct_Diagnosis",
            }
        ):
            report.dropped.append(f"{key}: not part of the case format")
        return case, report

    def _history(self, actor: dict[str, Any], report: CaseReport) -> tuple[dict[str, str], dict[str, Any]]:
        history: dict[str, str] = {}
        profile: dict[str, Any] = {}
        symptoms = actor.get("Symptoms") or {}
        if not isinstance(symptoms, dict):
            symptoms = {"Secondary_Symptoms": symptoms}
        primary = str(symptoms.get("Primary_Symptom") or "").strip()
        lines = actor.get("History") or ""
        narrative = (" ".join(str(x).strip() for x in lines) if isinstance(lines, list) else str(lines)).strip()
        if primary:
            history[primary.lower()] = narrative or f"Yes, {primary.lower()}."
            report.mapped.append("Symptoms.Primary_Symptom + History -> history")
        elif narrative:
            history["presenting complaint"] = narrative
            report.renamed.append("History -> history 'presenting complaint'")
        for s in _items(symptoms.get("Secondary_Symptoms")):
            history[s.lower()] = f"Yes, {s[:1].lower() + s[1:]}."
        if symptoms.get("Secondary_Symptoms"):
            report.mapped.append("Symptoms.Secondary_Symptoms -> history")
        for key, value in actor.items():
            if key in ("Demographics", "History", "Symptoms") or value in (None, "", [], {}):
                continue
            k = fold(key)
            if k == "past medical history":
                items = [i for i in _items(value) if fold(i) not in _NONE and fold(i).rstrip(".") not in _NONE]
                profile["history"] = items
                report.mapped.append("Past_Medical_History -> profile.history")
            elif k in ("social history", "social"):
                profile["social"] = _flatten(value)
                report.mapped.append("Social_History -> profile.social")
            elif "medication" in k or k in ("drugs", "current medications"):
                profile["medications"] = [i for i in _items(value) if fold(i) not in _NONE]
                report.mapped.append(f"{key} -> profile.medications")
            elif "allerg" in k:
                profile["allergies"] = _flatten(value)
                report.mapped.append(f"{key} -> profile.allergies")
            else:  # Review_of_Systems, Family_History, anything else the actor knows: the patient says it
                history[_humanise(key)] = _flatten(value)
                report.renamed.append(f"{key} -> history {_humanise(key)!r}")
        return history, profile

    @staticmethod
    def _gestation(demographics: Any, age: int, unit: str, history: dict[str, str], report: CaseReport) -> None:
        """Keep a gestational age the demographics give as what it is: a birth history for an infant, a
        pregnancy for anyone older (never the patient's age)."""
        weeks = gestational_age(demographics)
        if weeks is None:
            return
        infant = age / {"years": 1, "months": 12, "days": 365}[unit] < 2
        key, text = ("birth", f"Born at {weeks}' gestation.") if infant else ("pregnancy", f"I am {weeks} pregnant.")
        history.setdefault(key, text)
        report.mapped.append(f"Demographics: gestational age {weeks} -> history {key!r} (not the patient's age)")

    def _examination(self, findings: Any, report: CaseReport) -> dict[str, str]:
        out: dict[str, str] = {}
        if not isinstance(findings, dict):
            if findings:
                out["general"] = _flatten(findings)
                report.renamed.append("Physical_Examination_Findings -> examination 'general'")
            return out
        for key, value in findings.items():
            if value in (None, "", {}, []):
                report.dropped.append(f"Physical_Examination_Findings.{key}: empty")
                continue
            name = re.sub(r"\b(examination|exam|findings?)\b", "", _humanise(key)).strip() or _humanise(key)
            system = resolve_system(name) if fold(name) in _SYSTEM_WORDS or len(name.split()) <= 3 else None
            text = _flatten(value)
            if system is not None and system in SYSTEMS:
                out[system] = f"{out[system]}; {text}" if system in out else text
                report.mapped.append(f"{key} -> examination {system!r}")
            else:
                out[name] = text
                report.renamed.append(f"{key} -> examination section {name!r} (examinable by that name)")
        return out

    def _diagnosis(self, case: dict[str, Any], report: CaseReport) -> None:
        """Link the case to the knowledge-base condition its diagnosis names (by name, alias, or a form the env's
        matcher credits as that condition), and record on the report which of these it is."""
        name = case["diagnosis"]["name"]
        found = map_diagnosis(self.kb, name)
        report.diagnosis, report.maps_to = name, found.maps_to
        report.maps_via = None if found.condition is None else f"{found.condition} ({found.via})"
        cid = found.condition
        if cid is None:
            report.mapped.append("diagnosis -> its own name (not a knowledge-base condition: no key exams)")
            if found.near:
                report.maps_via = f"reads as {', '.join(found.near)} (not linked: an answer naming it is not credited)"
            return
        cond = self.kb.conditions[cid]
        case["diagnosis"] = {"name": name, "aliases": [cond.name, *cond.aliases], "icd10": cond.icd10}
        case["condition"] = cid
        case["key_exams"] = list(cond.key_exams)
        case["differential"] = list(cond.differential)
        case["cant_miss"] = list(cond.cant_miss)
        report.mapped.append(
            f"diagnosis -> condition {cid!r} by {found.maps_to} {found.via!r} (aliases, ICD-10, key exams, "
            "differential)"
        )


def diagnosis_mentions(kb: KnowledgeBase, case: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(leaks, disclosed)``: where patient-visible text of ``case`` names its diagnosis or an alias ("my GP said
    it is appendicitis"), and which test results do. A name of three letters or fewer counts only where the text
    writes it in capitals ("PE", not the "pe" of a unit)."""
    facts = {"diagnosis": case["diagnosis"], "condition": case.get("condition")}
    vocab = case_vocabulary(kb, facts)

    def names(text: str) -> list[str]:
        words = fold(text).split()
        capitals = set(re.findall(r"\b[A-Z0-9]{2,3}\b", text))
        found = [" ".join(words[n.start : n.end]) for n in vocab.find(words) if n.identity == "case"]
        return [f for f in found if len(f.replace(" ", "")) > 3 or f.upper() in capitals]

    visible: list[tuple[str, str]] = [("complaint", case.get("complaint", ""))]
    profile = case.get("profile", {})
    visible += [
        (f"profile.{k}", _flatten(profile[k]))
        for k in ("history", "medications", "social", "allergies")
        if k in profile
    ]
    for section in ("history", "examination"):
        for key, value in case.get(section, {}).items():
            visible.append((f"{section} {key!r}", f"{key}: {value if isinstance(value, str) else ''}"))
    leaks = [
        f"{where} names the diagnosis ({', '.join(map(repr, hit))})" for where, text in visible if (hit := names(text))
    ]
    disclosed = [
        f"result {key!r} names the diagnosis ({', '.join(map(repr, hit))})"
        for key, value in case.get("results", {}).items()
        if (hit := names(f"{_flatten(value)}"))
    ]
    return leaks, disclosed


_SYSTEM_WORDS = {fold(s) for s in SYSTEMS}
_KINDS = (
    (
        re.compile(
            r"x ?ray|radiograph|\bct\b|\bmri\b|ultrasound|sonograph|\bscan\b|imaging|echocardiogra|angiogra|doppler|"
            r"mammogra|\bpet\b|fluoroscop|tomograph",
            re.I,
        ),
        "imaging",
    ),
    (re.compile(r"biopsy|scopy\b|endoscop|aspirat|puncture", re.I), "procedure"),
    (re.compile(r"culture", re.I), "culture"),
    (re.compile(r"\b(ecg|ekg|electrocardiogra)", re.I), "ecg"),
    (re.compile(r"antibod|serolog|antigen|\bigg\b|\bigm\b", re.I), "serology"),
)


def _kind(name: str) -> str:
    """The catalogue kind of a test known only by name (a lab test unless its name says otherwise)."""
    return next((kind for pattern, kind in _KINDS if pattern.search(name)), "lab")


_COUNT_UNITS = ("/mm3", "/mm^3", "/ul", "/µl", "/μl", "cells/mm3", "cells/ul", "cells/µl", "per mm3", "/cumm")
_THOUSANDS_UNITS = tuple(
    f"{a}{b}" for a in ("x10^3", "10^3", "x10e3", "k", "thou", "x1000") for b in ("/ul", "/µl", "/μl", "/mm3", "/cumm")
)
_CONVERSIONS: dict[tuple[str, str], float] = {
    **{(u, "x10^9/l"): 1e-3 for u in _COUNT_UNITS},
    **{(u, "x10^9/l"): 1.0 for u in _THOUSANDS_UNITS},
    ("g/dl", "g/l"): 10.0,
    ("mg/l", "ng/mlfeu"): 1000.0,
    ("mg/lfeu", "ng/mlfeu"): 1000.0,
    ("µg/ml", "ng/mlfeu"): 1000.0,
    ("ug/ml", "ng/mlfeu"): 1000.0,
    ("g/l", "g/dl"): 0.1,
}
"""Unit conversions that hold for any analyte (counts per microlitre to 10^9/L, g/dL to g/L); others stay as
given, with their unit."""


def _unit_key(unit: str) -> str:
    return unit.strip().lower().replace(" ", "").replace("×", "x").replace("*", "x").replace("10⁹", "10^9")


def import_osce(
    path: str | Path, kb: KnowledgeBase
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[CaseReport]]:
    """``(cases, overlay exams, reports)`` of an OSCE file (JSONL, a JSON list or one JSON object); a record that
    cannot become a case has its report's ``error`` and ``where``."""
    importer = OsceImporter(kb)
    cases, reports = [], []
    for index, where, record in read_records(Path(path)):
        case, report = importer.case(index, record)
        report.where = where
        reports.append(report)
        if case is not None:
            cases.append(case)
    return cases, list(importer.overlay.values()), reports


def write_cases(out: str | Path, cases: list[dict[str, Any]], overlay: list[dict[str, Any]]) -> Path:
    """The cases as a JSONL file the env loads, its overlay (if any) on the first line."""
    path = Path(out)
    lines = [json.dumps({"kb_overlay": {"exams": overlay}}, ensure_ascii=False)] if overlay else []
    lines += [json.dumps(c, ensure_ascii=False) for c in cases]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
