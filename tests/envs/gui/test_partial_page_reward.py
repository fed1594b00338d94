"""A MiniWoB++ page's success is its own full reward, not any positive one (#39).

``click-checkboxes`` pays ``(right - wrong) / n`` of its ``n`` boxes: one box left unticked of three pays 0.33 (of
five 0.6). Before the fix the env counted a raw reward above 0 as success, so this partly wrong submission was an
episode reward of 1.0 and a default-rubric total of ~0.96; now it is partial credit within the failed band.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from rubricgym.core.rollout import rollout
from rubricgym.envs.gui import miniwob
from rubricgym.envs.gui.agents import Oracle, PartialOracle
from rubricgym.envs.gui.byo import WebTaskEnv, WebTaskSpec
from rubricgym.envs.gui.env import GuiEnv
from rubricgym.envs.gui.miniwob_agents import ClickCheckboxes, ClickCheckboxesOneMissing
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.prm import ProcessRewardModel

if miniwob.html_root() is None:
    pytest.skip(f"the miniwob package is not installed ({miniwob.INSTALL})", allow_module_level=True)

PAGE = "click-checkboxes"
TEXT_SPEC = Path(__file__).with_name("miniwob_text") / "spec.yaml"


@pytest.mark.slow
def test_one_checkbox_missing_is_partial_credit_never_success(pool):
    cls = miniwob.page_class(PAGE)
    env = cls(pool=pool)
    tasks = env.task_set(12, seed=0, split="test")
    env.close()
    prm = ProcessRewardModel(cls.default_rubric(), [CheckJudge(cls.checks())])

    async def play(agent_cls: type, task) -> tuple[float, dict, float]:
        e = cls(pool=pool)
        try:
            traj = await rollout(e, agent_cls(seed=0), task, seed=0)
        finally:
            e.close()
        breakdown = await prm.score(traj)
        assert breakdown.total is not None
        return traj.outcome.reward, traj.outcome.summary, breakdown.total

    partial = []
    for task in tasks:
        reward, summary, total = asyncio.run(play(ClickCheckboxesOneMissing, task))
        if summary["page_reward"] > 0:  # at least two boxes to tick of three or more: the page pays a fraction
            partial.append((task, reward, summary, total))
        if len(partial) == 2:
            break
    assert len(partial) == 2, "no seed of 12 asks for two boxes among three or more"
    for task, reward, summary, total in partial:
        assert 0 < summary["page_reward"] < 1  # the page's own partial reward (time-scaled, below the raw one)
        assert reward == 0.0 and not summary["success"]
        assert 0 < summary["progress"] < 1  # the page's raw fraction is progress: partial credit ...
        assert 0 < total <= 0.04  # ... within the failed band of the outcome gate (1 - gamma)
        o_reward, o_summary, o_total = asyncio.run(play(ClickCheckboxes, task))
        assert o_reward == 1.0 and o_summary["success"] and o_total >= 0.96 > total


def test_a_spec_gives_goals_or_its_own_progress_not_both():
    spec = WebTaskSpec.load(TEXT_SPEC).model_dump()
    with pytest.raises(ValidationError, match="not both"):
        WebTaskSpec.model_validate({**spec, "progress": "() => 0.5", "goals": [{"field": "text", "expected": "x"}]})
    with pytest.raises(ValidationError, match="greater than 0"):  # a reward of 0 (doing nothing) is no success
        WebTaskSpec.model_validate({**spec, "success": None, "success_threshold": 0})


@pytest.mark.slow
def test_a_progress_function_that_returns_no_number_says_what_to_return(pool):
    spec = WebTaskSpec.load(TEXT_SPEC).model_copy(update={"progress": "() => 'half'"})
    env = WebTaskEnv(spec, pool=pool)
    try:
        env.reset(seed=3)
        with pytest.raises(ValueError, match=r"return a number in \[0, 1\]"):
            env.step('<tool_call>{"name": "fill", "arguments": {"ref": "e1", "text": "x"}}</tool_call>')
    finally:
        env.close()


@pytest.mark.slow
def test_gui_partial_work_is_never_a_success(pool):
    """gui-v0's ``partial`` outcome agent (the oracle's plan with one field wrong or its last click left out)."""
    tasks = GuiEnv(pool=pool).task_set(3, seed=0, split="test")
    prm = ProcessRewardModel(GuiEnv.default_rubric(), [CheckJudge(GuiEnv.checks())])
    assert set(GuiEnv.outcome_agents) == {"partial", "failed"}

    async def play(agent_cls: type, task) -> tuple[float, float]:
        e = GuiEnv(pool=pool)
        try:
            traj = await rollout(e, agent_cls(seed=0), task, seed=0)
        finally:
            e.close()
        breakdown = await prm.score(traj)
        assert breakdown.total is not None
        return traj.outcome.reward, breakdown.total

    for task in tasks:
        partial, oracle = asyncio.run(play(PartialOracle, task)), asyncio.run(play(Oracle, task))
        assert partial[0] == 0.0 and partial[1] <= 0.04 < 0.96 <= oracle[1] and oracle[0] == 1.0
