"""``Outcome.solved``: the env's own verdict on the task, apart from an outcome reward that gives partial credit.

A right clinical diagnosis after no work-up earns an outcome reward below 1 (the exams' F1 is part of it), and a
right deep-search answer with no page read earns 0.7 (C-GRPO): both solved the task. A solve rate read off the
reward (>= 1) counted them as failures.
"""

import json

import pytest

import rubricgym
from rubricgym.core.types import Outcome


def _call(name: str, **arguments: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _play(env_id: str, action) -> Outcome:
    env = rubricgym.make(env_id)
    try:
        task = env.task_set(1, seed=3)[0]
        env.reset(seed=3, options={"task": task})
        env.step(action(task))
        return env.trajectory().outcome
    finally:
        env.close()


@pytest.mark.parametrize(
    ("env_id", "right", "wrong"),
    [
        (
            "clinical-v0",
            lambda t: _call("diagnose", diagnosis=t.hidden["diagnosis"]["name"]),
            lambda t: _call("diagnose", diagnosis="Tension headache"),
        ),
        (
            "deepsearch-v0",
            lambda t: _call("answer", text=f"Answer: {t.hidden['answer']}"),
            lambda t: _call("answer", text="Answer: Nobody Atall"),
        ),
        (
            "toy-calculator-v0",
            lambda t: _call("answer", value=t.hidden["answer"]),
            lambda t: _call("answer", value=-123456),
        ),
    ],
)
def test_a_right_answer_solves_the_task_whatever_partial_credit_the_reward_gives(env_id, right, wrong):
    done = _play(env_id, right)
    assert done.solved is True and done.succeeded
    failed = _play(env_id, wrong)
    assert failed.solved is False and not failed.succeeded
    if env_id != "toy-calculator-v0":  # no work-up, no evidence: partial credit, yet solved
        assert done.reward < 1.0


def test_an_env_that_does_not_say_falls_back_to_an_outcome_reward_of_one():
    assert Outcome(reward=1.0).succeeded and not Outcome(reward=0.99).succeeded
    assert not Outcome(reward=1.0, solved=False).succeeded and Outcome(reward=0.2, solved=True).succeeded
    back = Outcome.model_validate_json(Outcome(reward=0.5, solved=True).model_dump_json())
    assert back.solved is True and Outcome.model_validate({"reward": 1.0}).solved is None  # old records load
