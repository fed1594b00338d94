"""What ``rubricgym show`` reports about a run directory: the summary numbers and example trajectories."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from rubricgym.core.store import TrajectoryStore


def summarize(run_dir: Path) -> dict:
    """Count, mean/std of every reward field, steps, and errors of a run directory."""
    store = TrajectoryStore(run_dir)
    trajs = list(store.iter())
    fields: dict[str, list[float]] = {"env_reward": [t.outcome.reward for t in trajs]}
    for t in trajs:
        for k, v in t.rewards.items():
            fields.setdefault(k, []).append(v)

    def stats(xs: list[float]) -> dict:
        return {
            "n": len(xs),
            "mean": statistics.fmean(xs) if xs else None,
            "std": statistics.pstdev(xs) if len(xs) > 1 else 0.0,
        }

    steps = [len(t.steps) for t in trajs]
    from rubricgym.envs.gui.metrics import gui_metrics  # here: importing the gui package loads the browser env

    return {
        "run_dir": str(run_dir),
        "count": len(trajs),
        "envs": sorted({t.task.env_id for t in trajs}),
        "agents": sorted({t.agent for t in trajs}),
        "rewards": {k: stats(v) for k, v in fields.items()},
        "steps": stats([float(s) for s in steps]),
        "errors": {
            "parse_errors": sum(1 for t in trajs for s in t.steps if s.action.parse_error),
            "tool_errors": sum(1 for t in trajs for s in t.steps if s.tool_error),
            "truncated": sum(1 for t in trajs if t.outcome.truncated),
            "torn_lines": len(store.report.torn_lines),
            "bad_lines": len(store.report.bad_lines),
            "failed_tasks": len(store.meta().get("failures", [])),
        },
        **({"gui": gui} if (gui := gui_metrics(trajs)) else {}),
    }


def format_gui(metrics: dict[str, Any]) -> str:
    """The GUI env's success metrics as text (the gui package is imported only for a run that has them)."""
    from rubricgym.envs.gui.metrics import format_metrics

    return format_metrics(metrics)


def print_examples(console: Console, run_dir: Path, examples: int) -> None:
    """The first ``examples`` trajectories of ``run_dir``, step by step (actions and results cut to 200 chars)."""
    for t in list(TrajectoryStore(run_dir).iter())[:examples]:
        console.rule(f"task {t.task.id} · agent {t.agent} · reward {t.outcome.reward:g}")
        console.print(f"[dim]{escape(t.task.prompt)}[/]", highlight=False)
        for s in t.steps:
            problem = s.action.parse_error or s.tool_error
            note = f" [red]({escape(problem)})[/]" if problem else ""
            text = escape(repr(s.action.text[:200]))
            console.print(f"[bold]{s.index}[/] [cyan]{escape(s.stage)}[/] {text}{note}", highlight=False)
            if s.tool_result is not None:
                console.print(f"    → {escape(repr(s.tool_result[:200]))}", highlight=False)
