"""A case: the DiagBench-like record a task carries (synthetic or real) and the seeded case generator.

The same pydantic ``CaseRecord`` is the line format of a real-case JSONL file (see ``cases.py``) and what the
generator produces for a synthetic patient; exam results a record does not give are drawn by the virtual
patient (``patient.py``) from the knowledge base, fixed on first draw.
"""

from __future__ import annotations

import random
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from rubricgym.envs.clinical.matching import fold
from rubricgym.envs.clinical.schema import AGE_BANDS, Condition, KnowledgeBase

RubricKind = Literal["diagnosis", "exam_ordered", "considered", "asked", "avoid_invasive", "judge"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


MAX_AGE_YEARS = 120
"""The oldest age a profile takes, in years; in months or days the bound is the same span in that unit."""
_PER_YEAR = {"years": 1, "months": 12, "days": 365}


class Profile(_Strict):
    age: int = Field(ge=0)
    """In ``age_unit`` (an infant's age in months or days, as the case gives it); at most ``MAX_AGE_YEARS``
    years in that unit (231 days is a 7-month-old, not an age over 120)."""
    sex: Literal["M", "F", "U"]
    """``U``: not stated by the case."""
    age_unit: Literal["years", "months", "days"] = "years"
    history: list[str] = []
    """Past medical history."""
    medications: list[str] = []
    allergies: str = "No known drug allergies."
    social: str = ""

    @model_validator(mode="after")
    def _age_within_bound_in_its_unit(self) -> Profile:
        limit = MAX_AGE_YEARS * _PER_YEAR[self.age_unit]
        if self.age > limit:
            raise ValueError(
                f"age {self.age} {self.age_unit} is over {MAX_AGE_YEARS} years ({limit} {self.age_unit}); give the "
                "age with its unit (age_unit: years, months or days)"
            )
        return self

    @property
    def years(self) -> float:
        """The age in years (fractional for an infant)."""
        return self.age / _PER_YEAR[self.age_unit]

    @property
    def adult(self) -> bool:
        return self.years >= 18

    def describe(self) -> str:
        """How a chart opens: "61-year-old man", "8-month-old boy", "3-day-old newborn", "40-year-old patient"."""
        unit = self.age_unit[:-1]
        child = self.years < 18
        who = {
            "M": "boy" if child else "man",
            "F": "girl" if child else "woman",
            "U": "infant" if self.years < 1 else "child" if child else "patient",
        }[self.sex]
        return f"{self.age}-{unit}-old {who}"


class Diagnosis(_Strict):
    name: str = Field(min_length=1)
    aliases: list[str] = []
    icd10: str | None = None


class RubricItem(_Strict):
    """One weighted physician rubric item (DiagBench style). ``kind`` says how it is checked programmatically:

    ``diagnosis`` (the final diagnosis is right), ``exam_ordered`` (``target`` exam ordered), ``considered``
    (``target`` condition named in the differential or an impression, or excluded by its key exam),
    ``asked`` (a history question matched the ``target`` finding), ``avoid_invasive`` (no invasive exam outside
    the justified ones), ``judge`` (free text: needs an LLM judge; left out of the programmatic score).
    """

    text: str = Field(min_length=1)
    weight: float = Field(gt=0)
    kind: RubricKind = "judge"
    target: str | None = None


class CaseRecord(_Strict):
    """One case. ``results`` maps exam names (catalogue id, name or alias) to a number (an analyte), report text,
    or ``{analyte: value}`` for a panel; exams it omits come back from the virtual patient."""

    id: str = Field(min_length=1)
    profile: Profile
    complaint: str = Field(min_length=1)
    history: dict[str, str | bool] = {}
    """Finding -> the patient's answer (text), or whether it is present (synthetic cases)."""
    examination: dict[str, str] = {}
    results: dict[str, float | str | dict[str, float | str]] = {}
    diagnosis: Diagnosis
    condition: str | None = None
    """The knowledge-base condition the diagnosis is, when it is one (drives results the record does not give)."""
    key_exams: list[str] = []
    differential: list[str] = []
    cant_miss: list[str] = []
    rubric: list[RubricItem] = []
    seed: int = 0
    source: str = ""


def age_band(age: int) -> str:
    return AGE_BANDS[0] if age < 40 else AGE_BANDS[1] if age < 65 else AGE_BANDS[2]


COMORBIDITIES = {  # condition -> (age weights per band, medication)
    "hypertension": ((0.1, 0.3, 0.5), "amlodipine 5 mg daily"),
    "type 2 diabetes": ((0.03, 0.12, 0.2), "metformin 1 g twice daily"),
    "high cholesterol": ((0.05, 0.25, 0.35), "atorvastatin 20 mg at night"),
    "asthma": ((0.08, 0.06, 0.05), "salbutamol inhaler as needed"),
    "hypothyroidism": ((0.02, 0.05, 0.08), "levothyroxine 75 micrograms daily"),
    "depression": ((0.08, 0.08, 0.06), "sertraline 50 mg daily"),
    "osteoarthritis": ((0.01, 0.1, 0.3), "paracetamol as needed"),
}
_SMOKING = ("Never smoked.", "Ex-smoker, stopped ten years ago.", "Smokes 15 cigarettes a day.")


def draw_condition(kb: KnowledgeBase, rng: random.Random) -> tuple[Condition, int, str]:
    """Demographics, then a condition from the prior P(condition | age band, sex)."""
    sex = rng.choice("MF")
    age = int(rng.triangular(18, 92, 55))
    band = age_band(age)
    conds = list(kb.conditions.values())
    weights = [c.prior.weight(band, sex) for c in conds]
    if not any(weights):
        raise ValueError(f"no condition has a positive prior for a {age}-year-old {sex}")
    return rng.choices(conds, weights)[0], age, sex


def specialty_of(kb: KnowledgeBase, specialty: str | None, condition: str | None = None) -> str | None:
    """``specialty`` as ``kb`` spells it (matched in any case), checked against ``condition`` when both are given."""
    if specialty is None:
        return None
    found = next((s for s in kb.specialties if s.casefold() == specialty.strip().casefold()), None)
    if found is None:
        raise ValueError(f"unknown specialty {specialty!r}; the knowledge base has: {', '.join(kb.specialties)}")
    if condition is not None and kb.conditions[condition].specialty != found:
        raise ValueError(
            f"condition {condition!r} is in {kb.conditions[condition].specialty}, not {found}: drop condition= or "
            "specialty="
        )
    return found


def draw_of_specialty(kb: KnowledgeBase, specialty: str, rng: np.random.Generator) -> str:
    """A condition of ``specialty``, drawn with ``rng`` in proportion to its prevalence."""
    pool = [c for c in kb.conditions.values() if c.specialty == specialty]
    weights = np.array([c.prior.prevalence for c in pool])
    return pool[int(rng.choice(len(pool), p=weights / weights.sum()))].id


def cases_of_specialty(kb: KnowledgeBase, cases: list[CaseRecord], specialty: str, source: str) -> list[CaseRecord]:
    """The cases whose knowledge-base condition is of ``specialty`` (a case outside the knowledge base has none)."""
    kept = [c for c in cases if c.condition in kb.conditions and kb.conditions[c.condition].specialty == specialty]
    if not kept:
        raise ValueError(f"{source}: no case is a knowledge-base condition of {specialty}; drop specialty= or the file")
    return kept


def generate_case(kb: KnowledgeBase, seed: int, condition: str | None = None) -> CaseRecord:
    """A synthetic case, deterministic in ``seed`` (and ``condition`` when given)."""
    rng = random.Random(seed)
    if condition is None:
        cond, age, sex = draw_condition(kb, rng)
    else:
        cond = kb.conditions[condition]
        sexes = [s for s in "MF" if cond.prior.sex.get(s, 1.0) > 0]
        sex = rng.choice(sexes)
        bands = [b for b in AGE_BANDS if cond.prior.age.get(b, 1.0) > 0]
        band = rng.choice(bands)
        age = {"18-39": rng.randint(18, 39), "40-64": rng.randint(40, 64), "65+": rng.randint(65, 90)}[band]
    history: dict[str, str | bool] = {f: rng.random() < p for f, p in cond.history.items()}
    if not any(history.values()):
        history[max(cond.history, key=cond.history.__getitem__)] = True
    band_i = AGE_BANDS.index(age_band(age))
    own = {fold(n) for n in (cond.name, *cond.aliases)}  # a new diagnosis is not already in the past history
    pmh = [name for name, (w, _) in COMORBIDITIES.items() if rng.random() < w[band_i] and fold(name) not in own]
    meds = [COMORBIDITIES[n][1] for n in pmh]
    smokes = any(v and "smok" in f for f, v in history.items())
    social = _SMOKING[2] if smokes else rng.choice(_SMOKING[:2])
    complaints = cond.complaints
    complaint = complaints[0] if len(complaints) == 1 or rng.random() < 0.7 else rng.choice(complaints[1:])
    return CaseRecord(
        id=f"syn-{cond.id}-{seed & 0xFFFFFFFF:08x}",
        profile=Profile(age=age, sex=sex, history=pmh, medications=meds, social=social),
        complaint=complaint,
        history=history,
        examination=dict(cond.exam),
        diagnosis=Diagnosis(name=cond.name, aliases=list(cond.aliases), icd10=cond.icd10),
        condition=cond.id,
        key_exams=list(cond.key_exams),
        differential=list(cond.differential),
        cant_miss=list(cond.cant_miss),
        rubric=physician_rubric(kb, cond, history),
        seed=seed,
        source="synthetic",
    )


def physician_rubric(kb: KnowledgeBase, cond: Condition, history: dict[str, str | bool]) -> list[RubricItem]:
    """A DiagBench-style weighted rubric for a synthetic case, written from the knowledge base."""
    items = [RubricItem(text=f"Reaches the diagnosis of {cond.name}.", weight=5, kind="diagnosis")]
    for e in cond.key_exams:
        items.append(
            RubricItem(
                text=f"Orders {kb.exams[e].name} to establish the diagnosis.", weight=3, kind="exam_ordered", target=e
            )
        )
    for d in cond.cant_miss:
        items.append(
            RubricItem(
                text=f"Considers and excludes {kb.conditions[d].name} before committing.",
                weight=2,
                kind="considered",
                target=d,
            )
        )
    present = [f for f, v in history.items() if v]
    for f in sorted(present, key=lambda f: -cond.history[f])[:2]:
        items.append(RubricItem(text=f"Asks about {f}.", weight=1, kind="asked", target=f))
    items.append(
        RubricItem(text="Avoids invasive tests the presentation does not call for.", weight=2, kind="avoid_invasive")
    )
    return items
