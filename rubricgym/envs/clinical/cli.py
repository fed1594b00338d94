"""``rubricgym clinical import``: case collections in public layouts to the case format ``clinical-v0`` loads.

Added to the main app by ``register(app)``::

    rubricgym clinical import cases_osce.jsonl --out cases.jsonl            # layout detected per record
    rubricgym clinical import nejm_extended.jsonl --format nejm --out nejm_cases.jsonl
    rubricgym run clinical-v0 --env-arg cases=cases.jsonl --agent oracle --tasks 1 --out runs/osce

The layouts are in ``layouts.py``; per case the import reports what it mapped, renamed, added and dropped, whether
the diagnosis is a knowledge-base condition, an alias of one or neither, and what the env's oracle scores on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rubricgym.core.progress import progress
from rubricgym.core.safeio import atomic_write
from rubricgym.envs.clinical.layouts import FORMAT_HELP

if TYPE_CHECKING:
    from rubricgym.envs.clinical.osce import CaseReport

clinical_app = typer.Typer(help="Clinical cases: import public case collections.", no_args_is_help=True)


@clinical_app.command("import")
def import_cases(
    file: Annotated[Path, typer.Argument(help="case collection: JSONL, a JSON list or one JSON object")],
    out: Annotated[Path, typer.Option("--out", help="cases file to write (JSONL the env's cases= takes)")],
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "auto",
    report: Annotated[Path | None, typer.Option(help="also write the per-case report as JSON here")] = None,
    kb: Annotated[str | None, typer.Option(help="knowledge-base folder (default: the bundled one)")] = None,
    force: Annotated[bool, typer.Option(help="replace OUT if it exists")] = False,
    oracle: Annotated[
        bool,
        typer.Option("--oracle/--no-oracle", help="play the env's oracle on every written case and report its score"),
    ] = True,
    allow_diagnosis_in_history: Annotated[
        bool,
        typer.Option(
            "--allow-diagnosis-in-history",
            help="import cases whose patient-visible text (complaint, history, profile, examination) names the "
            "diagnosis; the agent will read the answer there",
        ),
    ] = False,
) -> None:
    """Convert FILE (layouts: auto, osce, nejm; see --format) to cases, report per case what was mapped, renamed,
    added and dropped and whether its diagnosis is a knowledge-base condition, an alias of one or neither, load the
    result back as the env will and play the env's oracle on every case (exit 1 when a record could not become a
    case). A case whose patient-visible text names its diagnosis ("my GP said it is appendicitis") is a leak: the
    import names case and field and writes nothing unless ``--allow-diagnosis-in-history`` is given."""
    from rubricgym.envs.clinical.cases import CaseFileError, load_cases
    from rubricgym.envs.clinical.layouts import import_records, layout_format
    from rubricgym.envs.clinical.osce import read_records, write_cases
    from rubricgym.envs.clinical.overlay import kb_with_overlay
    from rubricgym.envs.clinical.schema import KnowledgeBaseError, load_kb

    console = Console()
    try:
        layout_format(fmt)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--format") from None
    if not file.is_file():
        raise typer.BadParameter(f"{file}: no such file", param_hint="FILE")
    if out.exists() and not force:
        raise typer.BadParameter(f"{out} exists; pass --force to replace it", param_hint="--out")
    if out.resolve() == file.resolve():
        raise typer.BadParameter("--out is the input file; write the cases elsewhere", param_hint="--out")
    if report is not None:
        _check_report(report, file, out, force)
    try:
        records = list(read_records(file))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        console.print(f"[red]error:[/] {file}: {e}")
        raise typer.Exit(2) from None
    with progress(console, f"importing {file.name}", total=len(records), unit="records", min_interval_s=2.0) as p:
        cases, overlay, reports = import_records(records, load_kb(kb), fmt, lambda r: p.advance())
    table = Table(title=f"{file.name}: {len(cases)} of {len(reports)} record(s) imported")
    for col in ("record", "case", "mapped", "renamed", "added", "dropped", "note"):
        table.add_column(col, justify="right" if col in ("mapped", "renamed", "added", "dropped") else "left")
    for r in reports:
        note = f"[red]{r.error}[/]" if r.error else "; ".join([*r.added, *r.dropped])[:80]
        table.add_row(str(r.index), r.case_id, *(str(len(x)) for x in (r.mapped, r.renamed, r.added, r.dropped)), note)
    console.print(table)
    for r in reports:
        if r.error:
            console.print(f"[red]error:[/] {escape(r.where or str(file))}: {escape(r.error)}", soft_wrap=True)
    _refuse_leaks(console, reports, allow_diagnosis_in_history, lambda: _write_report(console, report, reports))
    if cases:
        write_cases(out, cases, overlay)
        try:
            loaded = load_cases(out, kb_with_overlay(kb, out if overlay else None))
        except (CaseFileError, KnowledgeBaseError) as e:
            console.print(f"[red]the written cases do not load:[/] {e}")
            _write_report(console, report, reports)
            raise typer.Exit(1) from None
        console.print(f"wrote {out}: {len(loaded)} case(s), {len(overlay)} overlay exam(s)")
        if oracle:
            _play_oracle(console, out, kb, reports)
        _diagnosis_table(console, reports)
    _write_report(console, report, reports)
    if any(r.error for r in reports):
        raise typer.Exit(1)


def _play_oracle(console: Console, out: Path, kb: str | None, reports: list[CaseReport]) -> None:
    """Play the env's oracle on every case of ``out`` and put its score on each case's report."""
    from rubricgym.envs.clinical.verify import oracle_scores

    n = sum(1 for r in reports if r.maps_to is not None)
    with progress(console, "playing the oracle", total=n, unit="cases", min_interval_s=2.0) as p:
        scores = oracle_scores(str(out), kb, lambda case_id: p.advance(status=case_id))
    for r in reports:
        score = scores.get(r.case_id)
        if score is not None:
            r.oracle = asdict(score)


def _write_report(console: Console, report: Path | None, reports: list[CaseReport]) -> None:
    if report:
        atomic_write(report, json.dumps([asdict(r) for r in reports], indent=2, ensure_ascii=False))
        console.print(f"wrote {report}")


def _diagnosis_table(console: Console, reports: list[CaseReport]) -> None:
    """Per imported case: what its diagnosis maps to and what the env's oracle scores on it; a warning names the
    cases whose own diagnosis the oracle is not credited for."""
    table = Table(title="diagnoses: knowledge base, alias or neither, and the env's oracle on each case")
    for col in ("case", "diagnosis", "maps to", "via", "oracle correct", "reward", "rubric"):
        table.add_column(col, justify="right" if col in ("reward", "rubric") else "left")
    for r in reports:
        if r.error or r.maps_to is None:
            continue
        o = r.oracle or {}
        right = "-" if not o else "yes" if o["correct"] else "[red]no[/]"
        reward = "-" if not o else f"{o['reward']:.3f}"
        total = "-" if not o or o["total"] is None else f"{o['total']:.3f}"
        table.add_row(r.case_id, escape(r.diagnosis), r.maps_to, escape(r.maps_via or "-"), right, reward, total)
    console.print(table)
    missed = [r.case_id for r in reports if r.oracle and not r.oracle["correct"]]
    if missed:
        console.print(
            f"[yellow]warning:[/] the env does not credit the oracle's diagnosis (the case's own) on {len(missed)} "
            f"case(s): {', '.join(missed)}; an agent cannot be scored right there. Rename the diagnosis, or add its "
            "name as an alias of a condition in a knowledge-base overlay (run with --env-arg kb_overlay=DIR)."
        )


def _check_report(report: Path, file: Path, out: Path, force: bool) -> None:
    """Refuse a ``--report`` that is the input (or a link to it), the same file as ``--out``, or an existing file
    without ``--force``: an import never writes over its input, and never over anything unasked."""
    real = report.resolve()
    if real == file.resolve():
        raise typer.BadParameter(
            f"{report} is the input file; write the report elsewhere (an import never overwrites its input)",
            param_hint="--report",
        )
    if real == out.resolve():
        raise typer.BadParameter(f"{report} is also --out; give the report its own path", param_hint="--report")
    if (report.exists() or report.is_symlink()) and not force:
        raise typer.BadParameter(f"{report} exists; pass --force to replace it", param_hint="--report")


def _refuse_leaks(
    console: Console, reports: list[CaseReport], allow: bool, before_exit: Callable[[], None] | None = None
) -> None:
    """Warn of every case whose patient-visible text names its diagnosis (case and field) and, unless ``allow``,
    stop the import before any case is written (exit 1; ``before_exit`` still writes the report); note the test
    results that name it."""
    leaky = [r for r in reports if r.leaks]
    for r in reports:
        for note in r.leaks:
            console.print(f"[yellow]warning:[/] record {r.index} ({r.case_id}): {note}")
        for note in r.disclosed:
            console.print(f"note: record {r.index} ({r.case_id}): {note} (seen only by ordering that test)")
    if leaky and not allow:
        console.print(
            f"[red]refusing:[/] {len(leaky)} case(s) show the diagnosis in text the agent reads before any test "
            f"({', '.join(r.case_id for r in leaky)}); remove it from those records, or pass "
            "--allow-diagnosis-in-history to import them anyway. No case written."
        )
        if before_exit is not None:
            before_exit()
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``clinical`` command group (``clinical import``) to ``app``."""
    app.add_typer(clinical_app, name="clinical")
