"""Training against a suite (``env: {suite: NAME}``): tasks drawn across entries, metrics per entry and overall.

``SuiteTrainer`` is the ``Trainer`` with its data, scoring and rollouts routed per entry:
- each step's task slots are assigned to entries by a ``SuiteSampler`` (suite weights, or SEC's bandit over
  mean |advantage| updated by TD(0), see ``rubricgym.arena.curriculum``); each entry streams its own training
  tasks (its env and kwargs, split ``train``, an epoch-shuffled order like the single-env trainer);
- rollouts of an entry's tasks run in that entry's env with its kwargs, all entries' groups in flight together;
- each trajectory is scored by its entry's rubric (and, for the tournament estimator, ranked by its entry's
  pairwise judge); advantages stay within a task's group. The stage estimator needs entries with equal stages;
- metrics: ``env/<entry>/reward|success|tasks`` and ``curriculum/<entry>/p|q|gain`` per step,
  ``curriculum.jsonl`` (the bandit's values, restored on resume), held-out evaluation on the suite's own tasks
  per entry (``kind: eval_env``) and overall, ``plots/per_env.png`` and per-entry lines in the summary.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from rubricgym.core.registry import spec
from rubricgym.core.safeio import append_lines, atomic_write
from rubricgym.core.types import Task
from rubricgym.rewards.judges import Judge
from rubricgym.suites.curriculum import SuiteSampler, mean_abs_advantage
from rubricgym.suites.suite import Suite, load_suite
from rubricgym.trainers.algo.advantages import grpo_advantages
from rubricgym.trainers.algo.estimate import reward_of
from rubricgym.trainers.algo.rollouts import Group
from rubricgym.trainers.config import TrainConfig
from rubricgym.trainers.engine.backends import LocalBackend, tool_limits
from rubricgym.trainers.entries import RewardEntry
from rubricgym.trainers.evaluation import EvalResult, gain_lines, paired_difference, paired_outcome_difference
from rubricgym.trainers.report import write_html
from rubricgym.trainers.step import unique_tasks
from rubricgym.trainers.trainer import Trainer

CURRICULUM_LOG = "curriculum.jsonl"


def _entry_tasks(suite: Suite, build: Any, what: str) -> dict[str, list[Task]]:
    """Tasks per entry; a task id in two entries would make routing ambiguous, so it is an error."""
    out: dict[str, list[Task]] = {}
    owner: dict[str, str] = {}
    for e in suite.entries:
        out[e.name] = list(build(e))
        for t in out[e.name]:
            if owner.setdefault(t.id, e.name) != e.name:
                raise ValueError(
                    f"suite {suite.name}: {what} task {t.id!r} is in entries {owner[t.id]!r} and "
                    f"{e.name!r}; give one of them another seed or kwargs"
                )
    return out


class SuiteTrainer(Trainer):
    """``Trainer`` over a suite's entries; see the module docstring."""

    def __init__(self, cfg: TrainConfig, *, console: Any = None):
        super().__init__(cfg, console=console)
        self.sampler = SuiteSampler(self.suite.weights, cfg.env.curriculum, seed=cfg.seed)
        self.backend = LocalBackend(self.policy, self.env_of, tool_limits(cfg))

    # ---- what the run trains on: each entry's tasks and reward parts -------------------------------------------

    def setup_tasks(self) -> None:
        cfg = self.cfg
        assert cfg.env.suite is not None
        self.suite = suite = load_suite(cfg.env.suite)
        self.entry_specs = {e.name: e for e in suite.entries}
        stage_sets = [tuple(spec(e.env).load().stages) for e in suite.entries]
        if cfg.advantage.estimator == "stage" and len(set(stage_sets)) > 1:
            raise ValueError(
                f"the stage estimator needs entries with the same stages; suite {suite.name} has "
                f"{sorted(set(stage_sets))}"
            )
        self.stages = list(dict.fromkeys(s for stages in stage_sets for s in stages)) or ["act"]
        seed = cfg.env.task_seed
        self.entry_train = _entry_tasks(
            suite, lambda e: unique_tasks(e.env, cfg.env.train_tasks, seed + e.seed, "train", e.kwargs), "training"
        )
        self.entry_eval = _entry_tasks(suite, lambda e: suite.tasks(e.name), "held-out")
        self.entry_of = {
            t.id: name for tasks in (self.entry_train, self.entry_eval) for name, ts in tasks.items() for t in ts
        }
        self.train_tasks = [t for ts in self.entry_train.values() for t in ts]  # type: ignore[assignment]
        self.eval_tasks = [t for ts in self.entry_eval.values() for t in ts]  # type: ignore[assignment]

    def reward_entries(self, judges: Sequence[Judge]) -> dict[str, RewardEntry]:
        """Per suite entry its rubric (the entry's own, else its env's default), pairwise judge, and later its
        monitor and rubric buffer (``entries/<name>/rubric_versions.jsonl``)."""
        return {
            e.name: self.reward_entry(e.name, e.env, e.load_rubric(self.suite.base_dir), judges)
            for e in self.suite.entries
        }

    def entry_tasks(self, name: str) -> list[Task]:
        return [*self.entry_train[name], *self.entry_eval[name]]

    def entry_for(self, task: Task) -> RewardEntry:
        return self.entries[self.entry_of[task.id]]

    def entry_dir(self, name: str) -> Path:
        return self.run_dir / "entries" / name

    # ---- data and rollouts ----------------------------------------------------------------------------------

    def tasks_at(self, cursor: int, n: int) -> list[Task]:
        """Slot k of the step at stream position ``cursor`` draws an entry, then that entry's next task (each
        entry's epoch is a seeded shuffle of its training tasks)."""
        out = []
        names = list(self.entry_specs)
        for k, name in enumerate(self.sampler.draw(cursor, n)):
            tasks = self.entry_train[name]
            epoch, i = divmod(cursor + k, len(tasks))
            order = np.random.default_rng([self.cfg.seed, epoch, names.index(name)]).permutation(len(tasks))
            out.append(tasks[int(order[i])])
        return out

    def env_of(self, task: Task) -> tuple[str, dict[str, Any]]:
        """A task is played in its entry's env with the entry's kwargs."""
        entry = self.entry_specs[self.entry_of[task.id]]
        return entry.env, entry.kwargs

    # ---- after the base step: per-entry metrics and the curriculum update ------------------------------------------

    async def after_step(self, step: int, groups: Sequence[Group]) -> dict[str, Any]:
        record = await super().after_step(step, groups)
        p = self.sampler.probabilities()  # what this step's tasks were drawn with
        rewards: dict[str, list[float]] = defaultdict(list)
        success: dict[str, list[float]] = defaultdict(list)
        advantages: dict[str, list[float]] = defaultdict(list)
        for group in groups:
            name = self.entry_of[group[0].trajectory.task.id]
            r = np.array([reward_of(x.breakdown) for x in group])
            a = grpo_advantages(r[None, :], self.cfg.advantage.scale)[0]
            advantages[name] += [float(x) for x, y in zip(a, r, strict=True) if math.isfinite(y)]
            rewards[name] += [float(x) for x in r if math.isfinite(x)]
            success[name] += [float(x.trajectory.outcome.reward) for x in group]
        gains = {name: mean_abs_advantage(advantages[name]) for name in advantages}
        q = self.sampler.update(gains)
        for name in self.entries:
            record[f"env/{name}/tasks"] = len(success.get(name, [])) // self.cfg.group_size
            record[f"env/{name}/reward"] = float(np.mean(rewards[name])) if rewards.get(name) else None
            record[f"env/{name}/success"] = float(np.mean(success[name])) if success.get(name) else None
            record[f"curriculum/{name}/p"] = p[name]
            record[f"curriculum/{name}/q"] = q[name]
            record[f"curriculum/{name}/gain"] = gains.get(name)
        append_lines(self.run_dir / CURRICULUM_LOG, (json.dumps({"step": step, "q": q}) + "\n").encode("utf-8"))
        return record

    def resume(self) -> bool:
        if not super().resume():
            return False
        path = self.run_dir / CURRICULUM_LOG
        lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
        at = [rec["q"] for rec in lines if rec["step"] == self.state.step]
        if at:
            self.sampler.load_state_dict(at[-1])
        return True

    def checked_envs(self) -> str:
        """The suite's envs, each once (``rubricgym check`` takes one at a time)."""
        return " / ".join(dict.fromkeys(e.env for e in self.suite.entries))

    # ---- evaluation per entry -----------------------------------------------------------------------------------

    def per_entry(self, result: EvalResult) -> dict[str, EvalResult]:
        """Split an overall held-out result into one per entry (same task order)."""
        out = {}
        for name in self.entries:
            idx = [k for k, tid in enumerate(result.task_ids) if self.entry_of.get(tid) == name]
            if idx:
                out[name] = EvalResult.of(
                    f"{result.tag}/{name}",
                    result.step,
                    [result.task_ids[k] for k in idx],
                    [result.rewards[k] for k in idx],
                    [result.success[k] for k in idx],
                )
        return out

    def _log_eval(self, result: EvalResult) -> None:
        super()._log_eval(result)
        for name, r in self.per_entry(result).items():
            self.metrics.write(
                {
                    "kind": "eval_env",
                    "step": result.step,
                    "tag": result.tag,
                    "entry": name,
                    "eval_mean": r.mean,
                    "eval_ci_low": r.ci[0],
                    "eval_ci_high": r.ci[1],
                    "eval_success": r.success_mean,
                }
            )

    def finish(self, final: EvalResult) -> dict[str, Any]:
        summary = super().finish(final)
        assert self.base_eval is not None
        base, trained = self.per_entry(self.base_eval), self.per_entry(final)
        lines, per_env = list(summary["lines"]), {}
        for name in self.entries:
            if name in base and name in trained:
                b, t = base[name], trained[name]
                diff, ci = paired_difference(t, b)
                odiff, oci = paired_outcome_difference(t, b)
                per_env[name] = {
                    "base": b.mean,
                    "trained": t.mean,
                    "gain": diff,
                    "gain_ci": list(ci),
                    "success_base": b.success_mean,
                    "success_trained": t.success_mean,
                    "success_gain": odiff,
                    "success_gain_ci": list(oci),
                    "weight": self.suite.weights[name],
                }
                gains = gain_lines(t, b, env=self.entry_specs[name].env, prefix="", levels=True)
                lines += [f"  {name}: {x}" for x in gains]
        records = self.metrics.read()
        plots = sorted((self.run_dir / "plots").glob("*.png")) if self.cfg.plots else []
        if self.cfg.plots:
            plots.append(per_env_plot(records, list(self.entries), self.run_dir / "plots" / "per_env.png"))
        write_html(self.run_dir, self.cfg.model_dump(mode="json"), records, sorted(set(plots)), lines)
        summary.update(lines=lines, per_env=per_env, suite=self.suite.name)
        atomic_write(self.run_dir / "summary.json", json.dumps(summary, indent=2, default=str))
        return summary


def per_env_plot(records: list[dict[str, Any]], entries: list[str], path: Path) -> Path:
    """Training reward per entry with held-out points, and the curriculum's draw probabilities."""
    matplotlib.use("Agg")  # files only
    steps = [r for r in records if r.get("kind") == "train"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.2), dpi=100)
    for name in entries:
        pts = [(r["step"], r[f"env/{name}/reward"]) for r in steps if r.get(f"env/{name}/reward") is not None]
        line = ax.plot(*zip(*pts, strict=True), marker=".", label=name) if pts else None
        ev = [
            (r["step"], r["eval_mean"])
            for r in records
            if r.get("kind") == "eval_env" and r["entry"] == name and r.get("eval_mean") is not None
        ]
        if ev:
            ax.plot(
                *zip(*ev, strict=True), "s--", color=line[0].get_color() if line else None, label=f"{name} held-out"
            )
        probs = [(r["step"], r[f"curriculum/{name}/p"]) for r in steps if f"curriculum/{name}/p" in r]
        if probs:
            bx.plot(*zip(*probs, strict=True), marker=".", label=name)
    ax.set_title("Rubric reward per entry")
    bx.set_title("Curriculum: P(entry)")
    for a in (ax, bx):
        a.set_xlabel("step")
        a.grid(alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def make_trainer(cfg: TrainConfig, *, console: Any = None) -> Trainer:
    """A ``SuiteTrainer`` when the config names a suite, else the single-env ``Trainer``."""
    return SuiteTrainer(cfg, console=console) if cfg.env.suite is not None else Trainer(cfg, console=console)
