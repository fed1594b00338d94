"""The knowledge base's file schema (pydantic) and its loader.

A knowledge base is a folder with ``exams.yaml`` (the exam catalogue: analytes, panels, reports) and
``conditions/*.yaml`` (one file per specialty, a list of conditions). ``load_kb(folder)`` validates every record
and every cross-reference (key exams and effects name catalogue exams, differentials name conditions) and fails
before any episode starts with a ``KnowledgeBaseError`` naming the file, the record and the field.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rubricgym.core.jsonl import read_text

AGE_BANDS = ("18-39", "40-64", "65+")
Kind = Literal["lab", "panel", "imaging", "ecg", "culture", "bedside", "procedure", "serology"]
Level = Literal["low", "very low", "high", "very high"]
SYSTEMS = (
    "general",
    "vital signs",
    "cardiovascular",
    "respiratory",
    "abdominal",
    "neurological",
    "musculoskeletal",
    "skin",
    "head and neck",
    "pelvic",
)
DEFAULT_KB = Path(__file__).with_name("kb")


class KnowledgeBaseError(ValueError):
    """A knowledge-base file that does not fit the schema; the message names file, record and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Exam(_Strict):
    """One orderable exam: a numeric analyte (``unit`` + ``ref``), a panel (``members``) or a report (``normal``)."""

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    name: str
    aliases: list[str] = []
    kind: Kind
    unit: str | None = None
    ref: tuple[float, float] | None = None
    """Adult reference range (inclusive); ``ref_f`` overrides it for women."""
    ref_f: tuple[float, float] | None = None
    decimals: int = Field(1, ge=0, le=3)
    members: list[str] = []
    normal: str | None = None
    """The normal report (imaging, ECG, cultures, qualitative tests)."""
    derived: tuple[str, float] | None = None
    """(analyte, factor): this analyte tracks another (haematocrit = 3 x haemoglobin) so results agree."""
    cost: float = Field(ge=0)
    """Approximate cost in US dollars."""
    invasiveness: int = Field(ge=0, le=3)
    """0 non-invasive, 1 venepuncture or plain radiograph, 2 contrast / high radiation, 3 invasive procedure."""
    turnaround_h: float = Field(ge=0)
    orderable: bool = True

    @model_validator(mode="after")
    def _shape(self) -> Exam:
        numeric = self.ref is not None
        if numeric and not self.unit:
            raise ValueError("a numeric analyte (with 'ref') needs a 'unit'")
        if self.ref is not None and self.ref[0] > self.ref[1]:
            raise ValueError(f"'ref' low {self.ref[0]} is above high {self.ref[1]}")
        if self.ref_f is not None and not numeric:
            raise ValueError("'ref_f' needs 'ref' too")
        kinds = [numeric, bool(self.members), self.normal is not None]
        if sum(kinds) != 1:
            raise ValueError(
                "an exam is exactly one of: analyte ('unit' + 'ref'), panel ('members'), report ('normal')"
            )
        return self

    @property
    def is_analyte(self) -> bool:
        return self.ref is not None

    def ref_for(self, sex: str) -> tuple[float, float]:
        assert self.ref is not None
        return self.ref_f if sex == "F" and self.ref_f is not None else self.ref


class Prior(_Strict):
    """Relative prior weight: ``prevalence`` x age-band weight x sex weight."""

    prevalence: float = Field(1.0, gt=0)
    age: dict[str, float] = {"18-39": 1.0, "40-64": 1.0, "65+": 1.0}
    """Weight per age band (18-39, 40-64, 65+); a band left out weighs 1."""
    sex: dict[str, float] = {"M": 1.0, "F": 1.0}

    @field_validator("age", "sex")
    @classmethod
    def _non_negative(cls, v: dict[str, float], info: Any) -> dict[str, float]:
        keys = AGE_BANDS if info.field_name == "age" else ("M", "F")
        unknown = [k for k in v if k not in keys]
        if unknown:
            raise ValueError(f"unknown keys {unknown}; use {list(keys)}")
        bad = {k: w for k, w in v.items() if w < 0}
        if bad:
            raise ValueError(f"weights must be >= 0, got {bad}")
        return v

    def weight(self, band: str, sex: str) -> float:
        return self.prevalence * self.age.get(band, 1.0) * self.sex.get(sex, 1.0)


Effect = tuple[float, float] | Level | str
"""An exam's result under a condition: a numeric range, a level relative to the reference range, or report text."""


class Condition(_Strict):
    """A diagnosable condition with its prior, presentation, findings, key exams and differential."""

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    name: str
    aliases: list[str] = []
    icd10: str = Field(pattern=r"^[A-Z][0-9]{2}(\.[0-9A-Z]{1,4})?$")
    specialty: str
    prior: Prior = Prior()
    complaints: list[str] = Field(min_length=1)
    """Presenting complaints (the first is the most typical); the guesser's prior is keyed by these."""
    history: dict[str, float] = Field(min_length=1)
    """History findings (patient's words) with P(finding | condition)."""
    exam: dict[str, str] = {}
    """Physical-exam findings by system."""
    effects: dict[str, Effect] = {}
    """Exam id -> result under this condition (vitals are analytes too: heart_rate, sbp, temperature...)."""
    key_exams: list[str] = []
    differential: list[str] = []
    cant_miss: list[str] = []
    """Members of the differential that are dangerous to miss."""
    sources: list[str] = Field(min_length=1)

    @field_validator("history")
    @classmethod
    def _probabilities(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: p for k, p in v.items() if not 0.0 < p <= 1.0}
        if bad:
            raise ValueError(f"likelihoods must be in (0, 1], got {bad}")
        return v

    @field_validator("exam")
    @classmethod
    def _systems(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [s for s in v if s not in SYSTEMS]
        if bad:
            raise ValueError(f"unknown systems {bad}; use {list(SYSTEMS)}")
        return v

    @model_validator(mode="after")
    def _cant_miss_in_differential(self) -> Condition:
        extra = [c for c in self.cant_miss if c not in self.differential]
        if extra:
            raise ValueError(f"cant_miss {extra} must also be listed in 'differential'")
        return self


class KnowledgeBase:
    """Conditions and the exam catalogue, indexed (built by ``load_kb``)."""

    def __init__(self, conditions: list[Condition], exams: list[Exam], folder: Path):
        self.folder = folder
        self.conditions = {c.id: c for c in conditions}
        self.exams = {e.id: e for e in exams}
        self.orderable = [e for e in exams if e.orderable]
        self.specialties = sorted({c.specialty for c in conditions})
        self.notes: list[str] = []
        """What merging an overlay reported (replaced ids, names used twice)."""

    def analytes_of(self, exam_id: str) -> list[str]:
        """The analytes an exam reports (a panel expands into its members, recursively)."""
        exam = self.exams[exam_id]
        if not exam.members:
            return [exam_id]
        return [a for m in exam.members for a in self.analytes_of(m)]


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(read_text(path, KnowledgeBaseError))
    except yaml.YAMLError as e:
        raise KnowledgeBaseError(f"{path}: not valid YAML: {e}") from None


def _records(path: Path, model: type[_Strict], key: str) -> list[Any]:
    data = _read_yaml(path)
    if isinstance(data, dict) and key in data:
        data = data[key]
    if not isinstance(data, list):
        raise KnowledgeBaseError(f"{path}: expected a list of {key} (or a mapping with '{key}: [...]')")
    out = []
    for i, rec in enumerate(data):
        name = rec.get("id", f"#{i}") if isinstance(rec, dict) else f"#{i}"
        try:
            out.append(model.model_validate(rec))
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or "(record)"
            raise KnowledgeBaseError(
                f"{path}: {key[:-1]} {name!r}, field {field!r}: {err['msg']} ({len(e.errors())} error(s) in this "
                "record); fix the record to match the schema in rubricgym/envs/clinical/schema.py"
            ) from None
    return out


def _cross_check(conditions: list[Condition], exams: list[Exam], where: dict[str, Path]) -> None:  # noqa: C901 (one pass over every cross-reference of the knowledge base)
    by_id = {e.id: e for e in exams}
    ids = {c.id for c in conditions}
    for e in exams:
        for m in e.members:
            if m not in by_id:
                raise KnowledgeBaseError(f"{where['exams']}: exam {e.id!r}, field 'members': unknown exam {m!r}")
        if e.derived and e.derived[0] not in by_id:
            raise KnowledgeBaseError(f"{where['exams']}: exam {e.id!r}, field 'derived': unknown exam {e.derived[0]!r}")
    for c in conditions:
        path = where[c.id]
        for field, names in (("key_exams", c.key_exams), ("effects", list(c.effects))):
            for n in names:
                if n not in by_id:
                    close = ", ".join(sorted(k for k in by_id if k[:4] == n[:4])[:5])
                    raise KnowledgeBaseError(
                        f"{path}: condition {c.id!r}, field {field!r}: {n!r} is not in the exam catalogue"
                        + (f" (close: {close})" if close else "")
                    )
        for n in c.key_exams:
            if not by_id[n].orderable:
                raise KnowledgeBaseError(f"{path}: condition {c.id!r}, field 'key_exams': {n!r} is not orderable")
        for n, eff in c.effects.items():
            numeric = by_id[n].is_analyte
            if numeric and isinstance(eff, str) and eff not in ("low", "very low", "high", "very high"):
                raise KnowledgeBaseError(
                    f"{path}: condition {c.id!r}, field 'effects.{n}': analyte needs a [low, high] range or a level "
                    f"(low, very low, high, very high), got {eff!r}"
                )
            if not numeric and not isinstance(eff, str):
                raise KnowledgeBaseError(f"{path}: condition {c.id!r}, field 'effects.{n}': a report needs text")
            if by_id[n].members:
                raise KnowledgeBaseError(
                    f"{path}: condition {c.id!r}, field 'effects.{n}': set effects on analytes, not panels"
                )
        for d in c.differential:
            if d not in ids:
                raise KnowledgeBaseError(f"{path}: condition {c.id!r}, field 'differential': unknown condition {d!r}")
            if d == c.id:
                raise KnowledgeBaseError(f"{path}: condition {c.id!r}, field 'differential': lists itself")


def load_kb(folder: str | Path | None = None) -> KnowledgeBase:
    """The knowledge base in ``folder`` (default: the built-in one), validated; loaded once per folder and process
    (a folder that failed to load is read again on the next call)."""
    return _load(Path(folder).expanduser().resolve() if folder else DEFAULT_KB)


@functools.cache
def _load(root: Path) -> KnowledgeBase:
    if not (root / "exams.yaml").is_file():
        raise KnowledgeBaseError(f"{root}: a knowledge base folder needs exams.yaml and conditions/*.yaml")
    exams = _records(root / "exams.yaml", Exam, "exams")
    where: dict[str, Path] = {"exams": root / "exams.yaml"}
    conditions: list[Condition] = []
    for path in sorted((root / "conditions").glob("*.y*ml")):
        for c in _records(path, Condition, "conditions"):
            if c.id in where:
                raise KnowledgeBaseError(f"{path}: condition {c.id!r}, field 'id': already defined in {where[c.id]}")
            where[c.id] = path
            conditions.append(c)
    if not conditions:
        raise KnowledgeBaseError(f"{root}/conditions: no condition files (*.yaml)")
    seen: set[str] = set()
    for e in exams:
        if e.id in seen:
            raise KnowledgeBaseError(f"{root / 'exams.yaml'}: exam {e.id!r}, field 'id': defined twice")
        seen.add(e.id)
    _cross_check(conditions, exams, where)
    return KnowledgeBase(conditions, exams, root)
