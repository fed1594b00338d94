"""Bring-your-own pages that score themselves from -1 to 1 with a time-scaled reward (MiniWoB++ style, #22 item 11):
a -1 is a failure the default rubric does not pay, success is its own field, and a random agent earns nothing.

Before the fix, on ``miniwob_text/`` (measured): a -1 episode totalled 0.673, a random agent 0.490 on average, and
correct answers were failures because their time-scaled reward (0.97, or 0.03 late) missed the 1.0 threshold.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from rubricgym.core.rollout import rollout
from rubricgym.envs.gui.agents import RandomClicker, find_ref
from rubricgym.envs.gui.byo import WebTaskEnv, WebTaskSpec
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.prm import ProcessRewardModel

SPEC = Path(__file__).with_name("miniwob_text") / "spec.yaml"


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def total(env: WebTaskEnv) -> float:
    breakdown = asyncio.run(
        ProcessRewardModel(env.default_rubric(), [CheckJudge(WebTaskEnv.checks())]).score(env.trajectory())
    )
    assert breakdown.total is not None
    return breakdown.total


@pytest.fixture
def env(pool):
    e = WebTaskEnv(SPEC, pool=pool)
    yield e
    e.close()


def submit(env: WebTaskEnv, text: str | None, late_ms: int = 0) -> tuple[float, bool]:
    """Type ``text`` (``None``: the right word) and submit, ``late_ms`` later than it really is."""
    obs, _ = env.reset(seed=3)
    word = re.search(r'Enter "(\w+)"', obs)
    assert word is not None
    obs, *_ = env.step(call("fill", ref=find_ref(obs, "textbox", "Text"), text=text or word[1]))
    if late_ms:
        assert env.session is not None
        env.pool.run(env.session.evaluate(f"() => advanceClock({late_ms})"))
    _, reward, terminated, _, _ = env.step(call("click", ref=find_ref(obs, "button", "Submit")))
    return reward, terminated


@pytest.mark.slow
def test_a_page_scored_minus_one_is_a_failure_the_rubric_does_not_pay(env):
    reward, terminated = submit(env, "wrongword")
    summary = env.outcome.summary
    assert terminated and reward == 0.0 and summary["page_reward"] == -1.0
    assert not summary["success"] and summary["false_completion"] and total(env) <= 0.05


@pytest.mark.slow
def test_success_is_its_own_field_not_a_threshold_on_a_time_scaled_reward(env):
    reward, _ = submit(env, None)
    assert reward == 1.0 and env.outcome.summary["success"] and total(env) >= 0.9
    reward, _ = submit(env, None, late_ms=9_500)  # correct but late: the page pays a little, it is still correct
    summary = env.outcome.summary
    assert 0.0 < summary["page_reward"] < 0.1 and summary["success"] and reward == 1.0 and total(env) >= 0.9
    reward, _ = submit(env, "wrongword", late_ms=9_500)
    assert reward == 0.0 and not env.outcome.summary["success"]


@pytest.mark.slow
def test_the_page_ending_the_episode_on_its_clock_is_not_a_finish_in_time(env):
    obs, _ = env.reset(seed=3)
    assert env.session is not None
    env.pool.run(env.session.evaluate("() => advanceClock(11_000)"))
    _, reward, terminated, _, _ = env.step(call("fill", ref=find_ref(obs, "textbox", "Text"), text="x"))
    breakdown = asyncio.run(
        ProcessRewardModel(env.default_rubric(), [CheckJudge(WebTaskEnv.checks())]).score(env.trajectory())
    )
    assert terminated and reward == 0.0 and breakdown.per_criterion.get("finished_in_time") == 0.0
    assert breakdown.total is not None and breakdown.total <= 0.05


@pytest.mark.slow
def test_a_random_agent_earns_nothing(pool):
    env = WebTaskEnv(SPEC, pool=pool)
    tasks = env.task_set(12, seed=0)
    env.close()
    prm = ProcessRewardModel(WebTaskEnv.default_rubric(), [CheckJudge(WebTaskEnv.checks())])

    async def play() -> list[tuple[float, float]]:
        out = []
        for i, task in enumerate(tasks):
            e = WebTaskEnv(SPEC, pool=pool)
            try:
                traj = await rollout(e, RandomClicker(), task, seed=i)
            finally:
                e.close()
            breakdown = await prm.score(traj)
            assert breakdown.total is not None
            out.append((traj.outcome.reward, breakdown.total))
        return out

    scores = asyncio.run(play())
    assert sum(r for r, _ in scores) / len(scores) <= 0.05
    assert sum(t for _, t in scores) / len(scores) <= 0.1


def test_the_spec_says_what_success_is():
    assert WebTaskSpec.load(SPEC).success == "() => WOB_RAW_REWARD > 0"
