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

from rubricgym.core.agent import SeededAgent, last_observation, tool_call
from rubricgym.core.registry import spec
from rubricgym.core.rollout import rollout
from rubricgym.core.types import Message, ToolSpec
from rubricgym.envs.gui.agents import RandomClicker, find_ref
from rubricgym.envs.gui.byo import WebTaskEnv, WebTaskSpec, register_web_tasks
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.shortcuts import run_battery, table_rows

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


def submit(env: WebTaskEnv, text: str | None, took_ms: int = 300) -> tuple[float, bool]:
    """Type ``text`` (``None``: the right word) and submit it ``took_ms`` after the task began by the page's clock,
    which stands still from the reset on: the answer's time is the test's, not the machine's (under load the real
    time of a reset and two steps passed the 0.5 s a 9.5 s-late answer had left)."""
    obs, _ = env.reset(seed=3)
    assert env.session is not None
    env.pool.run(env.session.evaluate(f"() => pauseClock({took_ms})"))
    word = re.search(r'Enter "(\w+)"', obs)
    assert word is not None
    obs, *_ = env.step(call("fill", ref=find_ref(obs, "textbox", "Text"), text=text or word[1]))
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
    reward, _ = submit(env, None, took_ms=300)  # on time: the page pays 1 - 0.3 / 10 = 0.97, not 1.0
    assert env.outcome.summary["page_reward"] == pytest.approx(0.97)
    assert reward == 1.0 and env.outcome.summary["success"] and total(env) >= 0.9
    reward, _ = submit(env, None, took_ms=9_500)  # correct but late: the page pays a little, it is still correct
    summary = env.outcome.summary
    assert summary["page_reward"] == pytest.approx(0.05) and summary["success"] and reward == 1.0
    assert total(env) >= 0.9
    reward, _ = submit(env, "wrongword", took_ms=9_500)
    assert reward == 0.0 and not env.outcome.summary["success"] and env.outcome.summary["page_reward"] == -1.0


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
    assert WebTaskSpec.load(SPEC).success == "() => WOB_RAW_REWARD >= 1"


class TypeTheWord(SeededAgent):
    """The text-entry page's oracle: types the word the instruction asks for and submits it."""

    name = "oracle"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        page = last_observation(messages)
        word = re.search(r'Enter "(\w+)"', page)
        if word is not None and "Filled" not in page:
            return tool_call("fill", ref=find_ref(page, "textbox", "Text") or "e1", text=word[1])
        return tool_call("click", ref=find_ref(page, "button", "Submit") or "e1")


@pytest.mark.filterwarnings("ignore:.*Overriding environment")
def test_a_registered_spec_has_its_own_agents_not_the_examples_oracle():
    plain = spec(register_web_tasks(SPEC).id).load()
    assert set(plain.agents()) == {"random"}
    own = spec(register_web_tasks(SPEC, agents={"oracle": f"{__name__}:TypeTheWord"}).id).load()
    assert own.agents()["oracle"] is TypeTheWord and issubclass(own, WebTaskEnv)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*Overriding environment")
def test_the_shortcut_battery_finds_nothing_on_a_minus_one_to_one_page(pool):
    env_id = register_web_tasks(SPEC, agents={"oracle": f"{__name__}:TypeTheWord"}).id
    report = asyncio.run(run_battery(env_id, n_tasks=3, env_kwargs={"pool": pool}))
    assert report.ok, (report.problems(), table_rows(report))
    assert report.oracle is not None and report.oracle.reward == 1.0
