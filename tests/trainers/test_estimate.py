"""From scored rollouts to per-token advantages: the estimators read the PRM's typed breakdowns."""

import math
from typing import get_args

import numpy as np
import pytest

from rubricgym.agents.local import Turn
from rubricgym.core.types import Action, Observation, Step, Task, Trajectory
from rubricgym.rewards.prm import Breakdown
from rubricgym.trainers.algo.advantages import grpo_advantages, stage_advantages
from rubricgym.trainers.algo.estimate import ESTIMATORS, estimate, reward_of
from rubricgym.trainers.algo.rollouts import Rollout
from rubricgym.trainers.config import AdvantageConfig, Estimator

STAGES = ["compute", "answer"]


def rollout(total, per_stage=None, errors=0, step_rewards=None):
    """A two-step rollout (stages compute, answer), one generated token per step, scored as given."""
    task = Task(id="t", env_id="toy-calculator-v0", prompt="2+2")
    steps = [
        Step(index=i, stage=s, action=Action(text=f"a{i}"), observation=Observation(messages=[]))
        for i, s in enumerate(STAGES)
    ]
    turns = [Turn([1, 2], [3], [-0.5], "a0"), Turn([1, 2, 3, 4], [5], [-0.7], "a1")]
    b = Breakdown(
        trajectory_id="x",
        task_id="t",
        env_id="toy-calculator-v0",
        agent="policy",
        rubric_id="r",
        rubric_version="1",
        rubric_hash="h",
        method="weighted_mean",
        total=total,
        per_stage=per_stage or {},
        step_rewards=step_rewards or [],
        n_errors=errors,
    )
    return Rollout(Trajectory(task=task, steps=steps), turns, b)


def generated(sample):
    return [a for a, m in zip(sample.advantages, sample.loss_mask, strict=True) if m]


def test_every_configurable_estimator_has_a_function():
    assert set(ESTIMATORS) == set(get_args(Estimator))


def test_grpo_masks_an_errored_rollout_and_never_scores_it_zero():
    group = [rollout(1.0), rollout(0.0), rollout(0.9, errors=1), rollout(0.5)]
    est = estimate([group], STAGES, AdvantageConfig(estimator="grpo"))
    assert est.masked_rollouts == 1 and math.isnan(est.per_rollout[2]) and est.per_rollout[0] == 1.0
    assert math.isnan(reward_of(group[2].breakdown))  # an error is not a zero
    expected = grpo_advantages(np.array([[1.0, 0.0, np.nan, 0.5]]))[0]
    by_rollout = {s.rollout: s for s in est.samples}
    assert by_rollout[2].loss_mask == [0] * len(by_rollout[2]) and generated(by_rollout[2]) == []
    for i in (0, 1, 3):
        assert generated(by_rollout[i]) == pytest.approx([expected[i]] * 2)


def test_the_stage_estimator_reads_the_breakdowns_per_stage_scores():
    scores = [{"compute": 1.0, "answer": 0.0}, {"compute": 0.0, "answer": 1.0}]
    group = [rollout(0.5, per_stage=s) for s in scores]
    est = estimate([group], STAGES, AdvantageConfig(estimator="stage"))
    table = stage_advantages(np.array([[s["compute"], s["answer"]] for s in scores]))
    for s in est.samples:  # the compute step's token gets the compute-stage advantage, the answer's the answer's
        assert generated(s) == pytest.approx(table[s.rollout].tolist())


def test_the_step_estimator_reads_the_breakdowns_step_rewards():
    group = [rollout(0.5, step_rewards=[1.0, None]), rollout(0.5, step_rewards=[0.0, 1.0])]
    est = estimate([group], STAGES, AdvantageConfig(estimator="step", scale="none"))
    mean = (1.0 + 0.0 + 1.0) / 3  # the missing step reward is left out of the baseline and gets 0
    by_rollout = {s.rollout: generated(s) for s in est.samples}
    assert by_rollout[0] == pytest.approx([1.0 - mean, 0.0]) and by_rollout[1] == pytest.approx([-mean, 1.0 - mean])


def test_generated_tokens_past_max_seq_len_are_counted_as_cut():
    # each rollout is [1, 2 | 3 | 4 | 5]: its second turn's token is the fifth, where an episode's answer would be
    group = [rollout(1.0), rollout(0.0)]
    est = estimate([group], STAGES, AdvantageConfig(estimator="grpo"), max_seq_len=4)
    assert est.cut_tokens == 2 and all(len(s) == 4 and sum(s.loss_mask) == 1 for s in est.samples)
    whole = estimate([group], STAGES, AdvantageConfig(estimator="grpo"), max_seq_len=5)
    assert whole.cut_tokens == 0 and all(sum(s.loss_mask) == 2 for s in whole.samples)
