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
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets
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


def _answer_tasks(n: int = 1) -> list:
    """``n`` tasks of every template with an answer to find (one the instruction does not state)."""
    return [
        task
        for tid, tmpl in TEMPLATES.items()
        for task in GuiEnv(templates=[tid]).task_set(n, seed=3, split=tmpl.split)
        if GuiEnv.secrets(task)
    ]


def test_a_price_is_scanned_for_as_the_shop_shows_it():
    """A price of 22.5 is not in "$22.50" word by word: the audit missed the price on the shop's start page in one
    of eight shop.price tasks until ``GuiEnv.secrets`` gave the two-decimal form too."""
    tasks = GuiEnv(templates=["shop.price"]).task_set(16, seed=3)
    prices = [task.hidden["goals"][0]["expected"] for task in tasks]
    assert any(f"{p:.2f}" != str(p) and not f"{p:.2f}".endswith(".00") for p in prices)  # a 19.5 among them
    for task, price in zip(tasks, prices, strict=True):
        assert Scanner(make_secrets(GuiEnv.secrets(task))).find(f"Desk lamp ${price:.2f} · 4 in stock"), task.id


@pytest.mark.slow
def test_leak_audit_finds_no_answer_before_the_agent_acts(pool):
    """The leak audit over a task of every template with an answer to find, played by the wrong-submit probe (it
    answers wrong at once and stops, so no action of its own reveals the answer). Before the fixes five start
    pages showed their answer in the first observation: the contact list each contact's company (contacts.company),
    the shop every product with its price (shop.price, shop.cheapest), the agenda every event's date and time
    (calendar.when) and the inbox every sender's address (mail.sender)."""
    tasks = _answer_tasks()
    fixed = {"contacts.company", "shop.price", "shop.cheapest", "calendar.when", "mail.sender"}
    assert fixed <= {t.params["template"] for t in tasks} and len(tasks) >= 14
    report = asyncio.run(
        audit_leaks("gui-v0", agents={"wrong_submit": WrongSubmit}, tasks=tasks, env_kwargs={"pool": pool})
    )
    assert report.episodes == len(tasks) and report.secrets >= 10  # one-digit counts are too generic to scan for
    assert report.ok, report.line()


@pytest.mark.slow
def test_each_answer_is_on_a_page_the_plan_opens_and_never_on_the_start_page(pool):
    """Three tasks of every answer template: the start page holds none of the answer, and the page the oracle's
    plan has reached when it answers (after opening the item, a search or a category) holds all of it, so an
    agent that reads pages can find it by actions a rubric step can credit (the oracle itself answers from its
    plan, not from the page, so its success alone would not show this)."""
    env = GuiEnv(pool=pool)
    checked = set()
    for task in _answer_tasks(3):
        scanner = Scanner(make_secrets(GuiEnv.secrets(task)))
        if not scanner.secrets:  # a one-digit count: too generic to scan for
            continue
        obs, _ = env.reset(options={"task": task})
        assert not scanner.find(obs), (task.id, [s.value for s in scanner.find(obs)])
        plan = task.hidden["plan"]
        for step in plan[: [s["tool"] for s in plan].index("answer")]:
            ref = find_ref(obs, step["role"], step["name"])
            assert ref is not None, (task.id, step)
            args = {k: v for k, v in step.items() if k not in ("tool", "role", "name")}
            obs, *_ = env.step(call(step["tool"], ref=ref, **args))
        assert {s.path for s in scanner.find(obs)} == {s.path for s in scanner.secrets}, (task.id, obs)
        checked.add(task.params["template"])
    env.close()
    assert {"shop.price", "shop.cheapest", "calendar.when", "mail.sender", "contacts.company"} <= checked


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
