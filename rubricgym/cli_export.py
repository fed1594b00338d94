"""``rubricgym export``: a run's trajectories as datasets (``interop.export``), or with ``--merge`` a training run's
model (``trainers.lora``); a CLI-layer module because it reaches both."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from rubricgym.core.bounds import bounded

console = Console()
err = Console(stderr=True)


def export_cmd(
    run_dir: Annotated[Path, typer.Argument(help="a run directory written by `rubricgym run`")],
    out: Annotated[Path, typer.Argument(help="output file (parquet, sft, preferences) or directory (hf)")],
    fmt: Annotated[str, typer.Option("--format", help="parquet | hf | sft | preferences")] = "parquet",
    min_score: Annotated[
        float, typer.Option(help="sft: keep a task's best trajectory scoring at least this", callback=bounded(0.0, 1.0))
    ] = 0.5,
    min_margin: Annotated[
        float, typer.Option(help="preferences: keep pairs whose scores differ by more", callback=bounded(0.0, 1.0))
    ] = 0.0,
    force: Annotated[
        bool, typer.Option("--force", help="replace OUT if it exists (never an input of the run)")
    ] = False,
    merge: Annotated[
        bool,
        typer.Option(
            "--merge",
            help="export the trained model instead: a training run's newest checkpoint as a Hugging Face model "
            "directory OUT (a LoRA adapter merged into its base)",
        ),
    ] = False,
) -> None:
    """Export a run's trajectories: Parquet, a HF datasets dir, SFT chats, or preference pairs (JSONL); with
    --merge, a training run's model."""
    from rubricgym.interop.export import ExportError, check_output, export

    if merge:
        merge_model(run_dir, out, force)
        return
    if fmt not in ("parquet", "hf", "sft", "preferences"):
        err.print(f"[bold red]error:[/] unknown --format {fmt!r}; use parquet, hf, sft or preferences")
        raise typer.Exit(2)
    try:
        if not force and (out.exists() or out.is_symlink()) and sys.stdin.isatty():
            check_output(run_dir, out, force=True)  # an input of the run is refused before asking
            force = typer.confirm(f"{out} exists; replace it?", default=False)
            if not force:
                raise typer.Exit(1)
        n = export(run_dir, fmt, out, min_score=min_score, min_margin=min_margin, force=force)  # type: ignore[arg-type]
    except ExportError as e:
        err.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)  # paths stay whole, copyable
        raise typer.Exit(2) from None
    console.print(f"wrote {n} {fmt} rows to {out}")


def merge_model(run_dir: Path, out: Path, force: bool) -> None:
    """``export --merge``: the newest checkpoint of training run ``run_dir`` as a model directory ``out``."""
    from rubricgym.interop.export import ExportError, check_output
    from rubricgym.trainers.engine.export import MergeError, export_merged

    try:
        if not force and (out.exists() or out.is_symlink()) and sys.stdin.isatty():
            check_output(run_dir, out, force=True)
            force = typer.confirm(f"{out} exists; replace it?", default=False)
            if not force:
                raise typer.Exit(1)
        check_output(run_dir, out, force)
        export_merged(run_dir, out)
    except (ExportError, MergeError) as e:
        err.print(f"[bold red]error:[/] {e}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    console.print(f"wrote the merged model of {run_dir} to {out}")


def register(app: typer.Typer) -> None:
    app.command("export")(export_cmd)
