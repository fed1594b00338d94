"""GUI checks read typed step records: a renamed info key fails loudly, never reads as unmet (gui-v0's app steps
and a bring-your-own page's steps alike)."""

import asyncio

import pytest

from rubricgym.core.rollout import rollout
from rubricgym.core.steprecord import RecordError
from rubricgym.envs.gui.agents import FlightOracle, Oracle
from rubricgym.envs.gui.byo import WebTaskEnv
from rubricgym.envs.gui.checks import ALL
from rubricgym.envs.gui.env import GuiEnv


def test_a_renamed_app_step_key_is_an_error_not_an_unmet_check(pool):
    env = GuiEnv(templates=["notes.rename"], pool=pool)
    try:
        traj = asyncio.run(rollout(env, Oracle(), env.task_set(1, seed=3)[0], seed=3))
    finally:
        env.close()
    before = ALL["goal_progress"](traj)
    assert before.met and before.score == 1.0  # the unmodified oracle: every open goal reached

    broken = traj.model_copy(deep=True)
    first = broken.steps[0]
    first.info["progress_before"] = first.info.pop("prev_progress")
    with pytest.raises(RecordError, match=r"step 0, tool '\w+'.*'app\.prev_progress' is missing"):
        ALL["goal_progress"](broken)
    assert ALL["step_no_regress"](traj, 0).met
    with pytest.raises(RecordError, match=r"'app\.progress_before' is not part of the record"):
        ALL["step_no_regress"](broken, 0)


def test_a_renamed_page_step_key_is_an_error_not_an_unmet_check(pool):
    env = WebTaskEnv(pool=pool)
    try:
        traj = asyncio.run(rollout(env, FlightOracle(), env.task_set(1, seed=0)[0], seed=0))
    finally:
        env.close()
    assert ALL["ended"](traj).met  # the unmodified oracle's booking ended the episode on the page's word
    page = traj.steps[-1]

    broken = traj.model_copy(deep=True)
    step = broken.steps[page.index]
    step.info["over"] = step.info.pop("episode_over")
    with pytest.raises(RecordError, match=rf"step {page.index}, tool '\w+'.*'page\.episode_over' is missing"):
        ALL["ended"](broken)
