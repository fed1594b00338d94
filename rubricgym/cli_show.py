"""What ``rubricgym show`` reports about a run directory: the summary numbers and example trajectories."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from rubricgym.core.fmt import fmt_ci, solve_rate, unsolved_outscore
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.types import Trajectory
from rubricgym.suites.stats import bootstrap_ci


def summarize(run_dir: Path) -> dict:
    """Count, the solve rate with its 95% CI (the outcome first), mean/std of every reward field, steps, errors,
    and a warning when unsolved episodes earn more rubric reward than solved ones."""
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
    solved = [float(t.outcome.succeeded) for t in trajs]
    ci = bootstrap_ci(solved) if solved else None
    rubric_key = next((k for k in ("rubric", "total") if k in fields and len(fields[k]) == len(trajs)), None)
    from rubricgym.envs.gui.metrics import gui_metrics  # here: importing the gui package loads the browser env

    return {
        "run_dir": str(run_dir),
        "count": len(trajs),
        "envs": sorted({t.task.env_id for t in trajs}),
        "agents": sorted({t.agent for t in trajs}),
        "solved": {
            "n": int(sum(solved)),
            "episodes": len(solved),
            "rate": solve_rate([t.outcome for t in trajs]),
            "ci": list(ci) if ci else None,
        },
        "warnings": [w]
        if rubric_key and (w := unsolved_outscore([s == 1.0 for s in solved], fields[rubric_key], name=rubric_key))
        else [],
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
        "tools": tool_profile(trajs),
        **({"gui": gui} if (gui := gui_metrics(trajs)) else {}),
    }


NO_CALL = "(no call)"
"""The row of turns whose action held no parsable tool call."""


def tool_profile(trajs: list[Trajectory]) -> dict[str, dict[str, int]]:
    """What the agent did, per tool: ``{"calls": turns that called it, "episodes": trajectories that called it at
    least once, "errors": calls the tool refused}``, most called first; turns with no parsable call count under
    ``(no call)``. A policy that never reaches its env's answer tool shows here before any reward does."""
    rows: dict[str, dict[str, int]] = {}
    for t in trajs:
        seen: set[str] = set()
        for s in t.steps:
            name = s.action.tool_call.name if s.action.tool_call is not None else NO_CALL
            row = rows.setdefault(name, {"calls": 0, "episodes": 0, "errors": 0})
            row["calls"] += 1
            row["errors"] += bool(s.tool_error)
            if name not in seen:
                seen.add(name)
                row["episodes"] += 1
    return dict(sorted(rows.items(), key=lambda kv: (-kv[1]["calls"], kv[0])))


def format_tools(profile: dict[str, dict[str, int]], episodes: int, top: int = 8) -> str:
    """One line: the ``top`` most called names with their calls, how many of the ``episodes`` called them and the
    calls refused (an unknown name, bad arguments), then the rest folded into one count."""
    parts = []
    for name, row in list(profile.items())[:top]:
        refused = f", {row['errors']} refused" if row["errors"] else ""
        parts.append(f"{escape(name)} {row['calls']} ({row['episodes']}/{episodes} episodes{refused})")
    if rest := list(profile.values())[top:]:
        parts.append(f"{len(rest)} other names {sum(r['calls'] for r in rest)}")
    return "tool calls: " + (" · ".join(parts) if parts else "none")


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


def solved_line(solved: dict[str, Any]) -> str:
    """``solved 3/10 episodes: 30.0% [95% CI 10.0%, 60.0%]``: the outcome, which ``show`` leads with."""
    if not solved["episodes"]:
        return "solved: no episodes"
    rate = f"{solved['rate']:.1%}" if solved["rate"] is not None else "-"
    return f"solved {solved['n']}/{solved['episodes']} episodes: {rate} {fmt_ci(solved['ci'], '.1%')}"
