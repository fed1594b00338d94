"""What the SWE tools record in ``Step.info`` (read by the checks and ``stage_of``, see ``core.steprecord``).

Tools that change files write ``Edits`` records (``changed_files``), which the generic ``edited`` condition of
``applies_if`` reads too. The episode's last step (``submit``, or any tool on the step limit) also carries the
``grading`` of the repository as it was left.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from rubricgym.core.steprecord import Edits, StepRecords, ToolRecord


class Grading(BaseModel):
    """The hidden tests' verdict on the repository (``grading.Grade.to_info``)."""

    model_config = ConfigDict(extra="forbid")
    resolved: bool
    score: float
    fail_to_pass: dict[str, bool]
    pass_to_pass: dict[str, bool]
    model_patch: str
    restored_tests: list[str]
    tampering: list[str]
    error: str | None


class SweRecord(ToolRecord):
    """Base of the SWE records: which tool wrote it, and the grading when the episode ended on it."""

    tool: str
    grading: Grading | None = None
    """Set on the episode's last step only (left unset elsewhere, so no ``grading`` key)."""


class Bash(Edits, SweRecord):
    tool: Literal["bash"]
    command: str
    exit_code: int
    limit: str | None
    """The sandbox limit that killed the command (``timeout``, ``output``), if any."""
    deleted_files: list[str]
    ran_tests: bool
    """Whether the command looks like a test run (pytest, unittest, tox...)."""
    destructive: list[str]
    """The destructive patterns the command matches."""


class View(SweRecord):
    tool: Literal["view"]
    path: str


class StrReplace(Edits, SweRecord):
    tool: Literal["str_replace"]
    path: str


class Create(Edits, SweRecord):
    tool: Literal["create"]
    path: str


class RunTests(SweRecord):
    tool: Literal["run_tests"]
    selectors: list[str]
    ran_tests: Literal[True]
    exit_code: int
    limit: str | None
    failed: list[str]
    n_passed: int
    n_failed: int
    error: str | None


class Submit(SweRecord):
    tool: Literal["submit"]
    grading: Grading


RECORDS = StepRecords(
    "swe-v0",
    {"bash": Bash, "view": View, "str_replace": StrReplace, "create": Create, "run_tests": RunTests, "submit": Submit},
)


def changed_files(record: ToolRecord | None) -> list[str]:
    """The files a step changed (none for a step that changes nothing)."""
    return record.changed_files if isinstance(record, Edits) else []


def ran_tests(record: ToolRecord | None) -> bool:
    """Whether a step ran the tests (``run_tests``, or a bash command that runs them)."""
    return isinstance(record, Bash | RunTests) and record.ran_tests
