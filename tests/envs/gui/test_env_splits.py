"""gui-v0's held-out tasks answer nothing a training task answers (issue #38, item 3): no browser needed."""

from __future__ import annotations

import pytest

from rubricgym.envs.gui import env as gui_env
from rubricgym.envs.gui.env import GuiEnv
from rubricgym.envs.gui.templates import TEMPLATES
from rubricgym.envs.gui.templates.base import heldout_answer


def _answers(tasks) -> set[str]:
    """Every answer-sheet value the tasks ask for, as the partition reads it."""
    return {
        " ".join(str(g["expected"]).split()).casefold()
        for t in tasks
        for g in t.hidden["goals"]
        if g["field"].startswith("answer.")
    }


def _draw(env: GuiEnv) -> tuple[set[str], set[str]]:
    return _answers(env.task_set(600, seed=0, split="train")), _answers(env.task_set(300, seed=1, split="test"))


def test_heldout_answers_are_never_training_answers():
    train, test = _draw(GuiEnv())
    assert len(test) >= 20 and {"4", "6"} & test  # held-out counts are asked (mail.count_unread, shop.stock)
    assert train.isdisjoint(test), sorted(train & test)[:5]
    assert all(heldout_answer(v) for v in test) and not any(heldout_answer(v) for v in train)


def test_without_the_answer_partition_the_same_draws_share_answers(monkeypatch):
    """The broken variant (templates kept apart, answers not): counts such as "4" are asked on both sides."""
    monkeypatch.setattr(gui_env, "answer_split", lambda spec: None)
    train, test = _draw(GuiEnv())
    assert train & test


def test_every_template_still_draws_tasks_of_its_split():
    """The partition starves no template: each draws tasks of its own split (a redraw finds an allowed answer)."""
    for tid, tmpl in TEMPLATES.items():
        tasks = GuiEnv(templates=[tid]).task_set(3, seed=2, split=tmpl.split)
        assert [t.params["template"] for t in tasks] == [tid] * 3


def test_a_template_that_cannot_reach_its_split_says_so(monkeypatch):
    monkeypatch.setattr(gui_env, "answer_split", lambda spec: "mixed" if spec.answer_fields else None)
    with pytest.raises(ValueError, match=r"template 'mail.count_unread' drew no task whose answers belong"):
        GuiEnv(templates=["mail.count_unread"]).task_set(1, split="test")
