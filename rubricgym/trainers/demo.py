"""The main job on embedded defaults: train SmolLM2-135M-Instruct on the toy env, then compare base vs trained.

``run_demo`` is what ``rubricgym demo`` (``make demo``) runs: a GRPO run on one-operation calculator problems
sized to finish inside ``budget_minutes`` on two CPU cores (the step loop stops when the time left would not
cover the final evaluation), then base and trained policy on the same held-out tasks, each as a mean rubric
reward with a bootstrap confidence interval over tasks, plus the paired gain.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from rubricgym.trainers.config import TrainConfig

DEMO_CONFIG: dict[str, Any] = {
    "run_dir": "runs/demo-train",
    "steps": 40,
    "tasks_per_step": 4,
    "group_size": 6,
    "seed": 0,
    "save_every": 3,
    "model": {"name": "smollm2-135m-instruct", "threads": 2},
    "generation": {
        "temperature": 0.7,
        "max_new_tokens": 40,
        "max_batch": 24,
        "response_prefix": '<tool_call>{"name": "',
    },
    "env": {
        "id": "toy-calculator-v0",
        "kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 3, "style": "expression"},
        "train_tasks": 200,
        "eval_tasks": 24,
    },
    "advantage": {"estimator": "grpo", "scale": "group", "topology": "round_robin"},
    "loss": {"beta": 0.0},
    "optim": {"lr": 1e-5, "micro_batch": 8, "max_grad_norm": 1.0},
}
"""One-operation expression problems (``Compute 22 / 2.``): the untrained model solves some of them, so every
group has a signal to learn from; the response prefix makes each turn start as a tool call."""


def demo_config(budget_minutes: float = 12, **overrides: Any) -> TrainConfig:
    """The demo's config; the step loop gets the budget minus a reserve for the two evaluations and loading."""
    data = {**DEMO_CONFIG, **overrides}
    reserve_s = 150.0
    data["time_budget_s"] = max(30.0, budget_minutes * 60 - reserve_s)
    return TrainConfig.model_validate(data)


def run_demo(
    budget_minutes: float = 12,
    run_dir: str | Path | None = None,
    console: Console | None = None,
    resume: bool = False,
    estimator: str | None = None,
    topology: str | None = None,
) -> int:
    """Train within ``budget_minutes`` and print base vs trained held-out scores; 0 on success."""
    from rubricgym.trainers.trainer import Trainer

    console = console or Console()
    cfg = demo_config(budget_minutes)
    cfg = cfg.with_overrides(
        **{
            "run_dir": str(run_dir) if run_dir is not None else None,
            "advantage.estimator": estimator,
            "advantage.topology": topology,
        }
    )
    t0 = time.perf_counter()
    console.print(
        f"[bold]rubricgym demo[/]: {cfg.advantage.estimator} on {cfg.env.id} (one-operation problems) "
        f"with {cfg.model.name}, budget {budget_minutes:g} min, run dir {cfg.run_dir}"
    )
    summary = Trainer(cfg, console=console).run(resume=resume)  # its live display shows base and trained
    console.print(summary["lines"][-1])  # the paired gain with its CI
    console.print(f"done in {(time.perf_counter() - t0) / 60:.1f} min; report: {summary['html']}")
    return 0
