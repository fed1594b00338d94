"""Agent programs of three kinds (a plain OpenAI-client script, LangGraph, the OpenAI Agents SDK) play a rubricgym
env's tasks through the recording proxy (issue #43 item 3): each model call is one recorded turn of the policy
and one env step, the env sees exactly the generated text, and a training run on them updates the policy."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricgym.core.registry import make
from rubricgym.proxy import examples as programs
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.proxy_backend import ProxyBackend
from rubricgym.trainers.engine.sampling import fixed_env

ENV = "toy-calculator-v0"
KW = {"min_ops": 1, "max_ops": 1, "max_steps": 3}
PREFIX = '<tool_call>{"name": "calculator", "arguments": {"expression": "'
"""Prefilled into every turn (as ``generation.response_prefix`` does), so the small model's turns are tool calls."""


@pytest.fixture(scope="module")
def policy() -> TrainingPolicy:
    return TrainingPolicy(
        "smollm2-135m-instruct", temperature=0.8, max_new_tokens=14, seed=1, threads=1, response_prefix=PREFIX
    ).load()


@pytest.mark.parametrize("program", ["plain_openai", "langgraph_react", "openai_agents_sdk"])
def test_each_framework_plays_env_steps_through_the_proxy(policy, program):
    backend = ProxyBackend(policy, fixed_env(ENV, KW), getattr(programs, program))
    try:
        task = make(ENV, **KW).task_set(1, seed=4)[0]
        groups = asyncio.run(backend.collect([task], [10], 2))
    finally:
        backend.close()
    assert len(groups) == 1 and len(groups[0]) == 2
    tok = policy.tokenizer
    for r in groups[0]:
        traj = r.trajectory
        assert r.turns, f"{program}: no model call was recorded"
        assert traj.agent == program
        for i, turn in enumerate(r.turns):
            # the env's action is the generated text itself: the prefix, then exactly the recorded tokens
            assert traj.steps[i].action.text == turn.text
            assert turn.text == PREFIX + tok.decode(turn.completion_ids, skip_special_tokens=True).split(
                "</tool_call>"
            )[0] + ("</tool_call>" if "</tool_call>" in turn.text else "")
            assert turn.prompt_ids[-len(tok.encode(PREFIX, add_special_tokens=False)) :] == tok.encode(
                PREFIX, add_special_tokens=False
            )
            assert len(turn.logprobs) == len(turn.completion_ids)
        calls = [s for s in traj.steps[: len(r.turns)] if s.action.tool_call is not None]
        if calls:  # a tool call's observation is what the program's tool returned to its framework
            assert calls[0].action.tool_call.name == "calculator"
    # the two episodes of a group sample differently (their own seeds), as the built-in loop's do
    a, b = ([t.completion_ids for t in r.turns] for r in groups[0])
    assert a != b


@pytest.mark.slow
@pytest.mark.parametrize("program", ["langgraph_react", "openai_agents_sdk"])
def test_grpo_trains_an_agent_program_through_the_proxy(tiny_config, tmp_path, program):
    """``generation.agent_program`` in a training config: two GRPO steps of a framework's agent, then a resume."""
    from rubricgym.trainers.trainer import Trainer

    over = {
        "generation": {"agent_program": f"rubricgym.proxy.examples:{program}", "response_prefix": PREFIX},
        "env": {"kwargs": KW},
    }
    cfg = tiny_config(tmp_path / "run", **over)
    summary = Trainer(cfg).run()
    assert summary
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if line]
    played = [json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()]
    assert played and {t["agent"] for t in played} == {program}  # every episode was the program's
    steps = [r for r in rows if r.get("kind") == "train" and "step" in r]
    assert steps and steps[-1]["step"] >= 1, rows[-1]
    Trainer(tiny_config(tmp_path / "run", steps=3, **over)).run(resume=True)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if line]
    assert max(r["step"] for r in rows if "step" in r) > steps[-1]["step"]
