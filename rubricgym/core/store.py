"""Append-only trajectory store: a run directory with one trajectory per JSONL line.

Each append is written whole, flushed and fsynced, so a crash loses at most the line being written. A torn
last line is detected on load, reported (``StoreReport``) and skipped; the next append starts on a fresh line
so earlier lines are never damaged. ``finished_task_ids`` lets a run resume where it stopped; before it does,
``set_aside_incomplete`` moves torn lines and groups a kill cut short to ``trajectories.jsonl.removed``, so their
tasks are rolled out again whole instead of being skipped with a partial group.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from rubricgym.core.jsonl import set_aside_lines
from rubricgym.core.parsing import clean_value
from rubricgym.core.safeio import append_lines, atomic_write, parse_line
from rubricgym.core.types import Trajectory

TRAJECTORIES = "trajectories.jsonl"
RUN_META = "run.json"


@dataclass
class StoreReport:
    """What loading found besides good records."""

    loaded: int = 0
    torn_tail: bool = False
    torn_lines: list[int] = field(default_factory=list)
    """Lines cut short by an interrupted write (skipped; the trajectory is simply not there)."""
    bad_lines: list[tuple[int, str]] = field(default_factory=list)

    def __str__(self) -> str:
        parts = [f"{self.loaded} trajectories"]
        if self.torn_lines:
            parts.append(
                f"{len(self.torn_lines)} torn line(s) from an interrupted write skipped (line "
                + ", ".join(map(str, self.torn_lines[:5]))
                + ")"
            )
        if self.bad_lines:
            parts.append(
                f"{len(self.bad_lines)} unreadable line(s): " + ", ".join(str(n) for n, _ in self.bad_lines[:5])
            )
        return "; ".join(parts)


@dataclass
class SetAside:
    """What ``TrajectoryStore.set_aside_incomplete`` moved out of the store before a resume."""

    torn_lines: list[int] = field(default_factory=list)
    partial: list[tuple[str, int, int]] = field(default_factory=list)
    """``(task id, trajectories kept, group size)`` of each group a kill cut short."""
    partial_lines: list[int] = field(default_factory=list)
    moved_to: Path | None = None

    def __str__(self) -> str:
        if self.moved_to is None:
            return "nothing set aside"
        parts = []
        if self.torn_lines:
            lines = ", ".join(map(str, self.torn_lines[:5])) + (" ..." if len(self.torn_lines) > 5 else "")
            parts.append(f"{len(self.torn_lines)} line(s) cut short by an interrupted write (line {lines})")
        if self.partial:
            groups = ", ".join(f"{t} ({k} of {n})" for t, k, n in self.partial[:5])
            parts.append(f"{len(self.partial)} incomplete group(s): {groups}")
        return f"{' and '.join(parts)} moved to {self.moved_to}; their tasks are rolled out again"


class TrajectoryStore:
    """A run directory of trajectories. Safe to append from several asyncio tasks or threads."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / TRAJECTORIES
        self._lock = threading.Lock()
        self.report = StoreReport()

    # ---- writing --------------------------------------------------------------------------------------------

    def append(self, trajectory: Trajectory) -> None:
        """Write one trajectory as a line, flushed and fsynced before returning."""
        self.append_lines([trajectory_line(trajectory)])

    def extend(self, trajectories: list[Trajectory]) -> None:
        """Append several trajectories with one fsync."""
        self.append_lines([trajectory_line(t) for t in trajectories])

    def append_lines(self, lines: list[bytes]) -> None:
        """Append whole lines, fsynced; never through a symbolic link (``UnsafePathError``)."""
        with self._lock:
            append_lines(self.path, b"".join(lines))

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Record the run's configuration (``run.json``), merged with what is there (written atomically)."""
        current = self.meta()
        current.update(meta)
        atomic_write(self.dir / RUN_META, json.dumps(current, indent=2, sort_keys=True))

    def meta(self) -> dict[str, Any]:
        path = self.dir / RUN_META
        return json.loads(path.read_text()) if path.exists() else {}

    # ---- reading --------------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Trajectory]:
        return self.iter()

    def iter(self) -> Iterator[Trajectory]:
        """Every readable trajectory in file order; problems go to ``self.report``."""
        self.report = StoreReport()
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            try:
                traj = Trajectory.model_validate_json(raw)
            except (ValidationError, ValueError, RecursionError) as e:
                if _looks_truncated(raw):
                    self.report.torn_lines.append(i + 1)
                    self.report.torn_tail |= i == last
                else:
                    why = parse_line(raw)[1] or str(e).splitlines()[0]
                    self.report.bad_lines.append((i + 1, why))
                continue
            self.report.loaded += 1
            yield traj

    def load(self, where: Callable[[Trajectory], bool] | None = None, **equals: Any) -> list[Trajectory]:
        """Trajectories matching ``where`` and every ``field=value`` (``env_id``, ``agent``, ``model``, ...)."""
        out = []
        for t in self.iter():
            if where is not None and not where(t):
                continue
            if any(getattr(t, k) != v for k, v in equals.items()):
                continue
            out.append(t)
        return out

    def __len__(self) -> int:
        return sum(1 for _ in self.iter())

    def set_aside_incomplete(self, group_size: int = 1) -> SetAside:
        """Before a resume: move the torn lines and every group with fewer than ``group_size`` readable trajectories
        (a kill cut its write short) to ``trajectories.jsonl.removed``, so their tasks are rolled out again whole."""
        with self._lock:
            out = SetAside()
            if not self.path.exists():
                return out
            members: dict[tuple[str, str | None], list[int]] = {}
            numbers = []
            for i, raw in enumerate(self.path.read_bytes().split(b"\n")):
                if not raw.strip():
                    continue
                try:
                    traj = Trajectory.model_validate_json(raw)
                except (ValidationError, ValueError, RecursionError):
                    if _looks_truncated(raw):
                        out.torn_lines.append(i + 1)
                    continue  # a line that is whole but unreadable stays, reported by every reader
                numbers.append(i + 1)
                members.setdefault((traj.task.id, traj.group_id), []).append(i + 1)
            for (task_id, _), lines in members.items():
                if len(lines) < group_size:
                    out.partial.append((task_id, len(lines), group_size))
                    out.partial_lines += lines
            out.moved_to = set_aside_lines(self.path, {*out.torn_lines, *out.partial_lines})
            return out

    def finished_task_ids(self) -> set[str]:
        """Ids of tasks with a stored trajectory (used to resume)."""
        return {t.task.id for t in self.iter()}

    def to_parquet(self, path: str | Path | None = None) -> Path:
        """Export to Parquet: one row per trajectory, scalar columns plus the full record as JSON."""
        import pyarrow as pa  # lazy: only this export/import path needs it (keeps CLI start-up light)
        import pyarrow.parquet as pq

        rows = [trajectory_row(t) for t in self.iter()]
        out = Path(path) if path else self.dir / "trajectories.parquet"
        pq.write_table(pa.Table.from_pylist(rows), out)
        return out


def trajectory_line(t: Trajectory) -> bytes:
    """``t`` as one JSON line. Text that is not valid Unicode (a lone surrogate from a tool or a model) has
    those characters replaced by U+FFFD instead of failing: a store never refuses a trajectory for its text."""
    try:
        text = t.model_dump_json()
    except (PydanticSerializationError, UnicodeError, ValueError):
        text = Trajectory.model_validate(clean_value(t.model_dump())).model_dump_json()
    return text.encode("utf-8") + b"\n"


def trajectory_row(t: Trajectory) -> dict[str, Any]:
    """A flat summary of a trajectory (its reward fields prefixed ``reward/``) plus the full JSON record."""
    row: dict[str, Any] = {
        "id": t.id,
        "task_id": t.task.id,
        "env_id": t.task.env_id,
        "split": t.task.split,
        "agent": t.agent,
        "model": t.model,
        "seed": t.seed,
        "group_id": t.group_id,
        "n_steps": len(t.steps),
        "answer": t.outcome.answer,
        "env_reward": t.outcome.reward,
        "terminated": t.outcome.terminated,
        "truncated": t.outcome.truncated,
        "duration_s": t.duration_s,
        "record": trajectory_line(t).decode("utf-8").rstrip("\n"),
    }
    for k, v in t.rewards.items():
        row[f"reward/{k}"] = v
    return row


def _looks_truncated(raw: bytes) -> bool:
    """Not JSON at all: we only ever write whole JSON lines, so this is an interrupted write."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:  # cut inside a character: the line ends in the middle of one
        return e.reason == "unexpected end of data"
    _, why = parse_line(raw)
    return why is not None and why.startswith("not JSON")
