"""``rubricgym demo`` (``make demo``): the main job on embedded defaults.

By default a GRPO run trains SmolLM2-135M-Instruct on one-operation calculator problems inside
``budget_minutes`` on two CPU cores (the config is ``trainers.demo.demo_config``), then prints base vs trained
held-out scores with the paired gain. ``env`` (``--env clinical-v0``) trains a real env family's demo and
``suite`` (``--suite``) the mixed ``levels`` suite with the SEC curriculum (``trainers.demo.FAMILY_DEMOS``,
``SUITE_DEMO``); both print base vs trained rubric reward and solve rate with 95% bootstrap CIs and paired gains,
per suite entry too, and put them at the top of the run's ``summary.html``. With ``score_only`` nothing trains:
the embedded local model and the scripted oracle roll out toy calculator tasks, every trajectory is scored with
the env's default rubric through the process reward model (programmatic checks), and a per-criterion summary is
printed.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from rubricgym.agents.local import LocalAgent
from rubricgym.core.fmt import disagreement, fmt_number
from rubricgym.core.registry import spec
from rubricgym.core.rollout import rollout_many
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Trajectory
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards import CheckJudge, ProcessRewardModel
from rubricgym.rewards.prm import Breakdown
from rubricgym.trainers.config import ConfigError
from rubricgym.trainers.demo import TOY_ENV, demo_config
from rubricgym.trainers.evaluation import EvalResult, paired_difference
from rubricgym.trainers.report import write_html

ENV_ID = "toy-calculator-v0"
ENV_KWARGS = {"min_ops": 1, "max_ops": 2, "max_steps": 4}


SOLVED_AT = 0.5
"""A held-out task counts as solved when its outcome reaches this. The trainer's held-out outcomes are solve flags
(``Outcome.succeeded``: the env's own verdict, the right answer or diagnosis, whatever partial credit its reward
gives), so this splits 1 from 0; summaries written before the flag existed hold the outcome reward, where a right
answer also earns at least 0.69 (clinical) or 0.7 (deep search) and a wrong one at most 0.31 or 0."""

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
    budget_minutes: float | None = None,
    run_dir: str | Path | None = None,
    console: Console | None = None,
    resume: bool = False,
    estimator: str | None = None,
    topology: str | None = None,
    score_only: bool = False,
    env: str | None = None,
    suite: bool = False,
    overrides: dict[str, Any] | None = None,
) -> int:
    """Train within ``budget_minutes`` (default 12 for the toy, 15 for a family or the suite) and print base vs
    trained held-out scores (``score_only``: score the local model and the oracle on toy tasks instead); 0 on
    success. ``env`` trains a real env family's demo, ``suite`` the mixed suite; ``overrides`` replaces config
    fields by dotted name. A bad env, estimator or override fails here, before torch loads."""
    console = console or Console()
    if score_only:
        return score_agents(8, Path(run_dir) if run_dir is not None else Path("runs/demo"), console)
    toy = env in (None, TOY_ENV) and not suite
    budget = budget_minutes if budget_minutes is not None else (12.0 if toy else 15.0)
    try:
        base_cfg = demo_config(budget, env=env, suite=suite)
    except ValueError as e:  # an unknown --env, or --env with --suite
        raise ConfigError(str(e)) from None
    cfg = base_cfg.with_overrides(
        **{
            "run_dir": str(run_dir) if run_dir is not None else None,
            "advantage.estimator": estimator,
            "advantage.topology": topology,
            **(overrides or {}),
        }
    )
    from rubricgym.trainers.trainer import Trainer  # loads torch and transformers: only once valid

    t0 = time.perf_counter()
    what = "one-operation problems" if toy else "toy, deep search, clinical; SEC" if suite else level_text(cfg)
    console.print(
        f"[bold]rubricgym demo[/]: {cfg.advantage.estimator} on {cfg.env.suite or cfg.env.id} ({what}) "
        f"with {cfg.model.name}, budget {budget:g} min, run dir {cfg.run_dir}"
    )
    trainer = Trainer(cfg, console=console)
    summary = trainer.run(resume=resume)  # its live display shows base and trained
    if toy:
        for line in summary["gain_lines"]:  # the paired gains with their CIs, and a warning if they disagree
            console.print(line, highlight=False)
    else:
        lines = solve_table(trainer, summary)
        for line in lines:
            console.print(line, highlight=False)
        add_to_report(Path(cfg.run_dir), cfg, [*summary["lines"], "", *lines])
    console.print(f"done in {(time.perf_counter() - t0) / 60:.1f} min; report: {summary['html']}")
    return 0


def level_text(cfg: Any) -> str:
    return ", ".join(f"{k}={v}" for k, v in cfg.env.kwargs.items())


def solved(result: EvalResult) -> EvalResult:
    """``result`` with its rewards replaced by solved (1) / not (0): the env's outcome reward >= ``SOLVED_AT``."""
    flags = [float(s >= SOLVED_AT) for s in result.success]
    return EvalResult.of(result.tag, result.step, result.task_ids, flags, flags)


def comparison_lines(name: str, base: EvalResult, trained: EvalResult, env: str | None = None) -> list[str]:
    """Base vs trained rubric reward and solve rate, each with its 95% bootstrap CI, and the paired gains; then a
    warning when the two gains point in opposite directions (``env``: what ``rubricgym check`` should look at)."""
    out = [f"{name} ({len(base.task_ids)} held-out tasks)"]
    gains = []
    for what, b, t in (("rubric reward", base, trained), ("solve rate", solved(base), solved(trained))):
        gain, ci = paired_difference(t, b)
        gains.append((gain, b.mean, t.mean))
        out.append(
            f"  {what:<13} base {b.mean:.3f} [{b.ci[0]:.3f}, {b.ci[1]:.3f}]  trained {t.mean:.3f} "
            f"[{t.ci[0]:.3f}, {t.ci[1]:.3f}]  gain {gain:+.3f} [95% CI {ci[0]:+.3f}, {ci[1]:+.3f}]"
        )
    (rubric_gain, _, _), (_, solved_base, solved_trained) = gains
    warning = disagreement(rubric_gain, solved_base, solved_trained, env=env)
    return out + ([f"  {warning}"] if warning else [])


def solve_table(trainer: Any, summary: dict[str, Any]) -> list[str]:
    """The demo's result lines: overall, then per suite entry (when the run trained on a suite)."""
    base, trained = EvalResult.model_validate(summary["base"]), EvalResult.model_validate(summary["trained"])
    lines = [
        f"base vs trained after {summary['steps']} steps (solved: env outcome reward >= {SOLVED_AT}; "
        "95% bootstrap CIs over tasks, gains paired per task)",
        *comparison_lines("overall", base, trained, trainer.checked_envs()),
    ]
    data = trainer.data
    if data.suite is not None:
        per_base, per_trained = data.per_entry(base), data.per_entry(trained)
        for name in per_base:
            lines += comparison_lines(name, per_base[name], per_trained[name], data.entries[name].env)
    return lines


def add_to_report(run_dir: Path, cfg: Any, lines: list[str]) -> None:
    """Rewrite ``summary.html`` with the demo's result lines at the top (plots and metrics as the trainer wrote)."""
    plots = sorted((run_dir / "plots").glob("*.png")) if cfg.plots else []
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if x]
    write_html(run_dir, cfg.model_dump(mode="json"), records, plots, lines)


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
