"""gui-v0 guidance (graded hints for a group that all failed): the page, then the elements; never the text to type,
the option to choose or an answer. Bring-your-own and MiniWoB++ tasks give none."""

from __future__ import annotations

import asyncio
import re

import pytest

from rubricgym.core.types import Task
from rubricgym.envs.gui import guidance as gui_guidance
from rubricgym.envs.gui.agents import Oracle
from rubricgym.envs.gui.byo import WebTaskEnv
from rubricgym.envs.gui.env import GuiEnv
from rubricgym.envs.gui.miniwob import html_root, page_class
from rubricgym.envs.gui.templates import TEMPLATES
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets

ENV = GuiEnv()


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    """Three tasks of every template (both splits: the held-out templates are the test split)."""
    return [t for tid, tmpl in TEMPLATES.items() for t in GuiEnv(templates=[tid]).task_set(3, seed=5, split=tmpl.split)]


def find_secrets(task: Task, text: str) -> list:
    return Scanner(make_secrets(GuiEnv.secrets(task))).find(text)


def test_every_level_hints_and_the_second_adds_the_elements(tasks):
    assert GuiEnv.guidance_levels == 2
    assert {t.split for t in tasks} == {"train", "test"}
    for task in tasks:
        one, two = ENV.guidance(task, 1), ENV.guidance(task, 2)
        assert one and two and two.startswith(one) and len(two) > len(one), task.id
        assert "The elements to use" in two and "The elements to use" not in one
        assert ENV.guidance(task, 0) is None and ENV.guidance(task, 3) is None
        assert [one, two] == [GuiEnv().guidance(task, level) for level in (1, 2)]  # deterministic


def test_level_one_names_the_section_level_two_the_form():
    env = GuiEnv(templates=["settings.font_size"])
    task = env.task_set(1, seed=0)[0]
    assert ENV.guidance(task, 1) == "In the Settings app, go to the page of the link “Display”."
    assert "in the list “Font size”" in (ENV.guidance(task, 2) or "")
    mail = GuiEnv(templates=["mail.compose"]).task_set(1, seed=0)[0]
    two = ENV.guidance(mail, 2) or ""
    assert all(f"the textbox “{field}”" in two for field in ("To", "Subject", "Message"))


def test_no_hint_holds_an_answer_or_what_to_type_or_choose(tasks):
    answers = 0
    for task in tasks:
        for level in (1, 2):
            hint = ENV.guidance(task, level) or ""
            assert not find_secrets(task, hint), (task.id, level, hint)
        hint = ENV.guidance(task, 2) or ""
        names = " ".join(str(s.get("name", "")) for s in task.hidden["plan"]).casefold()
        for step in task.hidden["plan"]:
            value = str(step.get("text") or step.get("option") or "")
            if value and value.casefold() not in names:
                assert not re.search(rf"\b{re.escape(value.casefold())}\b", hint.casefold()), (task.id, value, hint)
        for secret in make_secrets(GuiEnv.secrets(task)):  # the ones worth scanning for (not "1")
            answers += 1
            assert find_secrets(task, f"{hint} It is {secret.value}."), secret  # a hint with the answer is caught
    assert answers > 20  # the answer templates were among the tasks


def test_an_element_named_with_an_answer_is_described_without_its_name(tasks):
    task = next(t for t in tasks if GuiEnv.secrets(t) and len(str(GuiEnv.secrets(t)[0][1])) > 3)
    secret = str(GuiEnv.secrets(task)[0][1])
    leaky = task.model_copy(deep=True)
    leaky.hidden["plan"] = [{"tool": "click", "role": "link", "name": f"~{secret}"}, *task.hidden["plan"]]
    for level in (1, 2):
        hint = ENV.guidance(leaky, level) or ""
        assert hint and not find_secrets(leaky, hint) and secret not in hint, hint


def test_a_hint_that_would_carry_a_secret_is_dropped(tasks, monkeypatch):
    task = next(t for t in tasks if GuiEnv.secrets(t))
    secret = str(GuiEnv.secrets(task)[0][1])
    monkeypatch.setattr(gui_guidance, "hint_parts", lambda t, s: ["Hint: go there.", f"Type {secret}."])
    assert ENV.guidance(task, 1) == "Hint: go there." and ENV.guidance(task, 2) is None


def test_web_tasks_and_miniwob_give_no_guidance():
    """Their instruction is drawn by the page at reset: nothing is known to hint from before the episode."""
    env = WebTaskEnv()
    assert WebTaskEnv.guidance_levels == 0
    assert all(env.guidance(t, 1) is None for t in env.task_set(2, seed=0) + env.task_set(2, seed=0, split="test"))
    if html_root() is None:
        pytest.skip("the miniwob package is not installed")
    cls = page_class("click-button")
    assert cls.guidance_levels == 0
    page = cls()
    assert page.guidance(page.task_set(1, seed=0)[0], 1) is None


@pytest.mark.slow
def test_leak_audit_finds_no_secret_in_guidance(pool):
    """Guidance channels only (the first observation is test_integrity's): no hint level names an answer the
    agent has not found; the scanner tests above hold the hints to the secrets directly."""
    kwargs = {"templates": ["contacts.company", "notes.read", "calendar.when", "shop.checkout"], "pool": pool}
    report = asyncio.run(audit_leaks("gui-v0", n_tasks=2, agents={"oracle": Oracle}, env_kwargs=kwargs))
    assert report.episodes == 4 and report.secrets > 0
    assert not [leak for leak in report.leaks if leak.channel.startswith("guidance")], report.line()
