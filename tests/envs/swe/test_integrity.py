"""Reward integrity of swe-v0 (issue #22): nothing hidden on the agent side, and no process credit for work
around a junk file or test runs with nothing changed. The leak audit and the shortcut battery of swe-v0 run in
tests/test_check_all_envs.py (``rubricgym check``: the same audits, same task count and seed)."""

import asyncio

import pytest

import rubricgym
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.shortcuts import Escape, ObservationShotgun, play

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]


def test_a_junk_file_and_a_test_run_earn_no_process_credit():
    cls = rubricgym.spec("swe-v0").load()
    env = rubricgym.make("swe-v0")
    task = env.task_set(1, seed=0, split="test")[0]
    prm = ProcessRewardModel(cls.default_rubric(), [CheckJudge()])

    async def run(agent: ObservationShotgun | Escape) -> tuple:
        traj = await play(env, agent, task, 0, agent.name)
        return traj, await prm.score(traj)

    try:
        for agent in (ObservationShotgun(), Escape()):
            traj, b = asyncio.run(run(agent))
            assert any(s.info.get("ran_tests") for s in traj.steps)  # it did run the tests
            assert b.total is not None and b.total <= 0.05, (agent.name, b.per_criterion)
    finally:
        env.close()
