"""A rich live display of a training run: progress, the latest step's metrics and the held-out evaluations."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from rubricgym.core.fmt import fmt_number
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
    """Context manager; ``enabled=False`` prints nothing (tests, logs)."""

    def __init__(self, cfg: TrainConfig, console: Console | None, enabled: bool = True):
        self.cfg = cfg
        self.console = console or Console()
        self.enabled = enabled
        self.rows: list[dict[str, Any]] = []
        self.evals: list[EvalResult] = []
        self.message = ""
        self.live: Live | None = None

    def __enter__(self) -> LiveDisplay:
        if self.enabled:
            self.live = Live(self.render(), console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.update(self.render())
            self.live.__exit__(None, None, None)
            self.live = None
            if not self.console.is_terminal:  # rich ends a non-terminal Live without a newline
                self.console.line()

    def render(self) -> Group:
        c = self.cfg
        head = Text.assemble(
            ("train ", "bold"),
            f"{c.model.name} on {c.env.suite or c.env.id} · {c.advantage.estimator} · "
            f"{c.tasks_per_step} tasks x {c.group_size} rollouts/step · ",
            (f"step {self.rows[-1]['step'] if self.rows else 0}/{c.steps}", "bold cyan"),
        )
        table = Table(box=None, pad_edge=False)
        table.add_column("step", justify="right")
        for _, label in SHOWN:
            table.add_column(label, justify="right")
        for r in self.rows[-8:]:
            table.add_row(str(r["step"]), *(_cell(r.get(k)) for k, _ in SHOWN))
        parts: list[Any] = [head, table]
        parts += [Text(e.line(), style="green") for e in self.evals[-4:]]
        if self.message:
            parts.append(Text(self.message, style="dim"))
        return Group(*parts)

    def _refresh(self) -> None:
        if self.live is not None:
            self.live.update(self.render())

    def step(self, record: dict[str, Any]) -> None:
        self.rows.append(record)
        self.message = ""
        self._refresh()

    def eval(self, result: EvalResult) -> None:
        self.evals.append(result)
        self.message = ""
        self._refresh()

    def status(self, message: str) -> None:
        self.message = message
        self._refresh()


def _cell(v: Any) -> str:
    if isinstance(v, float) or v is None:
        return fmt_number(v, ".3f" if v is None or abs(v) < 100 else ".0f")
    return str(v)
