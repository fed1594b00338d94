"""The ``gui-v0`` teacher (issue #38): it operates the bundled apps from the task text and the pages it sees.

Fast tests check its reading (every template's instruction becomes steps; snapshots' elements, lists, cards and
product cards read right; its path varies with the seed; it never holds the task); the slow one plays it in Chromium
at the env's default settings. The no-peeking check is in ``tests/envs/test_teachers.py``.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from rubricgym.core.rollout import rollout
from rubricgym.envs.gui.env import GuiEnv
from rubricgym.envs.gui.teacher import (
    Teacher,
    definition,
    list_item,
    main_list_items,
    parse_page,
    plan_steps,
    products,
)
from rubricgym.envs.gui.templates import TEMPLATES

PAGE = """URL: http://apps.rubricgym.test/mail/index.html#/inbox
Page (elements have [ref=eN]; pass N's ref to tools):
- generic [active] [ref=e1]:
  - navigation "Mail navigation" [ref=e5]:
    - link "Inbox 5" [ref=e7] [cursor=pointer]:
  - main [ref=e18]:
    - list "Messages" [ref=e20]:
      - listitem [ref=e31]:
        - 'button "Maya Okafor Re: budget review 2024-05-19 12:30" [ref=e32] [cursor=pointer]':
          - generic [ref=e33]: Maya Okafor
          - generic [ref=e34]: "Re: budget review"
      - listitem [ref=e36]:
        - button "Sami Martin budget review 2024-05-19 11:00" [ref=e37] [cursor=pointer]:
          - generic [ref=e38]: Sami Martin
          - generic [ref=e39]: budget review
    - region "Contact details" [ref=e51]:
      - term [ref=e54]: Phone
      - definition [ref=e55]: +1 555 497 5346
    - checkbox "Pinned" [checked] [ref=e73]
    - textbox "Body" [ref=e69]: call the plumber; ask about the deadline
    - article "USB-C charger" [ref=e49]:
      - heading "USB-C charger" [level=3] [ref=e50]
      - paragraph [ref=e52]:
        - strong [ref=e53]: $19.50
        - text: · 7 in stock
"""


def test_reads_elements_lists_cards_and_products_off_a_snapshot():
    by_ref = {e.ref: e for e in parse_page(PAGE)}
    assert by_ref["e32"].name == "Maya Okafor Re: budget review 2024-05-19 12:30"
    assert by_ref["e73"].checked and not by_ref["e69"].checked
    assert by_ref["e69"].value == "call the plumber; ask about the deadline"
    # the item whose subject is exactly the one asked for, not the reply whose subject contains it
    assert list_item(PAGE, "budget review").ref == "e37"  # type: ignore[union-attr]
    assert list_item(PAGE, "Re: budget review").ref == "e32"  # type: ignore[union-attr]
    assert main_list_items(PAGE) == 2
    assert definition(PAGE, "Phone") == "+1 555 497 5346"
    [p] = products(PAGE)
    assert (p.name, p.price, p.stock) == ("USB-C charger", 19.5, 7)


@pytest.mark.parametrize("tid", sorted(TEMPLATES))
def test_every_template_instruction_becomes_steps(tid):
    """The teacher reads every kind of task the bundled apps pose (both splits), from the prompt alone."""
    t = TEMPLATES[tid]
    for task in GuiEnv(templates=[tid]).task_set(3, seed=5, split=t.split):
        assert plan_steps(task.prompt, np.random.default_rng(0)), task.prompt


def test_path_varies_with_the_seed_and_never_sees_the_task():
    task = GuiEnv(templates=["calendar.create"]).task_set(1, seed=5)[0]
    orders = {tuple(s.name for s in plan_steps(task.prompt, np.random.default_rng(seed))) for seed in range(8)}
    assert len(orders) >= 3, orders  # the form's fields in another order
    agent = Teacher(seed=0).episode(task, 0)
    assert not any(v is task or v == task.hidden for v in vars(agent).values())


@pytest.mark.slow
def test_solves_the_bundled_app_tasks_at_default_settings(pool):
    """30 training tasks and one of every held-out template at the env's default settings: the teacher solves at
    least 60 % of each (measured: 60/60 training and 30/30 held-out tasks), and a fresh teacher handed the history
    of a step takes the same next action (its action is a function of its seed and the messages)."""
    env = GuiEnv(pool=pool, action_timeout=15)
    train = env.task_set(30, seed=21)
    held_out = [
        GuiEnv(templates=[tid]).task_set(1, seed=21, split="test")[0]
        for tid, t in TEMPLATES.items()
        if t.split == "test"
    ]

    async def play(tasks):
        solved = 0
        for i, task in enumerate(tasks):
            traj = await rollout(env, Teacher(seed=i), task, seed=i)
            solved += bool(traj.outcome and traj.outcome.succeeded)
            assert all(s.action.parse_error is None for s in traj.steps), task.id
            history = env.messages
            turns = [k for k, m in enumerate(history) if m.role == "assistant"]
            k = turns[len(turns) // 2]
            assert Teacher(seed=i).decide(history[:k]) == history[k].content, task.id
        return solved / len(tasks)

    try:
        rates = asyncio.run(play(train)), asyncio.run(play(held_out))
    finally:
        env.close()
    assert min(rates) >= 0.6, rates
