"""``rubricgym rubric-versions RUN_DIR``: the rubric versions an evolving-rubric run recorded, re-scored.

Reads ``RUN_DIR/rubric_versions.jsonl`` and ``RUN_DIR/rubric_scored.jsonl`` (``rewards.evolve``). Without
``--hash`` it lists every version (step, hash, criteria added and retired) and re-scores the rollouts each one
scored during the run with the recorded rubric, counting those whose rewards come out identical (exit 1 if any
does not). ``--hash H`` re-scores every stored rollout with version ``H`` instead (a unique prefix is enough) and
prints the mean reward under it beside the recorded one.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from rubricgym.core.rubric import Rubric
from rubricgym.core.types import Trajectory
from rubricgym.rewards.evolve import SCORED, read_scored, read_versions, reproduce, rescore

VERSIONS = "rubric_versions.jsonl"


def _rescore_with(run_dir: Path, prefix: str, key: str, console: Console, as_json: bool) -> None:
    versions = read_versions(run_dir / VERSIONS)
    hits = [v for v in versions if v.hash.startswith(prefix)]
    if len(hits) != 1:
        known = ", ".join(v.hash[:12] for v in versions)
        console.print(f"[red]--hash {prefix!r} matches {len(hits)} recorded versions[/red]; recorded: {known}")
        raise typer.Exit(2)
    rubric = Rubric.model_validate(hits[0].rubric)
    scored = read_scored(run_dir / SCORED) if (run_dir / SCORED).exists() else []
    if not scored:
        console.print(f"[red]{run_dir / SCORED} holds no rollouts[/red] (was rubric_buffer.keep_trajectories off?)")
        raise typer.Exit(1)
    new = asyncio.run(_totals(rubric, [r.trajectory for r in scored], key))
    recorded = [r.breakdown.total if r.breakdown.total is not None else float("nan") for r in scored]
    rows: list[dict[str, Any]] = []
    for h in dict.fromkeys(r.hash for r in scored):
        idx = [i for i, r in enumerate(scored) if r.hash == h]
        old = [recorded[i] for i in idx]
        rows.append(
            {
                "scored_with": h,
                "rollouts": len(idx),
                "recorded": float(np.mean(old)),
                "rescored": float(np.mean([new[i] for i in idx])),
            }
        )
    if as_json:
        print(json.dumps({"hash": hits[0].hash, "version": hits[0].version, "rows": rows}, indent=2))
        return
    table = Table(title=f"{run_dir}: stored rollouts re-scored with version {hits[0].version} ({hits[0].hash[:12]})")
    for col in ("scored during the run with", "rollouts", "recorded mean", f"mean under {hits[0].version}"):
        table.add_column(col, justify="left" if col.startswith("scored") else "right")
    for row in rows:
        table.add_row(row["scored_with"][:12], str(row["rollouts"]), f"{row['recorded']:.4f}", f"{row['rescored']:.4f}")
    console.print(table)


async def _totals(rubric: Rubric, trajs: list[Trajectory], key: str) -> list[float]:
    totals = [(await rescore(rubric, t, key)).total for t in trajs]
    return [float("nan") if t is None else t for t in totals]


def versions_command(
    run_dir: Annotated[Path, typer.Argument(help="training run directory with rubric_versions.jsonl")],
    hash: Annotated[str | None, typer.Option("--hash", help="re-score every stored rollout with this version")] = None,
    key: Annotated[str, typer.Option(help="the reward key the run scored under (advantage.reward_key)")] = "rubric",
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List an evolving-rubric run's rubric versions and check that each re-scores its rollouts identically."""
    console = Console()
    if not (run_dir / VERSIONS).is_file():
        console.print(f"[red]{run_dir} has no {VERSIONS}[/red]: was it trained with a rubric_buffer section?")
        raise typer.Exit(1)
    if hash is not None:
        _rescore_with(run_dir, hash, key, console, as_json)
        return
    checks = asyncio.run(reproduce(run_dir, key))
    if as_json:
        print(json.dumps([c.model_dump() for c in checks], indent=2))
    else:
        table = Table(title=f"{run_dir}: {len(checks)} rubric versions")
        for col in ("step", "version", "hash", "criteria", "added", "retired", "rollouts", "re-scored identically"):
            table.add_column(col)
        for c in checks:
            table.add_row(
                str(c.step),
                c.version,
                c.hash[:12],
                str(c.criteria),
                ", ".join(c.added),
                ", ".join(c.retired),
                str(c.rollouts),
                f"{c.identical}/{c.rollouts}",
            )
        console.print(table)
    if any(c.identical != c.rollouts for c in checks):
        raise typer.Exit(1)
