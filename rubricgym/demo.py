"""``make demo``: the main job on embedded defaults.

Rolls out the embedded local model (SmolLM2-135M-Instruct) and the scripted oracle on toy calculator tasks,
scores every trajectory with the env's default rubric through the process reward model (programmatic checks),
and prints a per-criterion summary. Training the local model (``rubricgym train``) is the trainers' job.
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rubricgym.agents.local import LocalAgent
from rubricgym.core.registry import spec
from rubricgym.core.rollout import rollout_many
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Trajectory
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards import CheckJudge, ProcessRewardModel
from rubricgym.rewards.prm import Breakdown

ENV_ID = "toy-calculator-v0"
ENV_KWARGS = {"min_ops": 1, "max_ops": 2, "max_steps": 4}


TOTAL = "total (rubric)"
MASKED = "errored (masked)"


def score_rows(trajs: list[Trajectory], breakdowns: list[Breakdown]) -> list[dict[str, float]]:
    """Per trajectory: env reward, per-criterion scores and the rubric total; a total that failed (a judge error)
    is left out and counted under ``MASKED``, never scored 0."""
    out = []
    for t, b in zip(trajs, breakdowns, strict=True):
        row = {"env reward": t.outcome.reward, **b.per_criterion, MASKED: float(b.total is None)}
        if b.total is not None:
            row[TOTAL] = b.total
        out.append(row)
    return out


def criterion_means(rows: dict[str, list[dict[str, float]]], title: str) -> Table:
    """Mean of each field per agent over the rows that have it (``MASKED`` is a count); '-' when none has it."""
    keys = list(dict.fromkeys([TOTAL, *(k for agent_rows in rows.values() for r in agent_rows for k in r)]))
    table = Table(title=title)
    table.add_column("criterion")
    for name in rows:
        table.add_column(name, justify="right")
    for key in keys:
        cells = []
        for agent_rows in rows.values():
            vals = [r[key] for r in agent_rows if key in r]
            cells.append("-" if not vals else f"{int(sum(vals))}" if key == MASKED else f"{statistics.fmean(vals):.3f}")
        table.add_row(key, *cells)
    return table


def run_demo(tasks: int = 8, out: Path = Path("runs/demo"), console: Console | None = None) -> int:
    console = console or Console()
    task_set = TaskSet.generate(ENV_ID, tasks, seed=0, split="test", **ENV_KWARGS)
    console.print(f"[bold]rubricgym demo[/]: {tasks} toy calculator tasks, local SmolLM2-135M-Instruct vs oracle")
    prm = ProcessRewardModel(spec(ENV_ID).load().default_rubric(), [CheckJudge()])
    agents = {"oracle": CalculatorOracle(), "smollm2-135m": LocalAgent(temperature=0.0, max_new_tokens=96).load()}
    rows: dict[str, list[dict[str, float]]] = {}
    for name, agent in agents.items():
        store = TrajectoryStore(out / name)
        report = asyncio.run(
            rollout_many(ENV_ID, agent, task_set, store=store, concurrency=8, env_kwargs=ENV_KWARGS, description=name)
        )
        if report.failures:
            console.print(f"[red]{name}: {len(report.failures)} episode(s) failed: {report.failures[0][1]}")
            return 1
        trajs = list(store.iter())
        rows[name] = score_rows(trajs, asyncio.run(prm.score_many(trajs)))
    table = criterion_means(rows, f"mean score per criterion ({ENV_ID}, default rubric judged by its checks)")
    console.print(table)
    console.print(f"trajectories: {out}/<agent>/trajectories.jsonl; inspect with `rubricgym show {out}/smollm2-135m`")
    return 0
