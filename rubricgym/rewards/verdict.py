"""``Verdict``: one judge's decision on one criterion for one trajectory (or one step of it).

A judge that fails (endpoint down, unparseable output, unknown check) returns a verdict with ``error`` set and
``score``/``met`` left ``None``: a failure is never a zero. Aggregators skip such verdicts and count them, so
trainers can drop or mask the samples they affect.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from rubricgym.core.types import Wire


class Evidence(Wire):
    """What a verdict rests on: step indices, quoted spans and citations (URLs, document ids)."""

    steps: list[int] = Field(default_factory=list)
    quotes: list[str] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list)


class Verdict(Wire):
    """A judge's decision on one criterion. ``step`` is set for step-scope criteria."""

    criterion_id: str
    step: int | None = None
    score: float | None = Field(default=None, ge=0.0, le=1.0)
    met: bool | None = None
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
        if self.error is None and (self.score is None or self.met is None):
            raise ValueError("a verdict without an error needs both score and met")
        if self.error is not None and self.score is not None:
            raise ValueError("a failed verdict carries no score: a judge error is never a 0")
        return self

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def failed(
        cls, criterion_id: str, error: str, *, step: int | None = None, judge: str = "", **fields: Any
    ) -> Verdict:
        return cls(criterion_id=criterion_id, step=step, error=error, judge=judge, **fields)
