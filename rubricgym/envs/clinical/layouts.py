"""The public case-collection layouts ``rubricgym clinical import`` reads, told apart by the record itself.

- ``osce``: ``OSCE_Examination`` {``Patient_Actor``, ``Physical_Examination_Findings``, ``Test_Results``,
  ``Correct_Diagnosis``}: agent-clinic's MedQA, MedQA-extended and MIMIC-IV collections (``osce.py``).
- ``nejm``: ``question``, ``answers`` [{``text``, ``correct``}], ``patient_info``, ``physical_exams``: agent-clinic's
  NEJM and NEJM-extended collections (``nejm.py``).

``auto`` (the default) detects each record's layout; a named layout is checked against every record, and a record
of another layout, or of none, is reported with the layouts that exist and how to pass ``--format``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricgym.envs.clinical.nejm import NejmImporter
from rubricgym.envs.clinical.osce import CaseReport, OsceImporter, read_records
from rubricgym.envs.clinical.schema import KnowledgeBase


@dataclass(frozen=True)
class Layout:
    name: str
    collections: str
    fields: str


LAYOUTS = {
    "osce": Layout(
        "osce",
        "MedQA, MedQA-extended, MIMIC-IV",
        "OSCE_Examination {Patient_Actor, Physical_Examination_Findings, Test_Results, Correct_Diagnosis}",
    ),
    "nejm": Layout("nejm", "NEJM, NEJM-extended", "question, answers [{text, correct}], patient_info, physical_exams"),
}
ALIASES = {
    "auto": "auto",
    "osce": "osce",
    "medqa": "osce",
    "medqa-extended": "osce",
    "mimiciv": "osce",
    "mimic-iv": "osce",
    "nejm": "nejm",
    "nejm-extended": "nejm",
}
"""Every ``--format`` value, with the layout it names (a collection's name works as well as its layout's)."""

FORMAT_HELP = "layout of FILE: auto (detected per record, the default), " + ", ".join(
    f"{lay.name} ({lay.collections})" for lay in LAYOUTS.values()
)


def known_layouts() -> str:
    """The layouts, their collections and their fields, as a line for messages."""
    return "; ".join(f"{lay.name} ({lay.collections}): {lay.fields}" for lay in LAYOUTS.values())


def layout_format(fmt: str) -> str:
    """The layout (``auto``, ``osce``, ``nejm``) a ``--format`` value names; ``ValueError`` listing them otherwise."""
    found = ALIASES.get(fmt.strip().lower())
    if found is None:
        raise ValueError(
            f"unknown format {fmt!r}; pass --format with one of: {', '.join(ALIASES)} (auto detects each record's "
            f"layout). Layouts: {known_layouts()}"
        )
    return found


def detect_layout(record: Any) -> str | None:
    """The layout of one record, or ``None`` when it is none the importer knows."""
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("OSCE_Examination"), dict) or "Patient_Actor" in record:
        return "osce"
    if "answers" in record and ({"patient_info", "physical_exams", "question"} & set(record)):
        return "nejm"
    return None


def _unsupported(record: Any, fmt: str) -> str:
    what = f"keys {', '.join(map(repr, list(record)[:8]))}" if isinstance(record, dict) else type(record).__name__
    wanted = f"not in the {fmt} layout" if fmt != "auto" else "not in a layout the importer knows"
    return (
        f"{wanted} (the record has {what}). Known layouts: {known_layouts()}. Convert the record to one of them "
        "(or write the case format directly: docs/guides/public-data-2.md), or pass --format for the file's layout"
    )


def import_file(
    path: str | Path, kb: KnowledgeBase, fmt: str = "auto"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[CaseReport]]:
    """``(cases, overlay exams, reports)`` of a case collection in any known layout (``fmt``: a ``--format``
    value). A record of another layout than the one asked for, or of none, is reported (its ``error`` says which
    layouts exist and how to pass ``--format``), and the others still import."""
    return import_records(list(read_records(Path(path))), kb, fmt)


def import_records(
    records: list[tuple[int, str, Any]],
    kb: KnowledgeBase,
    fmt: str = "auto",
    on_record: Callable[[CaseReport], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[CaseReport]]:
    """``import_file`` on records already read (``osce.read_records``); ``on_record`` is called with each
    record's report as it is done (the CLI's progress)."""
    fmt = layout_format(fmt)
    osce = OsceImporter(kb)
    nejm = NejmImporter(kb, overlay=osce.overlay)  # one overlay for the file, whichever layouts it mixes
    cases, reports = [], []
    for index, where, record in records:
        found = None if isinstance(record, Exception) else detect_layout(record)
        if isinstance(record, Exception) or found is not None and fmt in ("auto", found):
            importer = nejm if found == "nejm" else osce
            case, report = importer.case(index, record)
        else:
            case, report = None, CaseReport(index, f"record-{index:04d}")
            if found is not None:
                report.error = (
                    f"the record is in the {found} layout ({LAYOUTS[found].collections}), not {fmt}: pass "
                    f"--format {found}, or --format auto to detect each record's layout"
                )
            else:
                report.error = _unsupported(record, fmt)
        report.where = where
        reports.append(report)
        if case is not None:
            cases.append(case)
        if on_record is not None:
            on_record(report)
    return cases, list(osce.overlay.values()), reports
