"""``swe-v0`` on the docker backend against podman's Docker-compatible service (slow)."""

from __future__ import annotations

import json

import pytest

from rubricgym.core.rollout import rollout
from rubricgym.envs.swe import SweEnv
from rubricgym.envs.swe.builtin import builtin_instances
from rubricgym.envs.swe.checks import ALL

pytestmark = pytest.mark.slow


def call(name: str, **args) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


async def test_oracle_and_random_on_containers(docker):
    env = SweEnv(backend=docker, command_timeout=2)
    try:
        inst = builtin_instances()[3]
        good = await rollout(env, SweEnv.agents()["oracle"](), inst.to_task(), seed=0)
        assert good.outcome.reward == 1.0
        assert all(c(good).met for c in ALL.values())
        bad = await rollout(env, SweEnv.agents()["random"](seed=0), inst.to_task(), seed=0)
        assert not ALL["tests_resolved"](bad).met
    finally:
        env.close()


def test_attacks_through_the_tools_give_clear_observations(docker):
    env = SweEnv(backend=docker, command_timeout=2)
    try:
        env.reset(options={"task": builtin_instances()[0].to_task()})
        obs, *_ = env.step(call("bash", command="while true; do :; done"))
        assert "timed out" in obs
        obs, *_ = env.step(call("bash", command="head -c 100000000 /dev/zero | tr '\\0' x"))
        assert "too much output" in obs
        obs, *_ = env.step(call("bash", command="ln -s /etc/passwd p && echo made"))
        obs, *_ = env.step(call("view", path="p"))
        assert "outside the repository" in obs
        obs, *_ = env.step(call("run_tests", selector="tests/test_core.py"))
        assert "1 failed" in obs
    finally:
        env.close()
