"""The display of a training run: progress with counts and ETA, the latest steps' metrics and the held-out
evaluations, live in a terminal and as plain lines in a log (``rubricgym.core.progress``)."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rubricgym.core.fmt import fmt_number
from rubricgym.core.progress import Tracker
from rubricgym.trainers.config import TrainConfig
from rubricgym.trainers.evaluation import EvalResult

SHOWN = (
    ("success_mean", "solved"),  # the outcome first: a rubric reward that rises while it falls is hacked
    ("reward_mean", "reward"),
    ("kl", "KL"),
    ("entropy", "entropy"),
    ("loss", "loss"),
    ("response_tokens", "resp tok"),
    ("masked", "masked"),
    ("step_s", "step s"),
)


class LiveDisplay:
    """Context manager showing a run's progress: in a terminal a rich live view (the step bar with counts and ETA,
    the latest steps' metrics, the held-out evaluations); elsewhere (a log, CI, ``nohup``) one plain line per step,
    evaluation and phase, with a heartbeat during a long evaluation. ``enabled=False`` prints nothing."""

    def __init__(self, cfg: TrainConfig, console: Console | None, enabled: bool = True):
        self.cfg = cfg
        self.console = console or Console()
        self.enabled = enabled
        self.rows: list[dict[str, Any]] = []
        self.evals: list[EvalResult] = []
        self.message = ""
        self.live: Live | None = None
        self.eval_s_per_task: float | None = None  # the last evaluation's pace: the next one's ETA
        self.step_s: list[float] = []
        self.tracker = Tracker(
            self.console, "training", cfg.steps, enabled=enabled, embedded=True, unit="steps", announce=False
        )
        self.mark = time.monotonic()  # when the work now under way began (a step, an evaluation)

    def __enter__(self) -> LiveDisplay:
        if self.enabled and self.console.is_terminal:
            self.live = Live(self.render(), console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        elif self.enabled:
            self.tracker.line(self.headline().plain)
        self.tracker.__enter__()
        self.mark = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.tracker.__exit__(*exc)
        if self.live is not None:
            self.live.update(self.render())
            self.live.__exit__(None, None, None)
            self.live = None

    def headline(self) -> Text:
        c = self.cfg
        return Text.assemble(
            ("train ", "bold"),
            f"{c.model.name} on {c.env.suite or c.env.id} · {c.advantage.estimator} · "
            f"{c.tasks_per_step} tasks x {c.group_size} rollouts/step · ",
            (f"step {self.rows[-1]['step'] if self.rows else 0}/{c.steps}", "bold cyan"),
        )

    def render(self) -> Group:
        table = Table(box=None, pad_edge=False)
        table.add_column("step", justify="right")
        for _, label in SHOWN:
            table.add_column(label, justify="right")
        for r in self.rows[-8:]:
            table.add_row(str(r["step"]), *(_cell(r.get(k)) for k, _ in SHOWN))
        parts: list[Any] = [self.headline(), table]
        parts += [Text(e.line(), style="green") for e in self.evals[-4:]]
        if self.message:
            parts.append(Text(self.message, style="dim"))
        parts.append(self.tracker.renderable)
        return Group(*parts)

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self.render())

    def _training_phase(self, step: int) -> None:
        """Count steps from ``step`` on, since ``mark``; the ETA before the first is the recent steps' pace."""
        recent = self.step_s[-5:]
        expected = sum(recent) / len(recent) * (self.cfg.steps - step) if recent else None
        self.tracker.phase(
            "training", self.cfg.steps, done=step, unit="steps", expected_s=expected, announce=False, started=self.mark
        )

    def evaluating(self, what: str, tasks: int) -> None:
        """An evaluation of ``tasks`` held-out tasks begins (``what``: "base policy", "policy at step 4", ...); its
        ETA is the last evaluation's pace (none before the first)."""
        expected = self.eval_s_per_task * tasks if self.eval_s_per_task is not None else None
        self.message = ""
        self.mark = time.monotonic()
        self.tracker.phase(f"evaluating the {what} on held-out tasks", tasks, unit="tasks", expected_s=expected)
        self._refresh()

    def step(self, record: dict[str, Any]) -> None:
        now = time.monotonic()
        if self.tracker.description != "training" or self.tracker.done != record["step"] - 1:
            self._training_phase(record["step"] - 1)  # the first step shown (a resumed run, after an evaluation)
        self.step_s.append(now - self.mark)
        self.mark = now
        self.rows.append(record)
        self.message = ""
        metrics = " ".join(f"{label} {_cell(record.get(k))}" for k, label in SHOWN if record.get(k) is not None)
        self.tracker.advance(status=metrics)
        self._refresh()

    def eval(self, result: EvalResult) -> None:
        now = time.monotonic()
        if self.tracker.description.startswith("evaluating") and result.task_ids:
            self.eval_s_per_task = (now - self.mark) / len(result.task_ids)
        self.mark = now
        if self.tracker.description.startswith("evaluating"):
            self.tracker.advance(max((self.tracker.total or 0) - self.tracker.done, 0))
        self.evals.append(result)
        self.message = ""
        if self.live is None:
            self.tracker.line(result.line())
        if result.step < self.cfg.steps:  # the steps go on: heartbeats now count them, not this evaluation
            self._training_phase(result.step)
        self._refresh()

    def status(self, message: str) -> None:
        self.message = message
        if self.live is None:
            self.tracker.line(message)
        self._refresh()


def _cell(v: Any) -> str:
    if isinstance(v, float) or v is None:
        return fmt_number(v, ".3f" if v is None or abs(v) < 100 else ".0f")
    return str(v)
