"""Export a run directory's trajectories for other tools: Parquet, a Hugging Face ``datasets`` directory, SFT chat
data from the best trajectories, and preference pairs.

A trajectory's score is its rubric total from ``RUN_DIR/scores.jsonl`` (``rubricgym score``) when there is one,
else its ``rubric`` reward, else the env's outcome reward; a trajectory whose rubric total is ``None`` (its verdicts
errored) is left out of SFT and preference data rather than treated as a zero. SFT and preference rows use TRL's
conversational formats (``messages`` + ``tools``; ``prompt`` / ``chosen`` / ``rejected``).
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from rubricgym.core.jsonl import read_jsonl
from rubricgym.core.safeio import atomic_write
from rubricgym.core.store import TRAJECTORIES, TrajectoryStore, trajectory_row
from rubricgym.core.types import Message, Trajectory

Format = Literal["parquet", "hf", "sft", "preferences"]
SCORES = "scores.jsonl"
_MISSING = object()


class ExportError(ValueError):
    """The run directory cannot be exported as asked; the message says why and what to do."""


def load_run(run_dir: str | Path) -> list[Trajectory]:
    run = Path(run_dir)
    if not (run / TRAJECTORIES).exists():
        raise ExportError(f"{run} has no {TRAJECTORIES}; is it a run directory written by `rubricgym run`?")
    return list(TrajectoryStore(run).iter())


def scores(run_dir: str | Path, trajectories: Iterable[Trajectory]) -> dict[str, float | None]:
    """Trajectory id -> score (``None``: the rubric could not score it)."""
    path = Path(run_dir) / SCORES
    totals: dict[str, float | None] = {}
    if path.exists():
        for n, record in read_jsonl(path, ExportError):
            tid = record.get("trajectory_id") if isinstance(record, dict) else None
            total = record.get("total") if isinstance(record, dict) else None
            if not isinstance(tid, str) or not (total is None or isinstance(total, int | float)):
                raise ExportError(
                    f"{path}:{n}: not a score record (an object with a string trajectory_id and a numeric or null "
                    "total); re-run `rubricgym score`"
                )
            totals[tid] = None if total is None else float(total)
    out: dict[str, float | None] = {}
    for t in trajectories:
        total = totals.get(t.id, _MISSING)
        out[t.id] = total if total is not _MISSING else t.rewards.get("rubric", t.outcome.reward)
    return out


def check_output(run_dir: str | Path, out: str | Path, force: bool = False) -> None:
    """Refuse an ``out`` that is (or holds, or lies behind a link to) a file of the run, or that exists already
    (unless ``force``): an export never destroys its input, and never overwrites anything without being told."""
    run, target = Path(run_dir).resolve(), Path(out)
    real = target.resolve()  # follows links: a link to the run's file is the run's file
    inputs = [p.resolve() for p in Path(run_dir).iterdir()] if Path(run_dir).is_dir() else []
    if real == run or real in inputs or run.is_relative_to(real) or any(p.is_relative_to(real) for p in inputs):
        raise ExportError(
            f"{out} is {'part of ' if real != run else ''}the run directory {run_dir} being exported; "
            "write the export to a new path (an export never overwrites its input)"
        )
    if (target.exists() or target.is_symlink()) and not force:
        raise ExportError(f"{out} exists; pass --force to replace it (the replacement is written whole, atomically)")


def export(
    run_dir: str | Path,
    fmt: Format,
    out: str | Path,
    *,
    min_score: float = 0.5,
    min_margin: float = 0.0,
    force: bool = False,
) -> int:
    """Write ``out`` in format ``fmt``; returns the number of rows written.

    ``out`` may not be an input of the run, nor exist unless ``force``; it is written atomically (a temporary
    beside it, renamed over it), so a link at ``out`` is replaced, never written through.
    """
    if fmt not in ("parquet", "hf", "sft", "preferences"):
        raise ExportError(f"unknown format {fmt!r}; use parquet, hf, sft or preferences")
    trajectories = load_run(run_dir)
    check_output(run_dir, out, force)
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            return write_parquet(trajectories, out)
        if fmt == "hf":
            return write_hf(trajectories, out)
        scored = scores(run_dir, trajectories)
        rows = (
            sft_rows(trajectories, scored, min_score)
            if fmt == "sft"
            else preference_rows(trajectories, scored, min_margin)
        )
        atomic_write(out, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        return len(rows)
    except OSError as e:
        raise ExportError(f"cannot write {out}: {e.strerror or e}") from None


def write_parquet(trajectories: list[Trajectory], out: Path) -> int:
    """One row per trajectory: summary columns plus the full record as JSON (``record``), written atomically."""
    import io

    import pyarrow as pa  # lazy: only this export/import path needs it (keeps CLI start-up light)
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([trajectory_row(t) for t in trajectories]), buf)
    atomic_write(out, buf.getvalue())
    return len(trajectories)


def write_hf(trajectories: list[Trajectory], out: Path) -> int:
    """A ``datasets`` directory (``datasets.load_from_disk``) with the Parquet export's columns.

    Saved into a fresh directory beside ``out`` and renamed into place, so a failed save leaves ``out`` alone.
    """
    import shutil
    import tempfile

    import datasets  # lazy: only this export/import path needs it (keeps CLI start-up light)

    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        datasets.Dataset.from_list([trajectory_row(t) for t in trajectories]).save_to_disk(str(tmp / "ds"))
        if out.is_symlink() or out.is_file():
            out.unlink()
        elif out.exists():
            shutil.rmtree(out)
        os.replace(tmp / "ds", out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return len(trajectories)


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Trajectories back from a Parquet file or ``datasets`` directory written by this module."""
    p = Path(path)
    if p.is_dir():
        import datasets  # lazy: only this export/import path needs it (keeps CLI start-up light)

        records = datasets.load_from_disk(str(p))["record"]
    else:
        import pyarrow.parquet as pq

        records = pq.read_table(p, columns=["record"]).column("record").to_pylist()
    return [Trajectory.model_validate_json(r) for r in records]


def _chat(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.to_openai() for m in messages]


def _tools(t: Trajectory) -> list[dict[str, Any]]:
    tools = t.steps[0].observation.tools if t.steps else []
    return [tool.to_openai() for tool in tools]


def _by_task(trajectories: list[Trajectory], scored: dict[str, float | None]) -> dict[str, list[Trajectory]]:
    groups: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        if scored[t.id] is not None and t.steps:
            groups[t.task.id].append(t)
    return groups


def sft_rows(trajectories: list[Trajectory], scored: dict[str, float | None], min_score: float) -> list[dict[str, Any]]:
    """Each task's best trajectory, if it scores at least ``min_score``, as a chat (``messages`` + ``tools``)."""
    rows = []
    for task_id, group in _by_task(trajectories, scored).items():
        best = max(group, key=lambda t: scored[t.id])  # type: ignore[arg-type, return-value]
        if scored[best.id] >= min_score:  # type: ignore[operator]
            rows.append(
                {
                    "messages": _chat(best.messages),
                    "tools": _tools(best),
                    "task_id": task_id,
                    "env_id": best.task.env_id,
                    "trajectory_id": best.id,
                    "score": scored[best.id],
                }
            )
    return rows


def _split_prompt(messages: list[Message]) -> int:
    """Index of the first assistant message: the prompt is everything before it."""
    return next((i for i, m in enumerate(messages) if m.role == "assistant"), len(messages))


def preference_rows(
    trajectories: list[Trajectory], scored: dict[str, float | None], min_margin: float
) -> list[dict[str, Any]]:
    """Per task, its best trajectory against its worst (when they differ by more than ``min_margin``)."""
    rows = []
    for task_id, group in _by_task(trajectories, scored).items():
        if len(group) < 2:
            continue
        ranked = sorted(group, key=lambda t: scored[t.id])  # type: ignore[arg-type, return-value]
        worst, best = ranked[0], ranked[-1]
        margin = scored[best.id] - scored[worst.id]  # type: ignore[operator]
        cut_b, cut_w = _split_prompt(best.messages), _split_prompt(worst.messages)
        if margin <= min_margin or best.messages[:cut_b] != worst.messages[:cut_w]:
            continue
        rows.append(
            {
                "prompt": _chat(best.messages[:cut_b]),
                "chosen": _chat(best.messages[cut_b:]),
                "rejected": _chat(worst.messages[cut_w:]),
                "tools": _tools(best),
                "task_id": task_id,
                "env_id": best.task.env_id,
                "chosen_id": best.id,
                "rejected_id": worst.id,
                "score_chosen": scored[best.id],
                "score_rejected": scored[worst.id],
            }
        )
    return rows
