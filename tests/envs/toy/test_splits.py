"""The calculator's held-out problems are never training problems (issue #38, item 3)."""

from __future__ import annotations

import pytest

import rubricgym

ENV = "toy-calculator-v0"


@pytest.mark.parametrize(
    "knobs", [{"style": "expression", "min_ops": 1, "max_ops": 1}, {"style": "word", "min_ops": 2, "max_ops": 3}]
)
def test_heldout_problems_are_never_training_ones(knobs):
    env = rubricgym.make(ENV, **knobs)
    train, test = env.task_set(1000, seed=0, split="train"), env.task_set(300, seed=1, split="test")
    assert not {t.prompt for t in train} & {t.prompt for t in test}
    assert len({t.prompt for t in test}) >= 100  # still a space of problems, not a handful
    assert [t.id for t in env.task_set(20, seed=1, split="test")] == [t.id for t in test[:20]]  # seeded
