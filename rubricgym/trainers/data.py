"""What a run trains on: its entries, each entry's training and held-out tasks, which env plays a task, and the
stream of tasks the steps draw. A single env (``env: {id: ...}``) is a one-entry suite; a suite
(``env: {suite: NAME}``) has one entry per suite entry.

- An entry is an env with its kwargs, the rubric its rollouts are scored with (the suite entry's own, else
  ``env.rubric`` for a single env, else the env's default) and its weight. A task id belongs to one entry: the
  same task in two entries would make routing ambiguous, so it is an error.
- Training tasks: ``env.train_tasks`` generated tasks of split ``train`` per entry (seed ``env.task_seed``, plus
  the suite entry's own seed). Held-out tasks: ``env.eval_tasks`` of split ``test`` for a single env, the suite's
  own held-out tasks per entry for a suite.
- The stream: slot k of the step at data cursor ``c`` draws an entry (a suite's ``SuiteSampler``: its weights, or
  SEC's bandit over mean |advantage| updated by TD(0), ``rubricgym.suites.curriculum``; a single env has one),
  then that entry's next task; each entry's epoch is a seeded shuffle of its training tasks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rubricgym.core.registry import make, spec
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Task
from rubricgym.rewards.rubric import Rubric, load_rubric
from rubricgym.suites.curriculum import SuiteSampler, mean_abs_advantage
from rubricgym.suites.suite import Suite, load_suite
from rubricgym.trainers.algo.advantages import Scale, grpo_advantages
from rubricgym.trainers.algo.estimate import reward_of
from rubricgym.trainers.algo.rollouts import Group
from rubricgym.trainers.config import TrainConfig
from rubricgym.trainers.evaluation import EvalResult

CURRICULUM_LOG = "curriculum.jsonl"
"""A suite run's curriculum values per step (restored on resume)."""


def unique_tasks(env_id: str, n: int, seed: int, split: str, env_kwargs: dict[str, Any]) -> TaskSet:
    """``n`` generated tasks of ``split`` without repeats (small task spaces repeat problems)."""
    seen: dict[str, Task] = {}
    for t in make(env_id, **env_kwargs).task_set(n, seed=seed, split=split):
        seen.setdefault(t.id, t)
    return TaskSet(seen.values(), source=f"{env_id}(seed={seed}, split={split})")


@dataclass
class Entry:
    """One env of the run: the run's env, or one suite entry."""

    name: str
    env: str
    kwargs: dict[str, Any]
    rubric: Rubric
    weight: float
    train: Sequence[Task]
    held_out: Sequence[Task]
    stages: tuple[str, ...]


def _owners(entries: Sequence[Entry], split: str, what: str) -> dict[str, str]:
    """Task id -> entry name over ``split`` ("train" or "held_out"); a task id in two entries is an error."""
    owner: dict[str, str] = {}
    for e in entries:
        for t in getattr(e, split):
            if owner.setdefault(t.id, e.name) != e.name:
                raise ValueError(
                    f"{what} task {t.id!r} is in entries {owner[t.id]!r} and {e.name!r}; give one of them another "
                    "seed or kwargs"
                )
    return owner


class TrainingData:
    """The entries of a run built from ``cfg.env`` (see the module docstring); ``suite`` is the suite or ``None``,
    ``sampler`` the suite's curriculum (``None`` for a single env)."""

    def __init__(self, cfg: TrainConfig):
        self.seed = cfg.seed
        e = cfg.env
        self.suite: Suite | None = None
        self.sampler: SuiteSampler | None = None
        if e.suite is None:
            env_cls = spec(e.id).load()
            rubric = load_rubric(e.rubric if e.rubric is not None else env_cls.default_rubric())
            train = unique_tasks(e.id, e.train_tasks, e.task_seed, "train", e.kwargs)
            held_out = unique_tasks(e.id, e.eval_tasks, e.task_seed + 1, "test", e.kwargs)
            entries = [Entry(e.id, e.id, e.kwargs, rubric, 1.0, train, held_out, tuple(env_cls.stages))]
        else:
            self.suite = suite = load_suite(e.suite)
            entries = [
                Entry(
                    s.name,
                    s.env,
                    s.kwargs,
                    s.load_rubric(suite.base_dir),
                    suite.weights[s.name],
                    unique_tasks(s.env, e.train_tasks, e.task_seed + s.seed, "train", s.kwargs),
                    suite.tasks(s.name),
                    tuple(spec(s.env).load().stages),
                )
                for s in suite.entries
            ]
            self.sampler = SuiteSampler(suite.weights, e.curriculum, seed=cfg.seed)
        self.entries = {x.name: x for x in entries}
        stage_sets = {x.stages for x in entries}
        if cfg.advantage.estimator == "stage" and len(stage_sets) > 1 and self.suite is not None:
            raise ValueError(
                f"the stage estimator needs entries with the same stages; suite {self.suite.name} has "
                f"{sorted(stage_sets)}"
            )
        self.stages = list(dict.fromkeys(s for x in entries for s in x.stages)) or ["act"]
        try:
            owners = _owners(entries, "train", "training")
            self.entry_of = {**owners, **_owners(entries, "held_out", "held-out")}
        except ValueError as err:
            raise ValueError(f"suite {self.suite.name if self.suite else e.id}: {err}") from None
        self.train_tasks = [t for x in entries for t in x.train]
        self.eval_tasks = [t for x in entries for t in x.held_out]

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    def entry_name(self, task: Task) -> str:
        """The entry ``task`` belongs to (a single env's run plays every task in its env)."""
        name = self.entry_of.get(task.id)
        if name is None:
            if len(self.entries) == 1:
                return next(iter(self.entries))
            raise KeyError(f"task {task.id!r} is in none of the suite's entries {self.names}: it has no env to play in")
        return name

    def env_of(self, task: Task) -> tuple[str, dict[str, Any]]:
        """The env id and keyword arguments ``task`` is played in: its entry's."""
        entry = self.entries[self.entry_name(task)]
        return entry.env, entry.kwargs

    def tasks_at(self, cursor: int, n: int) -> list[Task]:
        """Tasks of slots ``cursor .. cursor+n-1`` of the endless stream (see the module docstring)."""
        names = self.names
        drawn = self.sampler.draw(cursor, n) if self.sampler is not None else [names[0]] * n
        out = []
        for k, name in enumerate(drawn):
            tasks = self.entries[name].train
            epoch, i = divmod(cursor + k, len(tasks))
            key = [self.seed, epoch] if self.suite is None else [self.seed, epoch, names.index(name)]
            out.append(tasks[int(np.random.default_rng(key).permutation(len(tasks))[i])])
        return out

    def per_entry(self, result: EvalResult) -> dict[str, EvalResult]:
        """An overall held-out result split into one per entry (same task order)."""
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

    def curriculum_step(self, groups: Sequence[Group], scale: Scale, group_size: int) -> dict[str, Any]:
        """A suite's fields of a step's record (``env/<entry>/reward|success|tasks`` and
        ``curriculum/<entry>/p|q|gain``), after updating its curriculum with the step's mean |advantage| per
        entry; empty for a single env."""
        if self.sampler is None:
            return {}
        p = self.sampler.probabilities()  # what this step's tasks were drawn with
        rewards: dict[str, list[float]] = defaultdict(list)
        success: dict[str, list[float]] = defaultdict(list)
        advantages: dict[str, list[float]] = defaultdict(list)
        for group in groups:
            name = self.entry_name(group[0].trajectory.task)
            r = np.array([reward_of(x.breakdown) for x in group])
            a = grpo_advantages(r[None, :], scale)[0]
            advantages[name] += [float(x) for x, y in zip(a, r, strict=True) if math.isfinite(y)]
            rewards[name] += [float(x) for x in r if math.isfinite(x)]
            success[name] += [float(x.trajectory.outcome.reward) for x in group]
        gains = {name: mean_abs_advantage(advantages[name]) for name in advantages}
        q = self.sampler.update(gains)
        record: dict[str, Any] = {}
        for name in self.entries:
            record[f"env/{name}/tasks"] = len(success.get(name, [])) // group_size
            record[f"env/{name}/reward"] = float(np.mean(rewards[name])) if rewards.get(name) else None
            record[f"env/{name}/success"] = float(np.mean(success[name])) if success.get(name) else None
            record[f"curriculum/{name}/p"] = p[name]
            record[f"curriculum/{name}/q"] = q[name]
            record[f"curriculum/{name}/gain"] = gains.get(name)
        return record
