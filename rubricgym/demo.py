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
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards import CheckJudge, ProcessRewardModel

ENV_ID = "toy-calculator-v0"
ENV_KWARGS = {"min_ops": 1, "max_ops": 2, "max_steps": 4}


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
        rows[name] = [{"total (rubric)": b.total or 0.0, "env reward": t.outcome.reward, **b.per_criterion}
                      for t, b in zip(trajs, asyncio.run(prm.score_many(trajs)), strict=True)]
    table = Table(title=f"mean score per criterion ({ENV_ID}, default rubric judged by its checks)")
    table.add_column("criterion")
    for name in rows:
        table.add_column(name, justify="right")
    for key in rows["oracle"][0]:
        table.add_row(
            key, *(f"{statistics.fmean(r.get(key, 0.0) for r in agent_rows):.3f}" for agent_rows in rows.values())
        )
    console.print(table)
    console.print(f"trajectories: {out}/<agent>/trajectories.jsonl; inspect with `rubricgym show {out}/smollm2-135m`")
    return 0
