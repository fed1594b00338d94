"""Rubric schema: ``Criterion``, ``Rubric`` (loaded from and saved to YAML, JSON or TOML) and ``Verdict``.

These models live in ``core`` so an env's ``default_rubric()`` can return a typed ``Rubric``; ``rewards``
judges and aggregates them (``rubricgym.rewards.rubric`` re-exports them).

A rubric file (or an env's ``default_rubric()``, or ``Task.rubric``) looks like::

    id: toy-calculator              # required
    version: "1"                    # bump when criteria change; part of the content hash
    description: optional free text
    aggregation:                    # optional; default {"method": "rar"}
      method: rar | signed | rar_implicit | renorm | swe_trace | carr   (a name in core.aggregation.AGGREGATIONS)
      gamma: 0.7                    # swe_trace: the margin γ in (0.5, 1)
      outcome_check: tests_pass     # swe_trace / renorm / carr: named check (or criterion id) whose met=True
                                    #   means success; default: the env's outcome reward (>= 0.5 is success)
      alpha: 0.3                    # carr: C-GRPO mixing weight
      answer_entity: E0             # carr: the BFS root
    criteria:
      - id: correct                 # unique within the rubric
        text: The final answer is correct.
        level: essential            # essential 1.0 | important 0.7 | optional 0.3 | pitfall 0.9 (positive)
        weight: -0.9                # optional explicit signed weight; overrides the level's weight
        scope: trajectory           # step (judged on every step, with the preceding context) | trajectory
        stage: answer               # optional: step-scope criteria only run on steps of this stage; every
                                    #   criterion with a stage counts towards that stage's roll-up
        check: final_answer_correct # a named programmatic check of the env (``env.checks()``), or
        judge: "Is the answer ..."  # an instruction for an LLM judge (neither: the LLM judges ``text``)
        entities: [E0, E1]          # carr: the entities a single-hop statement mentions
        applies_if: edited          # optional: the criterion applies only when this holds, else its verdict
                                    #   is N/A and it leaves numerator and denominator of every aggregate.
                                    #   A named env check (met = applies) or a built-in condition: answered,
                                    #   acted, edited, tool:NAME; prefix not: to negate; a|b: either;
                                    #   a list: all of them.

Errors name the file, the criterion and the field (``RubricError``). The content hash (``Rubric.hash``) covers
everything that changes a verdict and keys the judge cache.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from rubricgym.core.aggregation import aggregation_method
from rubricgym.core.jsonl import read_text
from rubricgym.core.types import Wire

LEVEL_WEIGHTS: dict[str, float] = {"essential": 1.0, "important": 0.7, "optional": 0.3, "pitfall": 0.9}
"""RaR's weights per criterion level (pitfalls are phrased positively, "avoids X", so they weigh +0.9)."""

Level = Literal["essential", "important", "optional", "pitfall"]


def _known_method(name: str) -> str:
    aggregation_method(name)
    return name


Method = Annotated[str, AfterValidator(_known_method)]
"""An aggregation method's name, checked against ``core.aggregation.AGGREGATIONS`` when a rubric loads."""


BUILTIN_CONDITIONS = ("answered", "acted", "edited")
"""``applies_if`` conditions every env understands (``rewards.applicability``); ``tool:NAME`` is one too."""


def condition_check(condition: str) -> str | None:
    """The env check an ``applies_if`` alternative names (``None`` for a built-in or ``tool:NAME``)."""
    name = condition.removeprefix("not:")
    return None if name in BUILTIN_CONDITIONS or name.startswith("tool:") else name


class RubricError(ValueError):
    """A rubric that does not fit the schema; the message names the file, criterion and field."""


class Criterion(Wire):
    """One rubric item, judged by a named env ``check`` or by an LLM (``judge`` instruction or ``text``)."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    level: Level = "important"
    weight: float | None = Field(None, allow_inf_nan=False)
    scope: Literal["step", "trajectory"] = "trajectory"
    stage: str | None = None
    check: str | None = None
    judge: str | None = None
    entities: list[str] | None = None
    applies_if: list[str] | None = None
    """Conditions that must all hold for the criterion to apply (see the module docstring); else N/A."""

    @field_validator("applies_if", mode="before")
    @classmethod
    def _conditions(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [v]
        if isinstance(v, list):
            for cond in v:
                names = [alt.removeprefix("not:") for alt in cond.split("|")] if isinstance(cond, str) else [""]
                if any(not name.strip() or name == "tool:" for name in names):
                    raise ValueError(
                        f"condition {cond!r} is empty: name a check, or answered, acted, edited, tool:NAME"
                    )
        return v

    @model_validator(mode="after")
    def _one_judging_mode(self) -> Criterion:
        if self.check is not None and self.judge is not None:
            raise ValueError("set either 'check' (a named env check) or 'judge' (an LLM instruction), not both")
        if self.weight is not None and self.weight == 0:
            raise ValueError("weight 0 makes the criterion count for nothing: remove it or give it a weight")
        return self

    @property
    def resolved_weight(self) -> float:
        """The explicit signed weight if given, else the RaR weight of the level."""
        return self.weight if self.weight is not None else LEVEL_WEIGHTS[self.level]

    @property
    def judged_by(self) -> Literal["check", "llm"]:
        return "check" if self.check is not None else "llm"


class Aggregation(Wire):
    """How verdicts become the rubric's total (see ``rewards.aggregate`` for the formulas)."""

    method: Method = "rar"
    gamma: float = Field(0.7, allow_inf_nan=False)
    outcome_check: str | None = None
    rubric_check: str | None = None
    """carr: the criterion (or env check) whose score is R_rubric, when an env check computes the whole chain
    instead of per-statement criteria with ``entities``."""
    alpha: float = Field(0.3, allow_inf_nan=False)
    answer_entity: str = "E0"
    likert_low: float = Field(1.0, allow_inf_nan=False)
    likert_high: float = Field(10.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _params(self) -> Aggregation:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        if self.likert_high <= self.likert_low:
            raise ValueError("likert_high must be above likert_low")
        return self


class Rubric(Wire):
    """A versioned list of criteria plus how to aggregate them."""

    id: str = Field(min_length=1)
    version: str = "1"
    description: str = ""
    criteria: list[Criterion]
    aggregation: Aggregation = Field(default_factory=Aggregation)

    @model_validator(mode="before")
    @classmethod
    def _coerce_version(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("version"), int | float):
            data = {**data, "version": str(data["version"])}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        seen: set[str] = set()
        for c in self.criteria:
            if c.id in seen:
                raise ValueError(f"criterion id {c.id!r} appears twice: ids must be unique")
            seen.add(c.id)
        check = aggregation_method(self.aggregation.method).check
        if check is not None and (problem := check(self)) is not None:
            raise ValueError(problem)
        return self

    # ---- identity ------------------------------------------------------------------------------------

    @property
    def hash(self) -> str:
        """Content hash (sha256, 16 hex) of everything that can change a verdict or the total."""
        data = self.model_dump(exclude={"description"})
        for c in data["criteria"]:  # fields added later leave the hash of rubrics that do not use them alone
            if c.get("applies_if") is None:
                c.pop("applies_if", None)
        payload = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    def criterion(self, id: str) -> Criterion:
        for c in self.criteria:
            if c.id == id:
                return c
        raise KeyError(f"rubric {self.id!r} has no criterion {id!r}; it has: {', '.join(c.id for c in self.criteria)}")

    def referenced_checks(self) -> set[str]:
        """Every env check the rubric names: criteria's ``check`` and the checks in their ``applies_if``."""
        names = {c.check for c in self.criteria if c.check}
        for c in self.criteria:
            for cond in c.applies_if or []:
                names |= {n for alt in cond.split("|") if (n := condition_check(alt))}
        return names

    @property
    def step_criteria(self) -> list[Criterion]:
        return [c for c in self.criteria if c.scope == "step"]

    @property
    def trajectory_criteria(self) -> list[Criterion]:
        return [c for c in self.criteria if c.scope == "trajectory"]

    # ---- files ---------------------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> Rubric:
        """Validate ``data``; errors name ``source``, the criterion (by id when it has one) and the field."""
        if isinstance(data, Rubric):
            return data
        if not isinstance(data, dict):
            raise RubricError(
                f"{source}: a rubric must be a mapping with 'id' and 'criteria', got {type(data).__name__}"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise RubricError(_explain(e, data, source)) from None

    @classmethod
    def load(cls, path: str | Path) -> Rubric:
        """Read a rubric from ``.yaml``/``.yml``, ``.json`` or ``.toml``."""
        p = Path(path)
        if not p.exists():
            raise RubricError(f"{p}: no such rubric file")
        text = read_text(p, RubricError)
        suffix = p.suffix.lower()
        try:
            if suffix in (".yaml", ".yml"):
                data = yaml.safe_load(text)
            elif suffix == ".json":
                data = json.loads(text)
            elif suffix == ".toml":
                data = tomllib.loads(text)
            else:
                raise RubricError(f"{p}: unknown rubric format {suffix!r}; use .yaml, .json or .toml")
        except (yaml.YAMLError, json.JSONDecodeError, tomllib.TOMLDecodeError) as e:
            raise RubricError(f"{p}: not valid {suffix.lstrip('.').upper()}: {e}") from None
        return cls.from_dict(data, source=str(p))

    def save(self, path: str | Path) -> Path:
        """Write the rubric in the format its suffix names; ``Rubric.load`` reads it back unchanged."""
        p = Path(path)
        data = self.model_dump(exclude_none=True)
        suffix = p.suffix.lower()
        if suffix in (".yaml", ".yml"):
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        elif suffix == ".json":
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
        elif suffix == ".toml":
            text = _to_toml(data)
        else:
            raise RubricError(f"{p}: unknown rubric format {suffix!r}; use .yaml, .json or .toml")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        return p


class Evidence(Wire):
    """What a verdict rests on: step indices, quoted spans and citations (URLs, document ids)."""

    steps: list[int] = Field(default_factory=list)
    quotes: list[str] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list)


APPLIES_IF_JUDGE = "applies_if"
"""The ``judge`` of a verdict decided by a criterion's ``applies_if`` condition (N/A, or its error)."""
PROGRAMMATIC_JUDGES = frozenset({"check", APPLIES_IF_JUDGE})
"""Judge ids whose verdicts come from code, not from a model."""


class Verdict(Wire):
    """A judge's decision on one criterion: met, unmet, not applicable (N/A) or failed. ``step`` is set for
    step-scope criteria.

    A judge that fails (endpoint down, unparseable output, unknown check) sets ``error`` and leaves
    ``score``/``met`` ``None``: a failure is never a zero. A criterion that does not apply (a pitfall the agent
    never came near) has ``applicable=False`` and no score: it leaves numerator and denominator of every
    aggregate, so doing nothing earns nothing. Only ``scored`` verdicts enter an aggregate.
    """

    criterion_id: str
    step: int | None = None
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    met: bool | None = None
    applicable: bool = True
    rationale: str = ""
    evidence: Evidence = Field(default_factory=Evidence)
    judge: str = ""
    model: str | None = None
    latency_s: float = 0.0
    error: str | None = None
    cached: bool = False
    members: list[Verdict] = Field(default_factory=list)
    """A panel's individual verdicts."""
    details: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _score_or_error(self) -> Verdict:
        if self.error is not None and self.score is not None:
            raise ValueError("a failed verdict carries no score: a judge error is never a 0")
        if not self.applicable and (self.score is not None or self.met is not None):
            raise ValueError("a not-applicable verdict carries no score or met: it counts for nothing either way")
        if self.error is None and self.applicable and (self.score is None or self.met is None):
            raise ValueError("a verdict without an error needs both score and met")
        return self

    @property
    def ok(self) -> bool:
        """No judge error (the verdict is met, unmet or N/A)."""
        return self.error is None

    @property
    def scored(self) -> bool:
        """Met or unmet: the verdicts that enter an aggregate (not failed, not N/A)."""
        return self.error is None and self.applicable

    @property
    def by_model(self) -> bool:
        """Decided by a model judge (an LLM or a panel), not by a check or an ``applies_if`` condition."""
        return bool(self.judge) and self.judge not in PROGRAMMATIC_JUDGES

    @property
    def status(self) -> Literal["met", "unmet", "n/a", "error"]:
        if self.error is not None:
            return "error"
        if not self.applicable:
            return "n/a"
        return "met" if self.met else "unmet"

    @classmethod
    def failed(
        cls, criterion_id: str, error: str, *, step: int | None = None, judge: str = "", **fields: Any
    ) -> Verdict:
        return cls(criterion_id=criterion_id, step=step, error=error, judge=judge, **fields)

    @classmethod
    def not_applicable(
        cls, criterion_id: str, rationale: str, *, step: int | None = None, judge: str = "", **fields: Any
    ) -> Verdict:
        return cls(criterion_id=criterion_id, step=step, applicable=False, rationale=rationale, judge=judge, **fields)


def load_rubric(source: str | Path | dict[str, Any] | Rubric) -> Rubric:
    """A ``Rubric`` from a file path, a dict in the schema, or a ``Rubric``."""
    if isinstance(source, Rubric):
        return source
    if isinstance(source, dict):
        return Rubric.from_dict(source)
    return Rubric.load(source)


def _explain(error: ValidationError, data: dict[str, Any], source: str) -> str:
    lines = []
    raw = data.get("criteria")
    criteria: list[Any] = raw if isinstance(raw, list) else []
    for err in error.errors():
        loc = list(err["loc"])
        where = "rubric"
        if len(loc) >= 2 and loc[0] == "criteria" and isinstance(loc[1], int):
            i = loc[1]
            cid = criteria[i].get("id") if i < len(criteria) and isinstance(criteria[i], dict) else None
            where = f"criterion {cid!r}" if cid else f"criterion #{i + 1}"
            loc = loc[2:]
        field = ".".join(str(x) for x in loc) or "(whole)"
        lines.append(f"{source}: {where}, field {field!r}: {err['msg']}")
    return "\n".join(lines)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise RubricError(f"cannot write {type(v).__name__} to TOML")


def _to_toml(data: dict[str, Any]) -> str:
    """TOML for the rubric's shape: top-level scalars, an ``[aggregation]`` table, ``[[criteria]]`` tables."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict | list)]
    for k, v in data.items():
        if isinstance(v, dict):
            lines += ["", f"[{k}]"] + [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items()]
    for item in data.get("criteria", []):
        lines += ["", "[[criteria]]"] + [f"{k} = {_toml_value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"
