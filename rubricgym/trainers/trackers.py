"""Experiment trackers: TensorBoard, Weights & Biases and Trackio receive exactly the records of ``metrics.jsonl``.

``report_to: [tensorboard, wandb, trackio]`` in the training config. ``TrackedLog`` is the run's ``MetricsLog``:
every record it appends to ``metrics.jsonl`` also goes to each tracker, as scalars named ``<kind>/<field>``
(``train/loss``, ``eval/eval_mean``) at the record's own ``step``; text fields (``tag``, ``rubric_hash``) and
values JSON cannot hold (NaN, written as null) are left out. The run config is logged once, when the trackers
open (at the first record a process writes).

- ``tensorboard``: event files in ``RUN/tensorboard`` (``tensorboard --logdir RUN/tensorboard``). A resumed run
  purges the events at and after its first step, as it truncates ``metrics.jsonl``.
- ``wandb``: a run named after the run directory, files in ``RUN/wandb``, project ``$WANDB_PROJECT`` (default
  ``rubricgym``); ``WANDB_MODE=offline`` needs no network or account (``wandb sync`` uploads later). Steps are the
  ``step`` field (``define_metric``), so a resumed run may log steps again.
- ``trackio``: local-first; project ``$TRACKIO_PROJECT`` (default ``rubricgym``), stored under ``$TRACKIO_DIR``
  (default ``~/.cache/huggingface/trackio``; ``trackio show`` opens the dashboard).

A tracker whose package is missing fails when the config validates (``TrainConfig.report_to``), before anything
loads, naming what to install.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from rubricgym.trainers.report import MetricsLog


def scalars(record: dict[str, Any]) -> tuple[int, dict[str, float]]:
    """A metrics record's step and its numeric fields as ``{"<kind>/<field>": value}`` (finite numbers only)."""
    kind = str(record.get("kind", "train"))
    values = {
        f"{kind}/{key}": float(value)
        for key, value in record.items()
        if key != "step"
        and isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    }
    return int(record.get("step", 0)), values


class Tracker(Protocol):
    def log(self, step: int, values: dict[str, float]) -> None: ...

    def close(self) -> None: ...


class TensorBoardTracker:
    """Scalars and the config (as text) in ``run_dir/tensorboard``, flushed after every record."""

    def __init__(self, run_dir: Path, config: dict[str, Any], first_step: int):
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=first_step)
        self.writer.add_text("config", "```yaml\n" + yaml.safe_dump(config, sort_keys=False) + "```", first_step)
        self.writer.flush()

    def log(self, step: int, values: dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    """One W&B run per run directory (a resumed run continues it); offline with ``WANDB_MODE=offline``."""

    def __init__(self, run_dir: Path, config: dict[str, Any], first_step: int):
        import wandb

        run_id = "rubricgym-" + hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "rubricgym"),
            name=run_dir.name,
            id=run_id,
            dir=str(run_dir),
            config=config,
            resume="allow",
        )
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log({**values, "step": step})

    def close(self) -> None:
        self.run.finish()


class TrackioTracker:
    """A local Trackio run named after the run directory (a resumed run continues it)."""

    def __init__(self, run_dir: Path, config: dict[str, Any], first_step: int):
        import trackio

        self.trackio = trackio
        self.run = trackio.init(
            project=os.environ.get("TRACKIO_PROJECT", "rubricgym"), name=run_dir.name, config=config, resume="allow"
        )

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        self.run.finish()


TRACKERS: dict[str, type[TensorBoardTracker] | type[WandbTracker] | type[TrackioTracker]] = {
    "tensorboard": TensorBoardTracker,
    "wandb": WandbTracker,
    "trackio": TrackioTracker,
}


class TrackedLog(MetricsLog):
    """``metrics.jsonl`` whose every record also goes to the ``report_to`` trackers (opened at the first write,
    whose step a resumed run's TensorBoard purges from)."""

    def __init__(self, path: Path, report_to: Sequence[str], config: dict[str, Any]):
        super().__init__(path)
        self.report_to, self.config = list(report_to), config
        self.trackers: list[Tracker] | None = None

    def write(self, record: dict[str, Any]) -> None:
        super().write(record)
        if not self.report_to:
            return
        step, values = scalars(record)
        if self.trackers is None:
            self.trackers = [TRACKERS[name](self.path.parent, self.config, step) for name in self.report_to]
        for tracker in self.trackers:
            tracker.log(step, values)

    def close(self) -> None:
        """Close the trackers (the next write opens them again)."""
        for tracker in self.trackers or []:
            tracker.close()
        self.trackers = None
