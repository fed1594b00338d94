"""From scored groups of trajectories to training samples with per-token advantages.

The glue between rewards and the pure estimators: reads each trajectory's rubric rewards (written by the
process reward model), masks rollouts whose verdicts errored, runs the chosen estimator per group, and spreads
the result onto the generated tokens (``samples.assign_advantages``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rubricgym.agents.local import Turn
from rubricgym.core.types import Trajectory
from rubricgym.trainers import advantages as adv
from rubricgym.trainers.config import AdvantageConfig
from rubricgym.trainers.samples import Sample, assign_advantages, build_samples
from rubricgym.trainers.tournament import TournamentResult, rank_advantages


@dataclass
class Estimate:
    samples: list[Sample]
    masked_rollouts: int = 0
    comparisons: int = 0
    per_rollout: list[float] = field(default_factory=list)


def reward_of(traj: Trajectory, key: str) -> float:
    """The scalar reward, or ``nan`` when any verdict failed (never 0 for an error)."""
    if traj.rewards.get(f"{key}/errors", 0.0) > 0 or key not in traj.rewards:
        return math.nan
    return float(traj.rewards[key])


def stage_scores(traj: Trajectory, key: str, stages: Sequence[str]) -> list[float]:
    if traj.rewards.get(f"{key}/errors", 0.0) > 0:
        return [math.nan] * len(stages)
    return [float(traj.rewards.get(f"{key}/stage/{s}", math.nan)) for s in stages]


def estimate(
    groups: Sequence[Sequence[Trajectory]],
    turns_for: Callable[[Trajectory], list[Turn]],
    stages: Sequence[str],
    cfg: AdvantageConfig,
    *,
    tournaments: Sequence[TournamentResult] | None = None,
    max_seq_len: int = 4096,
) -> Estimate:
    """Samples with advantages for every rollout of every group (``tournaments``: one result per group)."""
    stage_index = {s: i for i, s in enumerate(stages)}
    out = Estimate(samples=[])
    rollout = 0
    rewards = np.array([[reward_of(t, cfg.reward_key) for t in g] for g in groups], dtype=float)
    if cfg.estimator == "grpo":
        group_adv = adv.grpo_advantages(rewards, cfg.scale)
    elif cfg.estimator == "rloo":
        group_adv = adv.rloo_advantages(rewards)
    else:
        group_adv = None
    lam = np.asarray(cfg.stage_lambda, dtype=float) if cfg.stage_lambda is not None else None
    for g, group in enumerate(groups):
        stage_adv = step_adv = None
        rank_adv = None
        if cfg.estimator == "stage":
            scores = np.array([stage_scores(t, cfg.reward_key, stages) for t in group], dtype=float)
            stage_adv = adv.stage_advantages(scores, lam)
        elif cfg.estimator == "step":
            rows = [[float(s.rewards.get(cfg.reward_key, math.nan)) for s in t.steps] for t in group]
            step_adv = adv.step_advantages(rows, cfg.scale)
        elif cfg.estimator == "tournament":
            if tournaments is None:
                raise ValueError("the tournament estimator needs one TournamentResult per group")
            result = tournaments[g]
            out.comparisons += result.comparisons
            rank_adv = rank_advantages(result.ranks) if not result.errors else np.full(len(group), np.nan)
        for i, traj in enumerate(group):
            masked = not math.isfinite(rewards[g, i]) or (rank_adv is not None and not math.isfinite(rank_adv[i]))
            labels = [stage_index.get(s.stage, 0) for s in traj.steps]
            turns = turns_for(traj)
            labels += [labels[-1] if labels else 0] * (len(turns) - len(labels))
            for sample in build_samples(rollout, turns, labels):
                if masked:
                    sample.loss_mask = [0] * len(sample)
                    sample.advantages = [0.0] * len(sample)
                elif group_adv is not None:
                    assign_advantages(sample, rollout_advantage=float(group_adv[g, i]))
                elif rank_adv is not None:
                    assign_advantages(sample, rollout_advantage=float(rank_adv[i]))
                elif stage_adv is not None:
                    assign_advantages(sample, stage_advantages=stage_adv[i].tolist())
                else:
                    assign_advantages(sample, step_advantages=step_adv[i])  # type: ignore[index]
                out.samples.append(sample.truncate(max_seq_len))
            out.masked_rollouts += int(masked)
            out.per_rollout.append(float("nan") if masked else float(rewards[g, i]))
            rollout += 1
    return out
