"""The reward side of a training run, per entry: what scores an entry's rollouts and what watches them.

A single-env run has one entry (the env); a suite run has one per suite entry. Each ``RewardEntry`` holds
- its ``RewardPath``: every trajectory scored with the rubric ``choose_rubric`` picks (the task's own, else the
  entry's rubric, else the env default) by the run's one set of judges, as ``score``, ``eval`` and the arena do;
- its ``PairwiseJudge`` for the tournament estimator, its ``RubricBuffer`` (which evolves the entry rubric) and
  its hacking monitor. Both read typed breakdowns, and only of the rollouts the entry rubric scored: a task that
  brings its own rubric is not the buffer's to evolve, and its criteria are not the entry rubric's credit.

The trainer is built from these parts, so a suite gets monitors and buffers per entry with no special case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubricgym.core.registry import spec
from rubricgym.core.rubric import Rubric
from rubricgym.core.types import Task
from rubricgym.rewards.evolve import BufferConfig, RubricBuffer, build_buffer
from rubricgym.rewards.monitor import MonitorConfig
from rubricgym.rewards.pairwise import PairwiseJudge
from rubricgym.rewards.path import RewardPath
from rubricgym.trainers.algo.rollouts import Rollout, scored
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.monitors import RolloutMonitor, build_monitor


@dataclass
class RewardEntry:
    """One entry's reward path, pairwise judge, rubric buffer and hacking monitor (see the module docstring)."""

    name: str
    env_id: str
    path: RewardPath
    pairwise: PairwiseJudge | None = None
    buffer: RubricBuffer | None = None
    monitor: RolloutMonitor | None = None

    @property
    def rubric(self) -> Rubric:
        """The entry rubric now in use (the buffer's latest version when it evolves)."""
        assert self.path.entry is not None, "a training entry always has an entry rubric"
        return self.path.entry

    def require_judges(self, tasks: Sequence[Task]) -> None:
        self.path.require_judges(tasks)

    def attach(
        self, monitor: MonitorConfig | None, buffer: BufferConfig | None, policy: TrainingPolicy, record_dir: Path
    ) -> None:
        """Build the monitor (it scores the policy's own samples) and the rubric buffer (its versions recorded in
        ``record_dir``) once the policy has loaded."""
        self.monitor = build_monitor(monitor, lambda: self.rubric, policy)
        env_cls = spec(self.env_id).load()
        self.buffer = build_buffer(buffer, self.rubric, env_cls, record=record_dir / "rubric_versions.jsonl")

    async def after_step(self, step: int, groups: Sequence[Sequence[Rollout]]) -> dict[str, Any]:
        """Monitor signals of this entry's rollouts, then the buffer's update (which may evolve the rubric the next
        step scores with); returns the monitor's fields."""
        out: dict[str, Any] = {}
        if self.monitor is not None:
            out = await self.monitor.observe(step, [r for g in groups for r in g])
        evolved = await self.buffer.update(step, [scored(g) for g in groups]) if self.buffer is not None else None
        if evolved is not None:  # the buffer evolves only from rollouts the entry rubric scored
            self.path.set_entry(evolved)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "buffer": self.buffer.state_dict() if self.buffer is not None else None,
            "monitor": self.monitor.state_dict() if self.monitor is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.buffer is not None and state.get("buffer") is not None:
            self.buffer.load_state_dict(state["buffer"])
            self.path.set_entry(self.buffer.current)
        if self.monitor is not None and state.get("monitor") is not None:
            self.monitor.load_state_dict(state["monitor"])
