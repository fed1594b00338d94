"""Rollouts as the trainer sees them: each trajectory with the exact tokens behind it and, once scored, its rubric
breakdown. Every step's data flows through these records; nothing is looked up elsewhere by task id and seed.
Where they are played (``play_groups``, the backends) is ``trainers/engine/sampling.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rubricgym.agents.local import Turn
from rubricgym.core.types import Trajectory
from rubricgym.rewards.prm import Breakdown, ScoredTrajectory


@dataclass
class Rollout:
    """One episode: the trajectory, the turns the policy generated in it, and the process reward model's
    breakdown once scored (``None`` before)."""

    trajectory: Trajectory
    turns: list[Turn]
    breakdown: Breakdown | None = None
    guidance: int = 0
    """The guidance level its prompt's hint came from (``trainers/algo/guidance.py``); 0: unguided."""


Group = list[Rollout]
"""The rollouts of one task that share a ``group_id``: the unit advantages are normalised over."""


def scored(rollouts: Sequence[Rollout]) -> list[ScoredTrajectory]:
    """The scored rollouts as the monitors and the rubric buffer read them (each trajectory with its breakdown)."""
    missing = [r.trajectory.id for r in rollouts if r.breakdown is None]
    if missing:
        raise ValueError(f"rollouts {missing[:3]} are not scored yet: score them before the monitors or the buffer")
    return [ScoredTrajectory(r.trajectory, r.breakdown) for r in rollouts if r.breakdown is not None]


def trajectories(groups: Sequence[Group]) -> list[list[Trajectory]]:
    return [[r.trajectory for r in g] for g in groups]


def flatten(groups: Sequence[Group]) -> list[Rollout]:
    return [r for g in groups for r in g]
