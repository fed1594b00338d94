"""Every registered env's default rubric is a valid Rubric, and the deep-search one ranks evidence over luck."""

import asyncio

import pytest

import rubricgym
from rubricgym.rewards import CheckJudge, ProcessRewardModel, Rubric


@pytest.mark.parametrize("env_id", [s.id for s in rubricgym.list_envs()])
def test_default_rubric_validates_and_names_existing_checks(env_id):
    cls = rubricgym.spec(env_id).load()
    rubric = cls.default_rubric()
    assert isinstance(rubric, Rubric)
    assert rubric.referenced_checks() <= set(cls.checks())  # checks named by criteria and by applies_if


def test_deepsearch_default_rubric_carr_chain_from_env_check():
    cls = rubricgym.spec("deepsearch-v0").load()
    prm = ProcessRewardModel(cls.default_rubric(), [CheckJudge()])
    tasks = rubricgym.TaskSet.generate("deepsearch-v0", 3, seed=0)
    totals = {}
    for name in ("oracle", "shortcut-lucky"):
        trajs = asyncio.run(rubricgym.rollout_many("deepsearch-v0", cls.agents()[name](), tasks, progress=False))
        breakdowns = [asyncio.run(prm.score(t)) for t in trajs.trajectories]
        assert all(b.valid for b in breakdowns)
        totals[name] = [b.total for b in breakdowns]
    # the lucky shortcut answers right but cites nothing it read: C-GRPO gives (1 - alpha) * 1 + alpha * 0
    assert totals["oracle"] == [1.0] * 3 and totals["shortcut-lucky"] == pytest.approx([0.7] * 3)
