"""The leak audit finds hidden values wherever the agent side can read them, and only there."""

import asyncio

import numpy as np

from rubricgym.core.env import ToolOutput
from rubricgym.core.registry import register, unregister
from rubricgym.core.types import Task, ToolCall
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.rewards.leaks import Scanner, audit_leaks, make_secrets, normalise


def test_values_match_normalised_and_in_any_word_order():
    scanner = Scanner(make_secrets([("answer", "Hirox, Ke"), ("exam", "joint_xray"), ("n", 391), ("flag", True)]))
    assert normalise("Ké-HIROX") == ["ke", "hirox"]
    assert [s.path for s in scanner.find("the winner is ke hirox.")] == ["answer"]
    assert [s.path for s in scanner.find("Ordered: Joint X-ray")] == ["exam"]
    assert [s.path for s in scanner.find("total 391 points")] == ["n"]
    assert scanner.find("true story of kehiroxian 3910") == []  # booleans are not secrets; words are whole


class InfoLeakEnv(CalculatorEnv):
    """Hands the answer over in every step's public details (as gui-v0's goal rows did)."""

    env_id = "test-info-leak-v0"
    public_info_keys = frozenset({"expected"})

    def call_tool(self, call: ToolCall) -> ToolOutput:
        out = super().call_tool(call)
        assert self._task is not None
        return ToolOutput(
            out.text, out.done, out.answer, out.error, out.reward, {"expected": self._task.hidden["answer"]}
        )


class IdLeakEnv(CalculatorEnv):
    """Names its tasks after their answers (as clinical-v0's synthetic ids named the condition)."""

    env_id = "test-id-leak-v0"

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        task = super().sample_task(rng, split)
        return task.model_copy(update={"id": f"calc-answer-{task.hidden['answer']}", "env_id": self.env_id})


def test_the_audit_names_the_channel_and_field_of_a_leak():
    register("test-info-leak-v0", InfoLeakEnv)
    register("test-id-leak-v0", IdLeakEnv)
    try:
        info = asyncio.run(audit_leaks("test-info-leak-v0", n_tasks=2))
        ids = asyncio.run(audit_leaks("test-id-leak-v0", n_tasks=2))
    finally:
        unregister("test-info-leak-v0")
        unregister("test-id-leak-v0")
    assert not info.ok and {leak.path for leak in info.leaks} == {"answer"}
    assert any(leak.channel.endswith(" info") for leak in info.leaks)
    assert any(leak.channel == "task id" for leak in ids.leaks), ids.line()
    clean = asyncio.run(audit_leaks("toy-calculator-v0", n_tasks=2))
    assert clean.ok and clean.exempt.get("answer via calculator", 0) > 0  # computed by the tool: allowed


class CounterEnv(CalculatorEnv):
    """An answer that equals the step counter of the step that shows it is no leak."""

    env_id = "test-counter-v0"

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        task = super().sample_task(rng, split)
        return task.model_copy(update={"hidden": {**task.hidden, "answer": 12}, "env_id": self.env_id})


def test_episode_counters_are_not_secrets():
    register("test-counter-v0", CounterEnv)
    try:
        report = asyncio.run(audit_leaks("test-counter-v0", n_tasks=1, env_kwargs={"max_steps": 12}))
    finally:
        unregister("test-counter-v0")
    assert not [leak for leak in report.leaks if "info" in leak.channel or "state()" in leak.channel], report.line()
