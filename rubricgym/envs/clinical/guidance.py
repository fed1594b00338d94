"""Graded hints for a clinical case whose group of attempts all failed (``ClinicalEnv.guidance``).

Each level keeps the ones below it and adds more help; none names the diagnosis, an alias, a can't-miss
condition or a key exam (the case's secrets, ``visibility.case_secrets``):

1. where to look: the knowledge-base condition's specialty and the organ system of the diagnosis's ICD-10
   chapter ("a disease of the respiratory system"), either when only one is known;
2. what to order: the *category* of the case's first key exam (a blood test, a contrast scan, an invasive
   procedure, ...), never its name, since the key exams are what the work-up is scored on;
3. the whole work-up: how many key exams and the category of each, and the systems the chart has examination
   findings for (``examine`` shows those to anyone who asks).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rubricgym.envs.clinical.schema import Exam, KnowledgeBase

LEVELS = 3
CHAPTERS = (  # (first code of the chapter, what its diseases are), in code order; R, U and Z say no organ system
    ("A00", "an infectious or parasitic disease"),
    ("C00", "a neoplasm (a growth, benign or malignant)"),
    ("D50", "a disease of the blood, the blood-forming organs or the immune system"),
    ("E00", "an endocrine, nutritional or metabolic disease"),
    ("F00", "a mental or behavioural disorder"),
    ("G00", "a disease of the nervous system"),
    ("H00", "a disease of the eye"),
    ("H60", "a disease of the ear"),
    ("I00", "a disease of the circulatory system (the heart and the vessels)"),
    ("J00", "a disease of the respiratory system"),
    ("K00", "a disease of the digestive system"),
    ("L00", "a disease of the skin"),
    ("M00", "a disease of the musculoskeletal system or the connective tissue"),
    ("N00", "a disease of the genitourinary system (the kidneys, the urinary tract or the reproductive organs)"),
    ("O00", "a condition of pregnancy or childbirth"),
    ("P00", "a condition of the newborn period"),
    ("Q00", "a congenital condition"),
    ("R00", ""),
    ("S00", "an injury, a poisoning or another external cause"),
    ("U00", ""),
)
"""ICD-10 chapters (WHO ICD-10, 2019) by their first code."""
_SAMPLE = "a laboratory test on a urine, stool or swab sample"
_CULTURE = "a culture or smear of a sample (blood, urine, sputum or stool)"
_BEDSIDE = "a quick bedside test"
CATEGORIES: dict[tuple[str, int], str] = {
    ("lab", 0): _SAMPLE,
    ("lab", 1): "a blood test (one analyte)",
    ("panel", 0): _SAMPLE,
    ("panel", 1): "a panel of blood tests (several analytes reported together)",
    ("serology", 1): "a serology test (antibodies or antigens in the blood)",
    ("culture", 0): _CULTURE,
    ("culture", 1): _CULTURE,
    ("imaging", 0): "an imaging study without ionising radiation (an ultrasound or an MRI)",
    ("imaging", 1): "a plain imaging study (a radiograph, a plain scan or an internal ultrasound)",
    ("imaging", 2): "a scan with contrast or a high radiation dose (an angiogram or a contrast CT)",
    ("ecg", 0): "a tracing of the heart's electrical activity (at rest or on exertion)",
    ("bedside", 0): _BEDSIDE,
    ("bedside", 1): _BEDSIDE,
    ("procedure", 3): "an invasive procedure (a puncture, a scope or a biopsy)",
}
"""What an exam is, by (kind, invasiveness): each a class of at least two orderable exams of the bundled catalogue
(a class of one would name its exam), never one exam's name."""
GENERAL = {
    "lab": "a laboratory test",
    "panel": "a panel of laboratory tests",
    "serology": "a serology test",
    "culture": "a culture",
    "imaging": "an imaging study",
    "ecg": "a cardiac tracing",
    "bedside": "a bedside test",
    "procedure": "a procedure",
}
"""The kind alone, for an exam whose (kind, invasiveness) has no entry above (an overlay's exam)."""
TIMES = {2: "two", 3: "three", 4: "four", 5: "five"}


def organ_system(icd10: str | None) -> str:
    """What the ICD-10 chapter of ``icd10`` says the diagnosis is, or ``""`` (no code, or a chapter of symptoms
    or special codes)."""
    code = (icd10 or "").strip().upper()
    if len(code) < 3 or not code[0].isalpha() or not code[1:3].isdigit():
        return ""
    head = code[:3]
    found = ""
    for start, what in CHAPTERS:
        if head >= start:
            found = what
    return found if head < "V00" else ""


def category(exam: Exam | None) -> str:
    """The class of exam ``exam`` belongs to, in words."""
    if exam is None:
        return "an exam from the catalogue"
    return CATEGORIES.get((exam.kind, exam.invasiveness)) or GENERAL[exam.kind]


def where_to_look(kb: KnowledgeBase, hidden: dict[str, Any]) -> str:
    """Level 1: the specialty and the organ system."""
    cond = kb.conditions.get(hidden.get("condition") or "")
    system = organ_system((hidden.get("diagnosis") or {}).get("icd10"))
    if cond is not None and system:
        return f"Think as a specialist in {cond.specialty} would: the diagnosis is {system}."
    if cond is not None:
        return f"Think as a specialist in {cond.specialty} would."
    if system:
        return f"The diagnosis is {system}."
    return "Work out which organ system the presenting complaint points to, and examine that system first."


def what_to_order(kb: KnowledgeBase, hidden: dict[str, Any]) -> str:
    """Level 2's addition: the category of the first key exam (or that the diagnosis needs none)."""
    keys = hidden.get("key_exams") or []
    if not keys:
        return (
            "No exam is needed to settle it: the history and the examination are enough, so ask, examine, and "
            "commit without costly tests."
        )
    return f"One exam that settles it is {category(kb.exams.get(keys[0]))}: order one, naming your working diagnosis."


def work_up(kb: KnowledgeBase, hidden: dict[str, Any], examination: list[str]) -> str:
    """Level 3's addition: every key exam's category, and the systems with examination findings."""
    keys = hidden.get("key_exams") or []
    parts = []
    if len(keys) > 1:
        counts = Counter(category(kb.exams.get(k)) for k in keys)
        listed = "; ".join(c if n == 1 else f"{c}, {TIMES.get(n, 'several')} of them" for c, n in counts.items())
        parts.append(f"The full work-up is {len(keys)} exams: {listed}.")
    elif keys:
        parts.append("That one exam is the whole work-up: order it before anything costly.")
    if examination:
        parts.append(f"The examination has findings in: {', '.join(examination)}; examine those systems.")
    parts.append("Then commit with the diagnose tool, citing the results you obtained.")
    return " ".join(parts)


def hint(kb: KnowledgeBase, hidden: dict[str, Any], examination: list[str], level: int) -> str | None:
    """The hint at ``level`` (1..``LEVELS``, each level keeping the ones below), ``None`` beyond."""
    if not 1 <= level <= LEVELS:
        return None
    parts = [where_to_look(kb, hidden)]
    if level >= 2:
        parts.append(what_to_order(kb, hidden))
    if level >= 3:
        parts.append(work_up(kb, hidden, examination))
    return " ".join(parts)
