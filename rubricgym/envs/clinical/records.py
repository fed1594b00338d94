"""What the clinical tools record in ``Step.info`` (read by the checks, see ``core.steprecord``).

Only ``ClinicalEnv.public_info_keys`` of these reach the agent; whether an exam covers a key exam or the
diagnosis is right stays in the private record.
"""

from __future__ import annotations

from typing import Literal

from rubricgym.core.steprecord import StepRecords, ToolRecord


class ClinicalRecord(ToolRecord):
    """Base of the clinical records: which tool wrote it."""

    tool: str


class Ask(ClinicalRecord):
    tool: Literal["ask"]
    matched: list[str]
    """History facts the question asked about."""
    present: list[str]
    """Those of them the patient has."""
    source: str
    """``rules`` or ``llm`` (who answered)."""


class Examine(ClinicalRecord):
    tool: Literal["examine"]
    system: str


class Order(ClinicalRecord):
    """An exam as resolved against the knowledge base, its result and how it bears on the case."""

    tool: Literal["order"]
    exam: str
    name: str
    analytes: list[str]
    abnormal: list[str]
    cost: float
    invasiveness: int
    turnaround_h: float
    repeat: bool
    impression: str
    reason: str
    covers: list[str]
    """The case's key exams this order reports (the exam itself, or a panel with all their analytes)."""
    justified: bool
    fits_impression: bool | None = None
    """Whether the stated impression calls for the exam; ``None`` in trajectories recorded before it was kept."""
    source: str
    result: str


class Diagnose(ClinicalRecord):
    """The final diagnosis, how it matched the case and DiagGym's reward parts."""

    tool: Literal["diagnose"]
    diagnosis: str
    matched: str | None
    correct: bool
    differential: list[str]
    considered: list[str]
    reason: str
    cites: list[str]
    cites_unseen: list[str]
    cites_abnormal: list[str]
    any_abnormal: bool
    issued: float
    accuracy: float
    exam_precision: float
    exam_recall: float
    exam_f1: float
    diaggym: float
    diaggym_norm: float
    reward: float | None = None
    """The env's gated reward; ``None`` in trajectories recorded before it (they have ``diaggym`` only)."""


RECORDS = StepRecords("clinical-v0", {"ask": Ask, "examine": Examine, "order": Order, "diagnose": Diagnose})
