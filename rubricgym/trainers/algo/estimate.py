"""From scored groups of rollouts to training samples with per-token advantages.

The glue between rewards and the pure estimators (``advantages.py``, ``tournament.py``): reads each rollout's
typed ``Breakdown`` from the process reward model, masks rollouts whose verdicts errored, runs the configured
estimator (``ESTIMATORS``, one function per name) and spreads each rollout's ``Credit`` onto the tokens it
generated (``samples.assign_advantages``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rubricgym.rewards.prm import Breakdown
from rubricgym.trainers.algo import advantages as adv
from rubricgym.trainers.algo.rollouts import Group, Rollout
from rubricgym.trainers.algo.samples import Sample, assign_advantages, build_samples
from rubricgym.trainers.algo.tournament import TournamentResult, rank_advantages
from rubricgym.trainers.config import AdvantageConfig, Estimator


@dataclass
class Estimate:
    samples: list[Sample]
    masked_rollouts: int = 0
    comparisons: int = 0
    cut_tokens: int = 0
    """Generated tokens past ``optim.max_seq_len``: cut off with their sequence, so they get no gradient."""
    per_rollout: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Credit:
    """One rollout's advantages at exactly one granularity: the whole rollout, per stage or per step."""

    rollout: float | None = None
    stage: list[float] | None = None
    step: list[float] | None = None

    @property
    def finite(self) -> bool:
        return self.rollout is None or math.isfinite(self.rollout)


@dataclass(frozen=True)
class Scored:
    """What an estimator sees: the groups, their scalar rewards (groups x G, NaN where masked), the env's stages,
    the config and, for the tournament estimator, one result per group."""

    groups: Sequence[Group]
    rewards: np.ndarray
    stages: Sequence[str]
    cfg: AdvantageConfig
    tournaments: Sequence[TournamentResult] | None


def reward_of(b: Breakdown | None) -> float:
    """The scalar reward, or ``nan`` when unscored or any verdict failed (never 0 for an error)."""
    return math.nan if b is None else b.reward


def stage_scores(b: Breakdown | None, stages: Sequence[str]) -> list[float]:
    """The breakdown's score per stage (``nan`` where a stage has none, or for an errored breakdown)."""
    if b is None or b.n_errors > 0:
        return [math.nan] * len(stages)
    return [float(b.per_stage.get(s, math.nan)) for s in stages]


def step_rewards(r: Rollout) -> list[float]:
    """The reward the process reward model put on each step of the trajectory (``nan`` where none)."""
    given = r.breakdown.step_rewards if r.breakdown is not None else []
    return [
        float(x) if i < len(given) and (x := given[i]) is not None else math.nan for i in range(len(r.trajectory.steps))
    ]


# ---- the estimators: scored groups -> one Credit per rollout, per group ------------------------------------------


def _per_rollout(table: np.ndarray) -> list[list[Credit]]:
    return [[Credit(rollout=float(a)) for a in row] for row in table]


def _grpo(s: Scored) -> list[list[Credit]]:
    return _per_rollout(adv.grpo_advantages(s.rewards, s.cfg.scale))


def _rloo(s: Scored) -> list[list[Credit]]:
    return _per_rollout(adv.rloo_advantages(s.rewards))


def _stage(s: Scored) -> list[list[Credit]]:
    lam = np.asarray(s.cfg.stage_lambda, dtype=float) if s.cfg.stage_lambda is not None else None
    out = []
    for group in s.groups:
        scores = np.array([stage_scores(r.breakdown, s.stages) for r in group], dtype=float)
        out.append([Credit(stage=row.tolist()) for row in adv.stage_advantages(scores, lam)])
    return out


def _step(s: Scored) -> list[list[Credit]]:
    return [
        [Credit(step=row) for row in adv.step_advantages([step_rewards(r) for r in g], s.cfg.scale)] for g in s.groups
    ]


def _tournament(s: Scored) -> list[list[Credit]]:
    if s.tournaments is None:
        raise ValueError("the tournament estimator needs one TournamentResult per group")
    out = []
    for group, result in zip(s.groups, s.tournaments, strict=True):
        ranks = rank_advantages(result.ranks) if not result.errors else np.full(len(group), np.nan)
        out.append([Credit(rollout=float(a)) for a in ranks])
    return out


ESTIMATORS: dict[Estimator, Callable[[Scored], list[list[Credit]]]] = {
    "grpo": _grpo,
    "rloo": _rloo,
    "stage": _stage,
    "step": _step,
    "tournament": _tournament,
}


# ---- credit onto tokens ------------------------------------------------------------------------------------------


def rollout_samples(
    index: int, r: Rollout, stage_index: dict[str, int], credit: Credit | None, plain_guided: bool = True
) -> list[Sample]:
    """The rollout's training sequences with ``credit`` spread on its tokens (``None``: masked, no loss); a guided
    rollout's are laid on its plain prompts (``plain_guided``) or on the hinted ones it was sampled from."""
    labels = [stage_index.get(s.stage, 0) for s in r.trajectory.steps]
    labels += [labels[-1] if labels else 0] * (len(r.turns) - len(labels))
    samples = build_samples(index, r.turns, labels, plain=plain_guided and r.guidance > 0)
    for sample in samples:
        if credit is None:
            sample.loss_mask = [0] * len(sample)
            sample.advantages = [0.0] * len(sample)
        else:
            assign_advantages(
                sample, rollout_advantage=credit.rollout, stage_advantages=credit.stage, step_advantages=credit.step
            )
    return samples


def estimate(
    groups: Sequence[Group],
    stages: Sequence[str],
    cfg: AdvantageConfig,
    *,
    tournaments: Sequence[TournamentResult] | None = None,
    max_seq_len: int = 4096,
    plain_guided: bool = True,
) -> Estimate:
    """Samples with advantages for every rollout of every scored group (``tournaments``: one result per group;
    ``plain_guided``: see ``rollout_samples``)."""
    rewards = np.array([[reward_of(r.breakdown) for r in g] for g in groups], dtype=float)
    credits = ESTIMATORS[cfg.estimator](Scored(groups, rewards, stages, cfg, tournaments))
    stage_index = {s: i for i, s in enumerate(stages)}
    out = Estimate(samples=[], comparisons=sum(t.comparisons for t in tournaments or []))
    index = 0
    for g, group in enumerate(groups):
        for i, r in enumerate(group):
            masked = not math.isfinite(rewards[g, i]) or not credits[g][i].finite
            samples = rollout_samples(index, r, stage_index, None if masked else credits[g][i], plain_guided)
            out.cut_tokens += sum(s.generated_past(max_seq_len) for s in samples)
            out.samples += [s.truncate(max_seq_len) for s in samples]
            out.masked_rollouts += int(masked)
            out.per_rollout.append(math.nan if masked else float(rewards[g, i]))
            index += 1
    return out
