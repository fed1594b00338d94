"""The demo's training config: SmolLM2-135M-Instruct on one-operation toy calculator problems.

``rubricgym.demo.run_demo`` (``rubricgym demo``, ``make demo``) trains with it: a GRPO run sized to finish inside
``budget_minutes`` on two CPU cores (the step loop stops when the time left would not cover the final
evaluation), then base and trained policy on the same held-out tasks, each as a mean rubric reward with a
bootstrap confidence interval over tasks, plus the paired gain.
"""

from __future__ import annotations

from typing import Any

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
