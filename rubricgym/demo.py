"""``make demo``: the main job on embedded defaults.

Rolls out the embedded local model (SmolLM2-135M-Instruct) and the scripted oracle on toy calculator tasks and
prints a scored summary: the env's reward and every criterion of the env's default rubric, judged by its checks.
"""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rubricgym.core.registry import spec
from rubricgym.core.rollout import rollout_many
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Trajectory

ENV_ID = "toy-calculator-v0"


def check_scores(traj: Trajectory) -> dict[str, float]:
    """Mean score of each default-rubric criterion, judged by the env's named checks."""
    cls = spec(traj.task.env_id).load()
    checks = cls.checks()
    out = {}
    for c in cls.default_rubric()["criteria"]:
        fn = checks[c["check"]]
        if c["scope"] == "step":
            scores = [fn(traj, i).score for i in range(len(traj.steps))]
            out[c["id"]] = statistics.fmean(scores) if scores else 0.0
        else:
            out[c["id"]] = fn(traj).score
    return out


def run_demo(tasks: int = 8, out: Path = Path("runs/demo"), console: Console | None = None) -> int:
    from rubricgym.agents.local import LocalAgent
    from rubricgym.envs.toy.agents import CalculatorOracle

    console = console or Console()
    task_set = TaskSet.generate(ENV_ID, tasks, seed=0, split="test", min_ops=1, max_ops=2)
    console.print(f"[bold]rubricgym demo[/]: {tasks} toy calculator tasks, local SmolLM2-135M-Instruct vs oracle")
    agents = {"oracle": CalculatorOracle(), "smollm2-135m": LocalAgent(temperature=0.0, max_new_tokens=96).load()}
    results: dict[str, list[dict[str, float]]] = {}
    for name, agent in agents.items():
        store = TrajectoryStore(out / name)
        asyncio.run(
            rollout_many(
                ENV_ID,
                agent,
                task_set,
                store=store,
                concurrency=8,
                env_kwargs={"min_ops": 1, "max_ops": 2, "max_steps": 4},
                description=name,
            )
        )
        results[name] = [{"env_reward": t.outcome.reward, **check_scores(t)} for t in store.iter()]
    table = Table(title="mean score per criterion (toy-calculator-v0, default rubric via checks)")
    table.add_column("criterion")
    for name in results:
        table.add_column(name, justify="right")
    for key in results["oracle"][0]:
        table.add_row(key, *(f"{statistics.fmean(r[key] for r in rows):.3f}" for rows in results.values()))
    console.print(table)
    console.print(f"trajectories: {out}/<agent>/trajectories.jsonl — inspect with `rubricgym show {out}/oracle`")
    return 0
