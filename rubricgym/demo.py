"""``rubricgym demo`` (``make demo``): the main job on embedded defaults.

By default a GRPO run trains SmolLM2-135M-Instruct on one-operation calculator problems inside
``budget_minutes`` on two CPU cores (the config is ``trainers.demo.demo_config``), then prints base vs trained
held-out scores with the paired gain. ``env`` (``--env clinical-v0``) trains a real env family's demo and
``suite`` (``--suite``) the mixed ``demo-mix`` suite with the SEC curriculum (``trainers.demo.FAMILY_DEMOS``,
``SUITE_DEMO``) in three rows (``run_three_rows``): the base policy is evaluated, warm-started by cloning the
family's teacher on training tasks (cached in ``RUN/warm_start``, reused by a rerun), evaluated again, trained with
GRPO from there and evaluated a third time, every time on the same held-out tasks, greedy and sampled; the table
gives solve rate and rubric reward with 95% bootstrap CIs and the paired gains of the warm start over the base and
of GRPO over the warm start (per suite entry and per held-out split too), at the top of the run's
``summary.html``. Then the arena ranks the three policies on those tasks. With ``score_only`` nothing trains:
the embedded local model and the scripted oracle roll out toy calculator tasks, every trajectory is scored with
the env's default rubric through the process reward model (programmatic checks), and a per-criterion summary is
printed.
"""

from __future__ import annotations

import asyncio
import json
import math
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from rubricgym.agents.local import LocalAgent
from rubricgym.agents.models import KNOWN_MODELS, is_model_dir
from rubricgym.arena.agents import CheckpointSpec, LocalSpec, checkpoint_dir
from rubricgym.arena.arena import run_arena
from rubricgym.core.fmt import disagreement, fmt_number
from rubricgym.core.registry import spec
from rubricgym.core.rollout import rollout_many
from rubricgym.core.safeio import atomic_write
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Task, Trajectory
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards import CheckJudge, ProcessRewardModel
from rubricgym.rewards.prm import Breakdown
from rubricgym.suites.suite import Suite, SuiteEntry, load_suite
from rubricgym.trainers.config import ConfigError
from rubricgym.trainers.demo import BUDGET_MINUTES, SAMPLED_EVAL, TOY_ENV, demo_config, extra_eval_splits
from rubricgym.trainers.evaluation import EvalResult, paired_difference, paired_outcome_difference
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
    model: str | None = None,
    sampled: int = SAMPLED_EVAL,
    arena: bool = True,
) -> int:
    """Train within ``budget_minutes`` and print the held-out comparison (``score_only``: score the local model
    and the oracle on toy tasks instead); 0 on success. The toy demo (12 minutes by default) prints base vs
    trained; ``env`` (a family) and ``suite`` (the mixed suite) run the three rows (``run_three_rows``, 20
    minutes by default, the budget covering loading, the warm start, the three policies' evaluations and GRPO) and
    then, with ``arena``, rank the three policies. ``model`` starts from any checkpoint: a model name, a model
    directory (``rubricgym sft``'s ``OUT/model``, a ``checkpoints/step-N``) or a run directory holding one;
    ``sampled``: rollouts per held-out task in the sampled rows; ``overrides`` replaces config fields by dotted
    name. A bad env, model, estimator or override fails here, before torch loads."""
    console = console or Console()
    if score_only:
        return score_agents(8, Path(run_dir) if run_dir is not None else Path("runs/demo"), console)
    toy = env in (None, TOY_ENV) and not suite
    budget = (
        budget_minutes
        if budget_minutes is not None
        else BUDGET_MINUTES[TOY_ENV if toy else "suite" if suite else "family"]
    )
    try:
        base_cfg = demo_config(budget, env=env, suite=suite)
    except ValueError as e:  # an unknown --env, or --env with --suite
        raise ConfigError(str(e)) from None
    if sampled < 1:
        raise ConfigError(f"sampled rollouts per held-out task: {sampled}; give 1 or more")
    cfg = base_cfg.with_overrides(
        **{
            "run_dir": str(run_dir) if run_dir is not None else None,
            "advantage.estimator": estimator,
            "advantage.topology": topology,
            "model.name": start_model(model) if model is not None else None,
            **(overrides or {}),
        }
    )
    if not toy:
        return run_three_rows(cfg, budget * 60, console, resume=resume, sampled=sampled, arena=arena)
    from rubricgym.trainers.trainer import Trainer  # loads torch and transformers: only once valid

    t0 = time.perf_counter()
    what = "one-operation problems" if toy else "toy, deep search, clinical; SEC" if suite else level_text(cfg)
    console.print(
        f"[bold]rubricgym demo[/]: {cfg.advantage.estimator} on {cfg.env.suite or cfg.env.id} ({what}) "
        f"with {cfg.model.name}, budget {budget:g} min, run dir {cfg.run_dir}"
    )
    trainer = Trainer(cfg, console=console)
    summary = trainer.run(resume=resume)  # its live display shows base and trained
    for line in summary["gain_lines"]:  # the paired gains with their CIs, and a warning if they disagree
        console.print(line, highlight=False)
    console.print(f"done in {(time.perf_counter() - t0) / 60:.1f} min; report: {summary['html']}")
    return 0


def start_model(name_or_dir: str) -> str:
    """What ``--model`` names, as ``model.name``: a known model name, a model directory, or a directory holding
    one (``rubricgym sft``'s ``OUT`` -> ``OUT/model``; a demo or ``train`` run -> its newest checkpoint, else its
    ``warm_start/model``). Anything else fails with what is accepted, before torch loads."""
    MODEL_DIR, WARM_START_DIR = "model", "warm_start"  # trainers.sft's names (it loads torch)

    p = Path(name_or_dir).expanduser()
    if is_model_dir(p):
        return str(p)
    if p.is_dir():
        for candidate in (p / MODEL_DIR, checkpoint_dir(str(p)), p / WARM_START_DIR / MODEL_DIR):
            if candidate is not None and is_model_dir(candidate):
                return str(candidate)
        raise ConfigError(
            f"--model {name_or_dir}: the directory holds no model (config.json); give a model directory "
            f"(`rubricgym sft --out OUT` writes OUT/{MODEL_DIR}, a run writes checkpoints/step-N) or a known model "
            f"({', '.join(KNOWN_MODELS)})"
        )
    if name_or_dir.lower() in KNOWN_MODELS:
        return name_or_dir
    raise ConfigError(
        f"--model {name_or_dir}: no such directory and no known model; give a model directory (`rubricgym sft` "
        f"writes OUT/{MODEL_DIR}, a run writes checkpoints/step-N) or one of {', '.join(KNOWN_MODELS)}"
    )


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


# ---- the family and suite demos: base, warm start, warm start + GRPO --------------------------------------------

ROWS = ("base", "warm start", "warm start + GRPO")
"""The three policies of a family demo, in the order they are trained."""
ARENA_NAMES = {"base": "base", "warm start": "warm-start", "warm start + GRPO": "warm-start-grpo"}
"""Each row's agent name in the arena (names must be file-safe)."""
MODES = ("greedy", "sampled")
MIN_GRPO_SHARE = 0.25
"""GRPO's step loop gets at least this share of the budget even when loading, the warm start and the first two
rows left less (a loaded machine): the third row is then always trained, and the demo overruns its budget
(the wall-time line says by how much)."""
ARENA_RESERVE_S = 30.0
"""Seconds kept for the arena: it judges the evaluations' greedy episodes with the rubric (no model runs)."""


@dataclass
class ThreeRows:
    """Every evaluation of a family demo: ``evals[row][mode][split]`` (the rows of ``ROWS``; ``greedy`` and
    ``sampled``; ``test`` and any extra held-out split), each on the same tasks in the same order, and the greedy
    episodes per row and split (what the arena judges)."""

    splits: list[str]
    evals: dict[str, dict[str, dict[str, EvalResult]]] = field(default_factory=dict)
    episodes: dict[str, dict[str, list[Trajectory]]] = field(default_factory=dict)

    def add(self, row: str, mode: str, split: str, result: EvalResult, trajs: list[Trajectory]) -> None:
        self.evals.setdefault(row, {}).setdefault(mode, {})[split] = result
        if mode == "greedy":
            self.episodes.setdefault(row, {})[split] = trajs

    def to_json(self) -> dict[str, Any]:
        return {
            row: {mode: {sp: r.model_dump(mode="json") for sp, r in by.items()} for mode, by in modes.items()}
            for row, modes in self.evals.items()
        }


GAINS = ((ROWS[1], ROWS[0], "warm start over base"), (ROWS[2], ROWS[1], "GRPO over warm start"))
"""The paired gains a three-row table reports: (later row, earlier row, what the gain is of)."""


def _cell(mean: float, ci: tuple[float, float], spec: str) -> str:
    return f"{format(mean, spec)} [{format(ci[0], spec)}, {format(ci[1], spec)}]"


def gain_text(after: EvalResult, before: EvalResult) -> str:
    """The paired gains of ``after`` over ``before`` on the same tasks: solve rate then rubric reward, each with
    its 95% bootstrap CI over tasks (a different task list raises ``ValueError``)."""
    solve, solve_ci = paired_outcome_difference(after, before)
    rubric, rubric_ci = paired_difference(after, before)
    return f"solve {_cell(solve, solve_ci, '+.1%')}  rubric {_cell(rubric, rubric_ci, '+.3f')}"


SPLIT_NOTES = {
    "test": "held-out tasks",
    "test-train-world": "unseen questions about the training world",
    "test-unseen": "held-out cases of conditions training never draws",
}


def three_row_lines(
    rows: ThreeRows, *, sampled: int, steps: int, split_notes: dict[str, str] | None = None
) -> list[str]:
    """The three-row table per held-out split: per policy the solve rate and rubric reward, greedy and sampled,
    with 95% bootstrap CIs over tasks; then the paired gains of the warm start over the base and of GRPO over the
    warm start (the RL claim), each mode. Every comparison is on the same task ids (checked)."""
    notes = {**SPLIT_NOTES, **(split_notes or {})}
    out = []
    for split in rows.splits:
        first = rows.evals[ROWS[0]]["greedy"][split]
        out.append(
            f"{split}: {len(first.task_ids)} {notes.get(split, 'held-out tasks')}; greedy = 1 rollout at "
            f"temperature 0, "
            + (
                f"sampled = {sampled} at the training temperature per task"
                if any(split in rows.evals.get(row, {}).get("sampled", {}) for row in ROWS)
                else "greedy only"
            )
            + "; solved = the env's verdict; [95% bootstrap CI over tasks]"
        )
        out.append(f"  {'policy':<19}{'mode':<9}{'solve rate':<25}{'rubric reward'}")
        for row in ROWS:
            for mode in MODES:
                r = rows.evals.get(row, {}).get(mode, {}).get(split)
                if r is None:
                    continue
                out.append(
                    f"  {row if mode == 'greedy' else '':<19}{mode:<9}"
                    f"{_cell(r.success_mean, r.success_ci, '.1%'):<25}{_cell(r.mean, r.ci, '.3f')}"
                )
        for after, before, what in GAINS:
            for mode in MODES:
                a = rows.evals.get(after, {}).get(mode, {}).get(split)
                b = rows.evals.get(before, {}).get(mode, {}).get(split)
                if a is not None and b is not None:
                    label = f"{what} ({steps} GRPO steps)" if after == ROWS[2] else what
                    out.append(f"  paired gain, {label}, {mode}: {gain_text(a, b)}")
    return out


def per_entry_lines(trainer: Any, rows: ThreeRows) -> list[str]:
    """For a suite: each entry's greedy rows and its paired gains (warm start over base, GRPO over warm start)."""
    out = ["per suite entry (greedy; paired gains with 95% CIs):"]
    parts = {row: trainer.data.per_entry(rows.evals[row]["greedy"]["test"]) for row in ROWS if row in rows.evals}
    for name in parts.get(ROWS[0], {}):
        out.append(f"  {name}:")
        for row in ROWS:
            r = parts.get(row, {}).get(name)
            if r is not None:
                out.append(
                    f"    {row:<19}solve {_cell(r.success_mean, r.success_ci, '.1%')}  "
                    f"rubric {_cell(r.mean, r.ci, '.3f')}"
                )
        for after, before, what in GAINS:
            if name in parts.get(after, {}) and name in parts.get(before, {}):
                out.append(f"    gain, {what}: {gain_text(parts[after][name], parts[before][name])}")
    return out


def curve_lines(records: list[dict[str, Any]]) -> list[str]:
    """GRPO's training curves, one line per step: mean and spread of the group rewards, the share of groups with
    reward variance (the ones GRPO learns from), the solve rate of the rollouts and the policy's entropy."""
    train = [r for r in records if r.get("kind") == "train"]
    if not train:
        return ["GRPO: no step ran within the budget (the third row is the warm start's weights)"]
    out = ["GRPO steps (reward mean/std over rollouts, groups with reward variance, rollouts solved, entropy):"]
    for r in train:
        ent = r.get("entropy")
        mean, std = r.get("reward_mean", math.nan), r.get("reward_std", math.nan)
        varied, solved_share = 1 - r.get("zero_variance", math.nan), r.get("success_mean", math.nan)
        out.append(
            f"  step {r['step']:>3}: reward {mean:.3f} +- {std:.3f}  groups with variance {varied:.0%}  "
            f"solved {solved_share:.0%}" + (f"  entropy {ent:.3f}" if isinstance(ent, int | float) else "")
        )
    return out


def run_three_rows(
    cfg: Any,
    budget_s: float,
    console: Console,
    *,
    resume: bool = False,
    sampled: int = SAMPLED_EVAL,
    arena: bool = True,
) -> int:
    """The family or suite demo: base, warm start and warm start + GRPO on the same held-out tasks (see the module
    docstring), the table printed and put at the top of ``summary.html``, everything in ``RUN/three_rows.json``;
    then the arena over the three policies. ``budget_s`` is the wall time up to the table: GRPO's step loop gets
    what is left after loading, the warm start and the first two rows, less what the warm start's evaluation took
    (the last row's costs the same) and ``ARENA_RESERVE_S``."""
    from rubricgym.trainers.trainer import Trainer

    t0 = time.perf_counter()
    what = "toy, deep search, clinical; SEC" if cfg.env.suite else level_text(cfg)
    console.print(
        f"[bold]rubricgym demo[/]: base, warm start ({cfg.warm_start.agent if cfg.warm_start else 'none'}) and "
        f"warm start + {cfg.advantage.estimator} on {cfg.env.suite or cfg.env.id} ({what}) with {cfg.model.name}, "
        f"budget {budget_s / 60:g} min up to the table, run dir {cfg.run_dir}"
    )

    class DemoTrainer(Trainer):
        evaluate = _evaluate_keeping

    trainer: Trainer = DemoTrainer(cfg, console=console)  # a suite is a Trainer of several entries
    trainer.kept = {}  # type: ignore[attr-defined]
    extra = [] if cfg.env.suite is not None else extra_eval_splits(cfg.env.id)
    held = {"test": list(trainer.eval_tasks), **{sp: list(trainer.held_out_tasks(sp)) for sp in extra}}
    summary, rows, timings = asyncio.run(_three_rows(trainer, held, budget_s, t0, console, resume, sampled))
    steps = int(summary["steps"])
    lines = three_row_lines(rows, sampled=sampled, steps=steps)
    if trainer.data.suite is not None:
        lines += per_entry_lines(trainer, rows)
    lines += curve_lines(trainer.metrics.read())
    lines.append(
        f"wall time (budget {budget_s / 60:g} min up to the table): "
        + ", ".join(f"{k} {v / 60:.1f} min" for k, v in timings.items())
    )
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)
    run_dir = Path(cfg.run_dir)
    result: dict[str, Any] = {"rows": rows.to_json(), "steps": steps, "sampled": sampled, "timings_s": timings}
    board: list[str] = []
    if arena:
        report = asyncio.run(run_policy_arena(trainer, rows, held))
        board = leaderboard_lines(report)
        for line in board:
            console.print(line, highlight=False, soft_wrap=True)
        result["arena"] = {"order": report["order"], "agents": report["agents"]}
    atomic_write(run_dir / THREE_ROWS, json.dumps(result, indent=2, default=str))
    add_to_report(run_dir, cfg, [*lines, *([""] + board if board else []), "", *summary["lines"]])
    console.print(f"done in {(time.perf_counter() - t0) / 60:.1f} min; report: {summary['html']}")
    return 0


async def _evaluate_keeping(self: Any, tag: str, step: int) -> EvalResult:
    """The trainer's held-out evaluation (greedy on ``eval_tasks``) through ``evaluate_on``, keeping the episodes
    in ``self.kept[tag]``: the GRPO row's greedy episodes are the arena's, not played a second time."""
    result, trajs = await self.evaluate_on(self.eval_tasks, tag, step, temperature=self.cfg.generation.eval_temperature)
    self.kept[tag] = (result, trajs)
    return result


def _num(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, int | float) else "-"


THREE_ROWS = "three_rows.json"
"""The demo's evaluations (every row, mode and split), GRPO's step count, wall times and the arena's order."""


async def _three_rows(
    trainer: Any,
    held: dict[str, list[Task]],
    budget_s: float,
    t0: float,
    console: Console,
    resume: bool,
    sampled: int,
) -> tuple[dict[str, Any], ThreeRows, dict[str, float]]:
    from rubricgym.trainers.engine.distributed import is_main
    from rubricgym.trainers.sft import WARM_START_DIR, finished, warm_start

    cfg = trainer.cfg
    rows = ThreeRows(list(held))
    timings: dict[str, float] = {"loading": time.perf_counter() - t0}
    greedy_t, sampled_t = cfg.generation.eval_temperature, cfg.generation.temperature

    async def measure(row: str, step: int, skip: tuple[str, str] | None = None) -> float:
        began = time.perf_counter()
        for split, tasks in held.items():
            for mode, temperature, n in (("greedy", greedy_t, 1), ("sampled", sampled_t, sampled)):
                if (mode, split) == skip or (mode == "sampled" and split != "test"):
                    continue  # the extra splits greedy only: sampled rows there cost the demo ~5 of its 20 min
                console.print(f"evaluating {row} ({mode}) on {len(tasks)} {split} tasks", highlight=False)
                result, trajs = await trainer.evaluate_on(tasks, row, step, temperature=temperature, samples=n)
                rows.add(row, mode, split, result, trajs)
                console.print(f"  {row} {mode} {split}: {result.line().strip()}", highlight=False, soft_wrap=True)
        return time.perf_counter() - began

    timings["base evaluation"] = await measure(ROWS[0], 0)
    if cfg.warm_start is not None:
        began = time.perf_counter()
        where = Path(cfg.run_dir) / WARM_START_DIR
        reused = finished(where, cfg.warm_start)
        cloned = await warm_start(trainer)
        timings["warm start (reused)" if reused else "warm start"] = time.perf_counter() - began
        how = f"reused the finished one in {where}" if reused else f"cloned {cloned.get('kept', '?')} teacher episodes"
        acc = cloned.get("heldout_accuracy_before"), cloned.get("heldout_accuracy_after")
        dec = cloned.get("heldout_decision_accuracy_before"), cloned.get("heldout_decision_accuracy_after")
        console.print(
            f"warm start: {how}; held-out token accuracy {_num(acc[0])} -> {_num(acc[1])}, "
            f"decisions {_num(dec[0])} -> {_num(dec[1])}",
            highlight=False,
            soft_wrap=True,
        )
    timings["warm start evaluation"] = await measure(ROWS[1], 0)
    # the trainer's own base evaluation is the warm start's greedy one: GRPO's gain is measured from there
    trainer.base_eval = rows.evals[ROWS[1]]["greedy"]["test"]
    spent = time.perf_counter() - t0
    left = budget_s - spent - timings["warm start evaluation"] - ARENA_RESERVE_S
    steps_budget = max(left, MIN_GRPO_SHARE * budget_s)
    trainer.cfg = cfg.model_copy(update={"time_budget_s": steps_budget})
    console.print(
        f"GRPO: {steps_budget / 60:.1f} min for steps ({spent / 60:.1f} min spent, "
        f"{timings['warm start evaluation'] / 60:.1f} min kept for the last evaluation"
        + (
            f"; {(steps_budget - left) / 60:.1f} min short: GRPO still gets {MIN_GRPO_SHARE:.0%} of the budget, "
            "so the demo overruns it)"
            if left < steps_budget
            else ")"
        ),
        highlight=False,
        soft_wrap=True,
    )
    began = time.perf_counter()
    summary = await trainer.arun(resume=resume)
    timings["GRPO"] = time.perf_counter() - began
    if trainer.peft is None and is_main():  # the arena's and `demo --model RUN`'s GRPO policy
        trainer.model.save_pretrained(Path(cfg.run_dir) / FINAL_MODEL, safe_serialization=True)
        trainer.tokenizer.save_pretrained(Path(cfg.run_dir) / FINAL_MODEL)
    final, final_trajs = trainer.kept["trained"]
    rows.add(ROWS[2], "greedy", "test", final.model_copy(update={"tag": ROWS[2]}), final_trajs)
    began = time.perf_counter()
    await measure(ROWS[2], int(summary["steps"]), skip=("greedy", "test"))
    timings["warm start + GRPO evaluation"] = time.perf_counter() - began
    timings["total"] = time.perf_counter() - t0
    return summary, rows, timings


FINAL_MODEL = "model"
"""The GRPO policy's model directory in the run (``RUN/model``; under LoRA the run's newest checkpoint instead)."""
ARENA_DIR = "arena"
"""Where the demo's arena writes (``RUN/arena``: ``arena.json``, ``arena.html``, ``agents.yaml``)."""


def policy_specs(cfg: Any) -> list[Any]:
    """The arena's three contestants: the base model, the warm start's model directory and the GRPO run's newest
    checkpoint, each greedy with the demo's response prefix and new-token limit (``agents.yaml`` in the arena
    directory holds them: ``rubricgym arena`` replays them from scratch)."""
    g, run = cfg.generation, Path(cfg.run_dir)
    common = {"max_new_tokens": g.max_new_tokens, "response_prefix": g.response_prefix}
    warm = (
        CheckpointSpec(name=ARENA_NAMES[ROWS[1]], path=str(run / "warm_start" / "model"), **common)
        if cfg.warm_start is not None
        else LocalSpec(name=ARENA_NAMES[ROWS[1]], model=cfg.model.name, **common)
    )
    return [
        LocalSpec(name=ARENA_NAMES[ROWS[0]], model=cfg.model.name, **common),
        warm,
        CheckpointSpec(
            name=ARENA_NAMES[ROWS[2]], path=str(run / FINAL_MODEL if cfg.model.lora is None else run), **common
        ),
    ]


def arena_suite(trainer: Any, held: dict[str, list[Task]]) -> Suite:
    """The held-out tasks as a suite: a suite run's own suite, else one entry per held-out split of the env (the
    same tasks, checked, so the arena ranks the policies on what the table measured)."""
    cfg = trainer.cfg
    if cfg.env.suite is not None:
        return load_suite(cfg.env.suite)
    suite = Suite(
        name=f"demo-{cfg.env.id}",
        description="the family demo's held-out tasks",
        entries=[
            SuiteEntry(
                env=cfg.env.id,
                name=split,
                kwargs=cfg.env.kwargs,
                split=split,
                tasks=cfg.env.eval_tasks,
                seed=cfg.env.task_seed + 1,
            )
            for split in held
        ],
    )
    for split, tasks in held.items():
        if [t.id for t in suite.tasks(split)] != [t.id for t in tasks]:
            raise RuntimeError(f"the arena's {split} tasks are not the demo's held-out tasks (task generation changed)")
    return suite


async def run_policy_arena(trainer: Any, rows: ThreeRows, held: dict[str, list[Task]]) -> dict[str, Any]:
    """The arena (``arena.run_arena``, round robin, pairwise rubric judge in both orders, Bradley-Terry ratings)
    over the three policies on the held-out tasks. Each policy's greedy evaluation episodes are put in the arena's
    trajectory stores first, so the arena judges exactly the episodes the table scored instead of playing them
    again; a task missing there is played by the arena's own agent."""
    cfg = trainer.cfg
    out = Path(cfg.run_dir) / ARENA_DIR
    shutil.rmtree(out, ignore_errors=True)  # a rerun's policies are new: none of the old episodes may be judged
    suite = arena_suite(trainer, held)
    specs = policy_specs(cfg)
    entry_of: dict[str, str] = getattr(trainer, "entry_of", {})
    for row in ROWS:
        for split, trajs in rows.episodes.get(row, {}).items():
            by_entry: dict[str, list[Trajectory]] = {}
            for t in trajs:
                by_entry.setdefault(entry_of.get(t.task.id, split), []).append(t)
            for entry, mine in by_entry.items():
                TrajectoryStore(out / "trajectories" / ARENA_NAMES[row] / entry).extend(mine)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(
        out / "agents.yaml",
        yaml.safe_dump({"agents": [s.model_dump(mode="json", exclude_none=True) for s in specs]}, sort_keys=False),
    )
    return await run_arena(suite, specs, out, topology="round_robin", progress=False, source=str(out / "agents.yaml"))


def leaderboard_lines(report: dict[str, Any]) -> list[str]:
    """The arena's leaderboard: rank, agent name, Bradley-Terry rating (Elo scale) with its bootstrap CI, wins,
    losses and ties over the judged games."""
    out = [
        f"arena ({report['topology']}, judge: {report['judge_mode']}, {report['games']} games on the held-out tasks; "
        "Bradley-Terry rating, Elo scale, 95% bootstrap CI):"
    ]
    for k, a in enumerate(report["agents"], 1):
        out.append(
            f"  {k}. {a['name']:<17} {a['rating']:7.1f} [{a['ci'][0]:.1f}, {a['ci'][1]:.1f}]  "
            f"W {a['wins']} L {a['losses']} T {a['ties']}"
        )
    if report.get("unjudged"):
        out.append(f"  unjudged games: {report['unjudged']}")
    return out
