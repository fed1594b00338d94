"""clinical-v0's held-out splits (issue #38, item 3): ``test`` shares no case or presentation with training,
``test-unseen`` not even a diagnosis."""

from __future__ import annotations

import numpy as np
import pytest

import rubricgym
from rubricgym.envs.clinical.env import UNSEEN_SPLIT, unseen_conditions

from .conftest import EXAMPLES


def _presentations(tasks) -> set[str]:
    return {t.prompt for t in tasks}


@pytest.mark.parametrize("knobs", [{"specialty": "cardiology"}, {}])
def test_train_never_draws_an_unseen_condition_nor_a_heldout_presentation(knobs):
    env = rubricgym.make("clinical-v0", **knobs)
    train = env.task_set(400, seed=0, split="train")
    test = env.task_set(100, seed=1, split="test")
    unseen = env.task_set(60, seed=1, split=UNSEEN_SPLIT)
    conditions = {s: {t.hidden["condition"] for t in ts} for s, ts in (("train", train), ("test", test), ("u", unseen))}
    assert conditions["train"].isdisjoint(env.unseen_conditions) and conditions["u"] <= env.unseen_conditions
    assert conditions["test"].isdisjoint(env.unseen_conditions)  # test: new patients of the trained conditions
    assert _presentations(train).isdisjoint(_presentations(test) | _presentations(unseen))
    assert {t.hidden["case_id"] for t in train}.isdisjoint(t.hidden["case_id"] for t in test + unseen)


def test_every_specialty_holds_out_a_condition_stably():
    env = rubricgym.make("clinical-v0")
    held = unseen_conditions(env.kb)
    assert held == unseen_conditions(rubricgym.make("clinical-v0").kb)  # stable across envs (no salted hash)
    for specialty in {c.specialty for c in env.kb.conditions.values()}:
        of = [c for c in env.kb.conditions.values() if c.specialty == specialty]
        n_held = sum(c.id in held for c in of)
        assert 1 <= n_held <= max(1, len(of) // 4), specialty
    cardio = rubricgym.make("clinical-v0", specialty="cardiology")
    assert {t.hidden["condition"] for t in cardio.task_set(40, seed=3, split=UNSEEN_SPLIT)} == {
        c for c in held if env.kb.conditions[c].specialty == "cardiology"
    }


def test_without_the_presentation_partition_a_heldout_prompt_repeats_a_training_one(monkeypatch):
    """The broken variant: new case ids alone still show the demo's held-out patients word for word."""
    env = rubricgym.make("clinical-v0", specialty="cardiology")
    monkeypatch.setattr(env, "allows", lambda case, split: case.condition not in env.unseen_conditions)
    train, test = env.task_set(200, seed=0, split="train"), env.task_set(16, seed=1, split="test")
    assert _presentations(train) & _presentations(test)


def test_unseen_is_refused_where_there_is_no_condition_to_hold_out():
    with pytest.raises(ValueError, match=r"'test-unseen' holds out knowledge-base conditions.*separate file"):
        rubricgym.make("clinical-v0", cases=EXAMPLES).task_set(1, split=UNSEEN_SPLIT)
    with pytest.raises(ValueError, match=r"fixed to condition='stemi': drop condition="):
        rubricgym.make("clinical-v0", condition="stemi").sample_task(np.random.default_rng(0), UNSEEN_SPLIT)
    assert rubricgym.make("clinical-v0", condition="stemi").task_set(2, split="train")  # the user's choice holds
