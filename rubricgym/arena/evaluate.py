"""``rubricgym eval``: one agent on every entry of a suite, scored by each entry's rubric, with bootstrap CIs.

Trajectories stream to ``OUT/<entry>/trajectories.jsonl`` (a ``TrajectoryStore``), so a killed evaluation
resumes where it stopped. Each trajectory is scored with its entry's rubric by the env's checks (plus an LLM
judge or panel for ``judge`` criteria when given); a trajectory whose verdicts failed counts as a judge error,
is left out of the means and reported, never scored 0. The overall score weights each entry's mean by the
suite's weights; its CI resamples tasks within each entry (a stratified bootstrap).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.arena.agents import AgentFactory
from rubricgym.core.safeio import atomic_write
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.types import Trajectory
from rubricgym.suites.stats import bootstrap_ci
from rubricgym.suites.suite import Suite, SuiteEntry

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"


class EntryReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entry: str
    env: str
    weight: float
    tasks: int
    scored: int
    reward: float | None
    reward_ci: tuple[float, float] | None
    success: float | None
    success_ci: tuple[float, float] | None
    steps: float | None
    judge_errors: int
    failed_tasks: list[str] = Field(default_factory=list)


class SuiteReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suite: str
    version: str
    agent: str
    agent_spec: dict[str, Any] = Field(default_factory=dict)
    """The agent's full entry (kind, model, ``tts`` settings, ...) as validated."""
    entries: list[EntryReport]
    reward: float | None
    reward_ci: tuple[float, float] | None
    success: float | None
    success_ci: tuple[float, float] | None
    judge_errors: int
    rows: list[dict[str, Any]] = Field(default_factory=list)
    """Per task: entry, task id, rubric reward (None on a judge error), env reward, steps."""


def _finite(xs: Sequence[float | None]) -> list[float]:
    return [float(x) for x in xs if x is not None and math.isfinite(x)]


def weighted_bootstrap(
    groups: dict[str, list[float]], weights: dict[str, float], n: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float | None, tuple[float, float] | None]:
    """Weighted mean of group means and its CI, resampling values within each group (stratified)."""
    groups = {k: v for k, v in groups.items() if v}
    if not groups:
        return None, None
    total = sum(weights[k] for k in groups)
    rng = np.random.default_rng(seed)
    point, boot = 0.0, np.zeros(n)
    for k, vals in groups.items():
        x = np.asarray(vals, dtype=float)
        w = weights[k] / total
        point += w * x.mean()
        boot += w * x[rng.integers(0, x.size, size=(n, x.size))].mean(axis=1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(point), (float(lo), float(hi))


async def play_entry(
    suite: Suite,
    entry: SuiteEntry,
    factory: AgentFactory,
    agent: str,
    out: Path,
    *,
    concurrency: int = 4,
    progress: bool = True,
) -> tuple[list[Trajectory], list[str]]:
    """Every task of ``entry`` played once by ``agent`` (resuming from ``out``); returns (trajectories in task
    order, ids of tasks that failed)."""
    from rubricgym.core.rollout import rollout_many

    tasks = suite.tasks(entry.name)
    store = TrajectoryStore(out)
    report = await rollout_many(
        entry.env,
        factory.agent(agent, entry.env, entry.kwargs, entry.load_rubric(suite.base_dir)),
        list(tasks),
        concurrency=concurrency,
        store=store,
        seed=entry.seed,
        env_kwargs=entry.kwargs,
        progress=progress,
        description=f"{agent} · {entry.name}",
    )
    by_task: dict[str, Trajectory] = {}
    for t in store.iter():
        by_task.setdefault(t.task.id, t)
    return [by_task[t.id] for t in tasks if t.id in by_task], [tid for tid, _ in report.failures]


def stored_solve_rate(suite: Suite, agent_dir: Path) -> tuple[float | None, tuple[float, float] | None]:
    """An agent's solve rate on ``suite`` read from the trajectories it left in ``agent_dir/<entry>/`` (an arena's
    ``trajectories/<agent>``), weighted and bootstrapped per entry as ``evaluate_suite``'s; ``None`` for none."""
    success_by: dict[str, list[float]] = {}
    for entry in suite.entries:
        if not (agent_dir / entry.name).is_dir():
            continue
        ids = {t.id for t in suite.tasks(entry.name)}
        by_task: dict[str, Trajectory] = {}
        for t in TrajectoryStore(agent_dir / entry.name).iter():
            if t.task.id in ids:
                by_task.setdefault(t.task.id, t)
        success_by[entry.name] = [float(t.outcome.succeeded) for t in by_task.values()]
    return weighted_bootstrap(success_by, suite.weights)


def rubric_judges(
    judge_url: str | None = None,
    judge_model: str | None = None,
    panel: Sequence[str] = (),
    cache_path: Path | None = None,
) -> list[Any]:
    """The env's checks plus an optional LLM judge or panel for ``judge`` criteria (as ``rubricgym score``)."""
    from rubricgym.rewards.cache import JudgeCache
    from rubricgym.rewards.cli import build_judges

    cache = JudgeCache(cache_path) if cache_path is not None and (judge_url or panel) else None
    return build_judges(judge_url, judge_model, list(panel), "majority", cache)


async def evaluate_suite(
    suite: Suite,
    factory: AgentFactory,
    agent: str,
    out: Path,
    *,
    judges: list[Any],
    concurrency: int = 4,
    progress: bool = True,
) -> SuiteReport:
    """Play and score every entry; write ``report.json`` and ``report.html`` under ``out``."""
    from rubricgym.rewards.path import RewardPath

    out.mkdir(parents=True, exist_ok=True)
    entries, rows = [], []
    rewards_by: dict[str, list[float]] = {}
    success_by: dict[str, list[float]] = {}
    for entry in suite.entries:
        trajs, failed = await play_entry(
            suite, entry, factory, agent, out / entry.name, concurrency=concurrency, progress=progress
        )
        path = RewardPath(judges, entry=entry.load_rubric(suite.base_dir))  # each task's own rubric first
        breakdowns = await path.score_many(trajs, concurrency=8)
        errors = 0
        for t, b in zip(trajs, breakdowns, strict=True):
            ok = b.valid
            errors += not ok
            rows.append(
                {
                    "entry": entry.name,
                    "task_id": t.task.id,
                    "reward": b.total if ok else None,
                    "env_reward": float(t.outcome.reward),
                    "steps": len(t.steps),
                    "judge_error": None if ok else "; ".join(str(v.error) for v in b.errors()[:2]),
                }
            )
        rewards = _finite([b.total if b.valid else None for b in breakdowns])
        success = [float(t.outcome.succeeded) for t in trajs]
        rewards_by[entry.name], success_by[entry.name] = rewards, success
        entries.append(
            EntryReport(
                entry=entry.name,
                env=entry.env,
                weight=suite.weights[entry.name],
                tasks=len(suite.tasks(entry.name)),
                scored=len(rewards),
                reward=float(np.mean(rewards)) if rewards else None,
                reward_ci=bootstrap_ci(rewards) if rewards else None,
                success=float(np.mean(success)) if success else None,
                success_ci=bootstrap_ci(success) if success else None,
                steps=float(np.mean([len(t.steps) for t in trajs])) if trajs else None,
                judge_errors=errors,
                failed_tasks=failed,
            )
        )
    reward, reward_ci = weighted_bootstrap(rewards_by, suite.weights)
    solved, success_ci = weighted_bootstrap(success_by, suite.weights)
    report = SuiteReport(
        suite=suite.name,
        version=suite.version,
        agent=agent,
        agent_spec=factory.specs[agent].model_dump(mode="json"),
        entries=entries,
        reward=reward,
        reward_ci=reward_ci,
        success=solved,
        success_ci=success_ci,
        judge_errors=sum(e.judge_errors for e in entries),
        rows=rows,
    )
    atomic_write(out / REPORT_JSON, json.dumps(report.model_dump(mode="json"), indent=2))
    from rubricgym.arena.report import eval_html

    atomic_write(out / REPORT_HTML, eval_html(report))
    return report
