"""Reward integrity of the GUI envs (#22): private step info, final answers with no oracle before the end, and
shortcut agents (shotgun, wrong submit, escape) that earn nothing on the env reward or the default rubric."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from rubricgym.core.agent import Agent
from rubricgym.core.env import RubricEnv
from rubricgym.core.rollout import rollout
from rubricgym.envs.gui.agents import Escape, FlightOracle, Oracle, Shotgun, WrongSubmit, elements, find_ref
from rubricgym.envs.gui.byo import WebTaskEnv
from rubricgym.envs.gui.env import GuiEnv
from rubricgym.envs.gui.templates import TEMPLATES
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.leaks import audit_leaks
from rubricgym.rewards.prm import ProcessRewardModel

SHORTCUTS: dict[str, Callable[..., Agent]] = {"shotgun": Shotgun, "wrong_submit": WrongSubmit, "escape": Escape}
ANSWER_AND_DELETE = ["contacts.company", "contacts.phone", "shop.price", "notes.delete", "contacts.delete"]


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_yaml_quoted_snapshot_lines_are_elements():
    """A name with ': ' is YAML-quoted in the snapshot; the oracle missed such elements (mail.delete-1814545077)."""
    page = """- 'button "rosa@example.com Re: budget review 2024-05-18" [ref=e47] [cursor=pointer]':\n"""
    page += """  - 'link "It''s: here" [ref=e48]'\n  - button "Delete" [ref=e49]\n"""
    assert find_ref(page, "button", "~Re: budget review") == "e47"
    assert ("link", "It's: here", "e48") in elements(page)


def test_envs_declare_their_public_info_and_shortcut_agents():
    for cls in (GuiEnv, WebTaskEnv):
        assert {"tool", "screenshot_jpeg_b64", "escaped"} <= cls.public_info_keys
        assert not {"goals", "progress", "prev_progress", "page_reward", "unexpected"} & cls.public_info_keys
        assert set(cls.shortcuts()) == set(SHORTCUTS)
    assert "oracle" in WebTaskEnv.agents()


@pytest.mark.slow
def test_answers_are_final_and_their_reward_comes_only_at_the_end(pool):
    """Before the fix the answer step's reward said right (1.0) from wrong (0.0): an answer oracle."""
    env = GuiEnv(templates=["contacts.phone"], pool=pool)
    env.reset(seed=2)
    assert env._task is not None
    phone = env._task.hidden["goals"][0]["expected"]
    _, reward, _, _, info = env.step(call("answer", fields={"phone": "+1 555 000 0000"}))
    assert reward == 0.0 and set(info["details"]) == {"tool"}  # no goal rows, no progress
    assert env.steps[-1].info["goals"][0]["expected"] == phone  # ... which stay in the private record
    obs, reward, _, _, info = env.step(call("answer", fields={"phone": phone}))
    assert reward == 0.0 and "answers are final" in obs and info["tool_error"]
    _, reward, terminated, _, _ = env.step(call("done"))
    assert terminated and reward == 0.0 and not env.outcome.summary["success"]

    env.reset(seed=2)
    _, reward, *_ = env.step(call("answer", fields={"phone": phone}))
    assert reward == 0.0
    _, reward, *_ = env.step(call("done"))
    assert reward == 1.0 and env.outcome.summary["success"]
    env.close()


@pytest.mark.slow
def test_no_step_channel_shows_an_expected_value(pool):
    env = GuiEnv(templates=["contacts.company", "contacts.email", "shop.price"], pool=pool)
    for task in env.task_set(3, seed=4):
        env.reset(options={"task": task})
        secrets = [str(g["expected"]) for g in task.hidden["goals"] if len(str(g["expected"])) > 1]
        assert secrets
        for action in (call("scroll", direction="down"), call("answer", fields={"x": "y"})):
            _, _, _, _, info = env.step(action)
            seen = json.dumps(info["details"]) + json.dumps(env.state().model_dump(mode="json"))
            assert not [s for s in secrets if s in seen], (task.id, info)
    env.close()


OPEN_LEAKS = {
    "shop.cheapest": "the answer is one of the product names the shop's start page lists",
    "shop.price": "the shop's start page lists every product with its price",
    "calendar.when": "the calendar's start page shows the events with their dates and times",
    "mail.sender": "the inbox lists each email with its sender's address",
}
"""Templates whose answer is on the app's start page, so in the first observation (found by the audit below, #29):
each needs a start page that does not show it (the contact list had the same fault and now shows names only)."""


def _answer_tasks(templates: set[str] | None = None, exclude: set[str] = frozenset()) -> list:
    return [
        task
        for tid, tmpl in TEMPLATES.items()
        if (templates is None or tid in templates) and tid not in exclude
        for task in GuiEnv(templates=[tid]).task_set(1, seed=3, split=tmpl.split)
        if GuiEnv.secrets(task)
    ]


@pytest.mark.slow
def test_leak_audit_finds_no_answer_before_the_agent_acts(pool):
    """The leak audit over a task of every template with an answer to find, played by the wrong-submit probe (it
    answers wrong at once and stops, so no action of its own reveals the answer). Before the fix the contact list
    showed each contact's company beside the name: contacts.company's answer was in its first observation."""
    tasks = _answer_tasks(exclude=set(OPEN_LEAKS))
    assert "contacts.company" in {t.params["template"] for t in tasks} and len(tasks) >= 10
    report = asyncio.run(
        audit_leaks("gui-v0", agents={"wrong_submit": WrongSubmit}, tasks=tasks, env_kwargs={"pool": pool})
    )
    assert report.episodes == len(tasks) and report.secrets >= 5  # one-digit counts are too generic to scan for
    assert report.ok, report.line()


@pytest.mark.slow
@pytest.mark.parametrize("template", sorted(OPEN_LEAKS))
def test_open_leaks_are_still_open(pool, template):
    """Strict: when a start page stops showing the answer, this fails and the template leaves ``OPEN_LEAKS``."""
    report = asyncio.run(
        audit_leaks(
            "gui-v0", agents={"wrong_submit": WrongSubmit}, tasks=_answer_tasks({template}), env_kwargs={"pool": pool}
        )
    )
    assert [leak.channel for leak in report.leaks][:1] == ["first observation"], (template, OPEN_LEAKS[template])


async def _scores(env_factory: Callable[[], RubricEnv], agent: Agent, tasks) -> list[tuple[float, float]]:
    """(env reward, default-rubric total) of ``agent`` on each task, scored as the gaming audit scores."""
    out = []
    for i, task in enumerate(tasks):
        env = env_factory()
        try:
            traj = await rollout(env, agent, task, seed=i)
        finally:
            env.close()
        breakdown = await ProcessRewardModel(type(env).default_rubric(), [CheckJudge()]).score(traj)
        assert breakdown.total is not None
        out.append((traj.outcome.reward, breakdown.total))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["gui", "web"])
def test_shortcut_agents_earn_nothing_while_the_oracle_earns_everything(pool, kind):
    """Before the fix the shotgun totalled 0.574, a wrong booking 0.673 and escapes up to 1.0 env reward."""
    if kind == "gui":

        def make() -> RubricEnv:
            return GuiEnv(templates=ANSWER_AND_DELETE, pool=pool)

        oracle: Agent = Oracle()
    else:

        def make() -> RubricEnv:
            return WebTaskEnv(pool=pool)

        oracle = FlightOracle()
    tasks = make().task_set(4, seed=0, split="train")
    good = asyncio.run(_scores(make, oracle, tasks))
    assert min(total for _, total in good) >= 0.9 and min(r for r, _ in good) == 1.0, good
    for name, factory in SHORTCUTS.items():
        scores = asyncio.run(_scores(make, factory(seed=0), tasks))
        assert max(r for r, _ in scores) <= 0.05 and max(t for _, t in scores) <= 0.05, (name, scores)


@pytest.mark.slow
def test_doing_every_candidate_action_is_no_success(pool):
    """Deleting every contact makes "contact X is absent" hold: before the fix that was success, reward 1.0 and a
    rubric total of 0.99."""
    env = GuiEnv(templates=["contacts.delete"], pool=pool, max_steps=40)
    obs, _ = env.reset(seed=0)
    while rows := [ref for role, name, ref in elements(obs) if role == "button" and name != "Add contact"]:
        obs, *_ = env.step(call("click", ref=rows[0]))  # a contact's card
        obs, *_ = env.step(call("click", ref=find_ref(obs, "button", "Delete contact")))
    assert "No contacts" in obs  # every contact is gone, the one the task names too
    _, reward, *_ = env.step(call("done"))
    summary = env.outcome.summary
    assert reward == 0.0 and not summary["success"] and summary["progress"] == 1.0 and summary["side_effects"]
    breakdown = asyncio.run(ProcessRewardModel(GuiEnv.default_rubric(), [CheckJudge()]).score(env.trajectory()))
    assert breakdown.total is not None and breakdown.total <= 0.05
    env.close()
