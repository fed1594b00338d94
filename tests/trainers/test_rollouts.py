"""Rollouts carry the exact tokens behind each trajectory: nothing is looked up by task id and seed."""

import asyncio

from rubricgym.trainers.engine.backends import LocalBackend
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.sampling import fixed_env

ENV = "toy-calculator-v0"
KW = {"min_ops": 1, "max_ops": 1, "max_steps": 2}


def test_local_rollouts_pair_each_trajectory_with_its_turns(tiny_model_dir):
    from rubricgym.core.tasks import TaskSet

    policy = TrainingPolicy(str(tiny_model_dir), temperature=1.0, max_new_tokens=4, response_prefix="<tool_call>")
    backend = LocalBackend(policy, fixed_env(ENV, KW))
    tasks = list(TaskSet.generate(ENV, 2, seed=0, **KW))
    groups = asyncio.run(backend.collect(tasks, [11, 211], 3, anchor_greedy=True))
    assert [len(g) for g in groups] == [3, 3]
    for task, seed, group in zip(tasks, [11, 211], groups, strict=True):
        assert {r.trajectory.group_id for r in group} != {None} and len({r.trajectory.group_id for r in group}) == 1
        assert [r.trajectory.seed for r in group] == [seed, seed + 1, seed + 2]
        assert [r.turns[0].greedy for r in group] == [True, False, False]  # the anchor decodes greedily
        for r in group:
            assert r.trajectory.task.id == task.id and r.breakdown is None
            # one turn per step, and the text the env saw is the prefix plus what those tokens decode to
            assert [t.text for t in r.turns] == [s.action.text for s in r.trajectory.steps]
            assert all(t.text.startswith("<tool_call>") and len(t.completion_ids) == len(t.logprobs) for t in r.turns)
    # evaluation's override: every episode at the given temperature, and the backend leaves the policy as it was
    (greedy,) = asyncio.run(backend.collect(tasks[:1], [5], 2, temperature=0.0, full_precision=True))
    assert all(t.greedy for r in greedy for t in r.turns) and policy.params.temperature == 1.0
