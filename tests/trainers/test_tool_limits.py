"""Env workers with limits: an ``async def`` tool call past ``tool_timeout_s`` becomes a timeout error the agent
sees (the episode goes on), and ``tool_limiter`` caps how many such calls run at once across episodes; the
trainer's ``env.tool_timeout_s`` / ``env.max_concurrent_tools`` reach every env its backend plays."""

from __future__ import annotations

import asyncio
import json

import pytest

from rubricgym import ToolOutput, tool
from rubricgym.core.registry import register, unregister
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.trainers.algo.estimate import Estimate
from rubricgym.trainers.config import ConfigError, validate_config
from rubricgym.trainers.engine.ray_worker import RolloutWorker
from rubricgym.trainers.engine.sampling import ToolLimits, play_groups
from rubricgym.trainers.report import Laps, train_record
from rubricgym.trainers.trainer import Trainer


def call(expression: str) -> str:
    return "<tool_call>" + json.dumps({"name": "calculator", "arguments": {"expression": expression}}) + "</tool_call>"


class SlowCalc(CalculatorEnv):
    """The calculator with an async tool that takes ``1 s`` per call when the expression contains ``slow`` and
    ``0.05 s`` otherwise, counting how many calls run at once."""

    running = 0
    peak = 0

    @tool(examples={"expression": "17 * 23 - 4"})
    async def calculator(self, expression: str) -> ToolOutput:
        """Evaluate an arithmetic expression.

        Args:
            expression: e.g. '17 * 23 - 4'
        """
        cls = type(self)
        cls.running += 1
        cls.peak = max(cls.peak, cls.running)
        try:
            await asyncio.sleep(1.0 if "slow" in expression else 0.05)
        finally:
            cls.running -= 1
        return super().calculator(expression.replace("slow", ""))


async def test_a_call_past_the_timeout_is_a_timeout_error_and_the_episode_goes_on():
    env = SlowCalc(max_steps=4)
    env.tool_timeout_s = 0.2
    env.reset(seed=0)
    obs = await env.astep_typed(call("slow 6 * 7"))
    assert not obs.done and "timed out after 0.2 s" in obs.messages[-1].content
    step = env.trajectory().steps[-1]
    assert step.info == {"timed_out": True} and step.tool_error.startswith("timed out")
    obs = await env.astep_typed(call("6 * 7"))  # a quick call afterwards works
    assert obs.messages[-1].content.startswith("42")
    assert SlowCalc.running == 0  # the cancelled call ran its cleanup


async def test_the_limiter_caps_concurrent_tool_calls_across_envs():
    SlowCalc.peak = 0
    limiter = asyncio.Semaphore(2)
    envs = [SlowCalc() for _ in range(6)]
    for env in envs:
        env.tool_limiter = limiter
        env.reset(seed=0)
    await asyncio.gather(*(env.astep_typed(call("6 * 7")) for env in envs))
    assert SlowCalc.peak == 2
    SlowCalc.peak = 0
    unlimited = [SlowCalc() for _ in range(6)]
    for env in unlimited:
        env.reset(seed=0)
    await asyncio.gather(*(env.astep_typed(call("6 * 7")) for env in unlimited))
    assert SlowCalc.peak == 6


class Scripted:
    """A recording policy that plays a fixed script of actions per episode (the second action computes)."""

    name, model = "scripted", None

    def __init__(self, actions: list[str]):
        self.actions = actions

    def recording(self, task: Task, seed: int, temperature: float | None) -> Scripted:
        episode = Scripted(self.actions)
        episode.turns = []
        return episode

    def render(self, messages: list[Message]) -> list[int]:
        return [len(messages)]

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        return self.actions[min(len(messages) // 2 - 1, len(self.actions) - 1)]


@pytest.fixture
def slow_env():
    register("test-slowcalc-v0", SlowCalc, replace=True)
    yield "test-slowcalc-v0"
    unregister("test-slowcalc-v0")


async def test_play_groups_applies_the_runs_limits_to_every_episode_and_the_step_logs_timeouts(slow_env):
    env = SlowCalc()
    tasks = env.task_set(2, seed=0)
    SlowCalc.peak = 0
    limits = ToolLimits(timeout_s=0.3, max_concurrent=3)
    agent = Scripted([call("slow 1 + 1"), call("2 + 2")])
    groups = await play_groups(agent, lambda t: (slow_env, {"max_steps": 2}), tasks, [0, 1], 4, limits=limits)
    assert SlowCalc.peak == 3  # 8 episodes, at most 3 tool calls at once
    steps = [t.trajectory.steps for g in groups for t in g]
    assert all(s[0].info.get("timed_out") and not s[1].info.get("timed_out") for s in steps)
    est = Estimate(samples=[], per_rollout=[0.0] * 8)
    record = train_record(1, 0, groups, est, {}, [], Laps())
    assert record["tool_timeouts"] == 8 and record["episode_p99_s"] >= 0.3


@pytest.mark.slow
def test_the_config_takes_the_limits_and_ray_workers_apply_them(tiny_model_dir):
    cfg = validate_config({"env": {"tool_timeout_s": 30, "max_concurrent_tools": 4}, "ray": True})
    assert (cfg.env.tool_timeout_s, cfg.env.max_concurrent_tools) == (30, 4)
    with pytest.raises(ConfigError, match="max_concurrent_tools"):
        validate_config({"env": {"max_concurrent_tools": 0}})
    worker = RolloutWorker(str(tiny_model_dir), {}, "toy-calculator-v0", {}, 1, (30, 4))  # what each actor runs
    assert worker.limits is not None and worker.limits.timeout_s == 30 and worker.limits.max_concurrent == 4
    assert RolloutWorker(str(tiny_model_dir), {}, "toy-calculator-v0", {}).limits is None


def test_ray_placement_fields_are_checked_at_config_load():
    cfg = validate_config(
        {"ray": True, "ray_worker_resources": {"resources": {"rollout": 1}}, "ray_placement": "strict_spread"}
    )
    assert cfg.ray_worker_resources.num_cpus == 1 and cfg.ray_max_restarts == 3
    with pytest.raises(ConfigError, match="ray_worker_resources.gpus"):
        validate_config({"ray": True, "ray_worker_resources": {"gpus": 1}})
    with pytest.raises(ConfigError, match="ray_placement"):
        validate_config({"ray": True, "ray_placement": "everywhere"})


def test_ray_with_guidance_under_torchrun_is_refused_before_anything_loads(tiny_config, tmp_path, monkeypatch):
    """Ranks share rank 0's pool by collecting together; guidance re-rolls on some ranks only, so it is refused."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="guidance re-rolls only the groups that failed on each rank, so ranks"):
        Trainer(tiny_config(tmp_path / "run", ray=True, guidance={}))
    assert not (tmp_path / "run").exists()
