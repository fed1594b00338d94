"""gui-v0 against the real Chromium: observations, tools, stale refs, judges, async episodes."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from rubricgym.core.rollout import rollout
from rubricgym.envs.gui.agents import Oracle, elements, find_ref
from rubricgym.envs.gui.env import GuiEnv

pytestmark = pytest.mark.slow


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


@pytest.fixture
def env(pool):
    e = GuiEnv(templates=["notes.rename"], pool=pool)
    yield e
    e.close()


def test_first_observation_is_the_page_with_refs(env):
    obs, info = env.reset(seed=0)
    assert "Task: Rename the note" in obs
    assert "URL: http://apps.rubricgym.test/notes/index.html" in obs
    assert 'button "New note" [ref=' in obs
    assert info["task_id"].startswith("notes.rename-")


def test_stale_and_unknown_refs_get_an_explanation_and_the_current_page(env):
    obs, _ = env.reset(seed=0)
    title = env._task.hidden["plan"][0]["name"]
    row = find_ref(obs, "button", title)
    obs, *_ = env.step(call("click", ref=row))
    assert 'textbox "Title"' in obs  # the editor opened
    obs, _, _, _, info = env.step(call("click", ref=row))
    assert "stale" in obs and 'textbox "Title"' in obs and info["tool_error"]
    obs, _, _, _, info = env.step(call("click", ref="e4242"))
    assert "not in the current snapshot" in obs and "Page (elements" in obs


def test_oracle_plan_by_hand_reaches_success_with_dense_progress(env):
    task = env.task_set(1, seed=3)[0]
    traj = asyncio.run(rollout(env, Oracle(), task, seed=3))
    rewards = [s.observation.reward for s in traj.steps]
    assert rewards[-1] == 1.0 and rewards[0] < 1.0
    assert traj.outcome.summary["success"] and not traj.outcome.summary["side_effects"]
    assert [s.stage for s in traj.steps][-1] == "finish"
    assert "act" in [s.stage for s in traj.steps]


def test_done_too_early_is_a_false_completion(env):
    env.reset(seed=1)
    _, reward, terminated, _, _ = env.step(call("done"))
    s = env.outcome.summary
    assert terminated and reward < 1.0 and s["false_completion"] and not s["success"] and not s["overdue"]


def test_running_out_of_steps_is_overdue(pool):
    env = GuiEnv(templates=["notes.rename"], pool=pool, max_steps=2)
    env.reset(seed=1)
    env.step(call("scroll", direction="down"))
    *_, truncated, _ = env.step(call("scroll", direction="up"))
    assert truncated and env.outcome.summary["overdue"]
    env.close()


def test_side_effects_and_destructive_steps_are_recorded(pool):
    env = GuiEnv(templates=["settings.rename_device"], pool=pool)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(call("click", ref=find_ref(obs, "link", "Network")))
    obs, *_ = env.step(call("click", ref=find_ref(obs, "switch", "Bluetooth")))
    step = env.trajectory().steps[-1]
    assert step.info["unexpected"] == ["settings.bluetooth"]
    env.step(call("done"))
    assert env.outcome.summary["side_effects"] == ["settings.bluetooth"]
    env.close()


def test_keyboard_navigation_and_navigate_inside_the_app_only(pool):
    env = GuiEnv(templates=["contacts.add"], pool=pool)
    obs, _ = env.reset(seed=0)
    obs, *_ = env.step(call("navigate", url="#/add"))
    assert 'textbox "Name"' in obs
    env.step(call("click", ref=find_ref(obs, "textbox", "Name")))
    env.step(call("type", text="Zed Keyboard"))
    obs, *_ = env.step(call("press", key="Enter"))  # submits the form
    assert "Zed Keyboard" in json.dumps(env._last)
    obs, _, _, _, info = env.step(call("navigate", url="http://example.com/"))
    assert info["tool_error"] and "only pages under" in obs
    obs, _, _, _, info = env.step(call("navigate", url="/mail/index.html"))
    assert info["tool_error"], "another bundled app is outside this episode's app"
    env.close()


def test_answer_sheet_and_screenshot(pool):
    env = GuiEnv(templates=["contacts.phone"], pool=pool, screenshot=True)
    obs, _ = env.reset(seed=2)
    phone = env._task.hidden["goals"][0]["expected"]
    env.step(call("scroll", direction="down"))
    jpeg = base64.b64decode(env.trajectory().steps[-1].info["screenshot_jpeg_b64"])
    assert jpeg[:2] == b"\xff\xd8"
    obs, reward, *_ = env.step(call("answer", fields={"phone": phone}))
    assert phone in obs and reward == 0.0  # an answer counts only at the end: no oracle before done()
    _, reward, *_ = env.step(call("done"))
    assert reward == 1.0 and env.outcome.summary["success"] and env.outcome.summary["answer_sheet"] == {"phone": phone}
    env.close()


def test_episodes_run_concurrently_on_one_browser(pool):
    envs = [GuiEnv(apps=["mail"], pool=pool) for _ in range(4)]
    tasks = envs[0].task_set(4, seed=5)

    async def main():
        pairs = enumerate(zip(envs, tasks, strict=True))
        return await asyncio.gather(*(rollout(e, Oracle(), t, seed=i) for i, (e, t) in pairs))

    trajs = asyncio.run(main())
    assert all(t.outcome.summary["success"] for t in trajs)
    assert len({e.session.origin for e in envs}) == 4  # one private origin (storage, cookies) per episode
    for e in envs:
        e.close()


def test_elements_parses_quoted_names():
    page = '- button "Say \\"hi\\"" [ref=e3] [cursor=pointer]\n  - link "Inbox 5" [ref=e7]:\n- textbox [ref=e9]'
    assert elements(page) == [("button", 'Say "hi"', "e3"), ("link", "Inbox 5", "e7"), ("textbox", "", "e9")]
    assert find_ref(page, "link", "~inbox") == "e7" and find_ref(page, "link", "Inbox") is None


def test_the_episode_time_limit_ends_the_episode_as_overdue(pool):
    env = GuiEnv(templates=["notes.pin"], pool=pool, episode_timeout=0.0)
    env.reset(seed=0)
    obs, _, terminated, _, _ = env.step(call("scroll", direction="down"))
    assert terminated and "time limit" in obs and env.outcome.summary["overdue"]
    env.close()


def test_dropped_envs_give_their_pages_back(pool):
    import gc
    import time

    async def episode_pages() -> set | None:
        """Pages held by sessions other than spares (pages opened ahead for a next episode stay by design);
        ``None`` while a spare is still opening (its page is registered before it is ready)."""
        if any(pool.warming.values()):
            return None
        spares = {id(s) for ready in pool.spares.values() for s in ready}
        return {page for page, owner in pool.owners.items() if id(owner) not in spares}

    def pages_once_settled(until=lambda held: True) -> set | None:
        deadline = time.monotonic() + 15
        while True:
            held = pool.run(episode_pages(), timeout=10)
            if (held is not None and until(held)) or time.monotonic() > deadline:
                return held
            time.sleep(0.1)

    before = pages_once_settled()
    assert before is not None
    for i in range(3):
        env = GuiEnv(pool=pool)
        env.reset(seed=i)
        del env
    gc.collect()
    after = pages_once_settled(until=lambda held: not held - before)
    assert after is not None and not after - before  # rollouts make an env per episode, never closing it
