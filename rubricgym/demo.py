"""``rubricgym demo`` (``make demo``): the main job on embedded defaults.

By default a GRPO run trains SmolLM2-135M-Instruct on one-operation calculator problems inside
``budget_minutes`` on two CPU cores (the config is ``trainers.demo.demo_config``), then prints base vs trained
held-out scores with the paired gain. With ``score_only`` nothing trains: the embedded local model and the
scripted oracle roll out toy calculator tasks, every trajectory is scored with the env's default rubric through
the process reward model (programmatic checks), and a per-criterion summary is printed.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from rubricgym.agents.local import LocalAgent
from rubricgym.core.fmt import fmt_number
from rubricgym.core.registry import spec
from rubricgym.core.rollout import rollout_many
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Trajectory
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards import CheckJudge, ProcessRewardModel
from rubricgym.rewards.prm import Breakdown
from rubricgym.trainers.demo import demo_config

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
            cells.append(
                f"{int(sum(vals))}" if vals and key == MASKED else fmt_number(statistics.fmean(vals) if vals else None)
            )
        table.add_row(key, *cells)
    return table


def run_demo(
    budget_minutes: float = 12,
    run_dir: str | Path | None = None,
    console: Console | None = None,
    resume: bool = False,
    estimator: str | None = None,
    topology: str | None = None,
    score_only: bool = False,
) -> int:
    """Train within ``budget_minutes`` and print base vs trained held-out scores (``score_only``: score the local
    model and the oracle on toy tasks instead); 0 on success."""
    console = console or Console()
    if score_only:
        return score_agents(8, Path(run_dir) if run_dir is not None else Path("runs/demo"), console)
    cfg = demo_config(budget_minutes).with_overrides(
        **{
            "run_dir": str(run_dir) if run_dir is not None else None,
            "advantage.estimator": estimator,
            "advantage.topology": topology,
        }
    )  # a bad estimator fails here, before torch loads
    from rubricgym.trainers.trainer import Trainer  # loads torch and transformers: only once the config is valid

    t0 = time.perf_counter()
    console.print(
        f"[bold]rubricgym demo[/]: {cfg.advantage.estimator} on {cfg.env.id} (one-operation problems) "
        f"with {cfg.model.name}, budget {budget_minutes:g} min, run dir {cfg.run_dir}"
    )
    summary = Trainer(cfg, console=console).run(resume=resume)  # its live display shows base and trained
    console.print(summary["lines"][-1])  # the paired gain with its CI
    console.print(f"done in {(time.perf_counter() - t0) / 60:.1f} min; report: {summary['html']}")
    return 0


def score_agents(tasks: int, out: Path, console: Console) -> int:
    """The local model and the oracle on ``tasks`` toy tasks, scored per criterion; 0 on success."""
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
