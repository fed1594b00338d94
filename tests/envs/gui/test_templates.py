"""Task templates: enough of them, both splits, every level, deterministic draws, plans the oracle can run."""

from collections import Counter

import numpy as np
import pytest

from rubricgym.envs.gui.data import APPS, initial_state
from rubricgym.envs.gui.env import GuiEnv
from rubricgym.envs.gui.judge import check_goals, resolve
from rubricgym.envs.gui.templates import TEMPLATES
from rubricgym.envs.gui.templates.base import Goal


def test_at_least_50_templates_over_six_apps_levels_and_splits():
    assert len(TEMPLATES) >= 50
    assert set(Counter(t.app for t in TEMPLATES.values())) == set(APPS)
    assert {t.level for t in TEMPLATES.values()} == {1, 2, 3, 4}
    splits = Counter(t.split for t in TEMPLATES.values())
    assert splits["test"] >= 10 and splits["train"] >= 40


@pytest.mark.parametrize("tid", sorted(TEMPLATES))
def test_template_draws_deterministic_unfinished_tasks(tid):
    t = TEMPLATES[tid]
    specs = []
    for _ in range(2):
        state = initial_state(t.app, 7)
        specs.append((t.draw(np.random.default_rng(3), state), state))
    (a, state), (b, _) = specs
    assert a == b, "the same seed must give the same task"
    assert a.plan and a.plan[-1] == {"tool": "done"}
    assert a.goals
    for g in a.goals:
        resolve({**state, "answer": {}}, g.field)  # every goal path parses
    rows = check_goals([Goal.model_validate(g.model_dump()) for g in a.goals], state, {})
    assert not all(r["passed"] for r in rows), f"{tid}: the task is already solved in its initial state"


def test_splits_hold_out_test_templates():
    env = GuiEnv()
    train = {t.params["template"] for t in env.task_set(60, seed=1, split="train")}
    test = {t.params["template"] for t in env.task_set(30, seed=1, split="test")}
    assert all(TEMPLATES[x].split == "train" for x in train)
    assert all(TEMPLATES[x].split == "test" for x in test)
    assert len(test) >= 5
    with pytest.raises(ValueError, match="splits"):
        env.sample_task(np.random.default_rng(0), "validation")


def test_task_is_self_contained_and_narrowable():
    env = GuiEnv(apps=["shop"], levels=[4])
    task = env.task_set(1, seed=0)[0]
    assert task.params["template"] == "shop.checkout"
    assert (
        task.hidden["state"]["products"] and "state" not in task.params and task.hidden["goals"] and task.hidden["plan"]
    )
    with pytest.raises(ValueError, match="unknown template"):
        GuiEnv(templates=["nope.nothing"])
