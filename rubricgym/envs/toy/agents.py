"""Scripted agents for the calculator env: an oracle, a random agent and a guesser (baselines, tests, data), and
the outcome-consistency audit's near miss and wrong answer (``CalculatorEnv.outcome_agents``)."""

from __future__ import annotations

import json

from rubricgym.core.agent import BaseAgent, SeededAgent, TaskAgent
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.envs.toy.arith import evaluate


def tool_call(name: str, **arguments: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def _turn(messages: list[Message]) -> int:
    return sum(1 for m in messages if m.role == "assistant")


class CalculatorOracle(BaseAgent):
    """Evaluates each of the solution's operations with the calculator, then answers."""

    name = "oracle"

    def __init__(self, seed: int | None = None, task: Task | None = None):
        self.task = task

    def episode(self, task: Task, seed: int | None) -> CalculatorOracle:
        return CalculatorOracle(seed, task)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self.task is None:
            raise RuntimeError("the oracle needs the task: use agent.episode(task, seed) (rollout does this)")
        steps = self.task.hidden["steps"]
        k = _turn(messages)
        if k < len(steps):
            return f"Step {k + 1}: " + tool_call("calculator", expression=steps[k])
        return "Done computing. " + tool_call("answer", value=self.task.hidden["answer"])


class RandomAgent(SeededAgent):
    """Random outputs: garbage text, malformed JSON, random calculator calls and random answers."""

    name = "random"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        r = self.rng.random()
        a, b = int(self.rng.integers(1, 100)), int(self.rng.integers(1, 100))
        if r < 0.2:
            return "".join(self.rng.choice(list('abc xyz{}[]":,0123456789'), size=int(self.rng.integers(0, 40))))
        if r < 0.3:
            return '<tool_call>{"name": "calculator", "arguments": {"expression": </tool_call>'
        if r < 0.75:
            op = str(self.rng.choice(["+", "-", "*", "/"]))
            return tool_call("calculator", expression=f"{a} {op} {b}")
        return tool_call("answer", value=a * b)


class GuessingAgent(BaseAgent):
    """Answers at once with the sum of the numbers in the problem: no calculator, usually wrong."""

    name = "guess"

    def __init__(self, seed: int | None = None):
        pass

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        text = next((m.content or "" for m in messages if m.role == "user"), "")
        numbers = [int(w.strip(".,")) for w in text.split() if w.strip(".,").isdigit()]
        return tool_call("answer", value=sum(numbers))


class NearMissAgent(TaskAgent):
    """The audit's ``partial``: works every operation with the calculator but slips on the last one (types
    ``+ 1`` after it), then answers the slipped result it computed: a careful work-up with a near-miss answer."""

    name = "near_miss"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        steps = self.episode_task().hidden["steps"]
        slipped = f"{steps[-1]} + 1"
        k = _turn(messages)
        if k < len(steps) - 1:
            return tool_call("calculator", expression=steps[k])
        if k == len(steps) - 1:
            return tool_call("calculator", expression=slipped)
        return tool_call("answer", value=evaluate(slipped))


class WrongAnswerAgent(TaskAgent):
    """The audit's ``failed``: works every operation but the last with the calculator, then answers a number it
    never computed (the first number above the answer that is none of the solution's values): the protocol
    completed, the outcome wrong."""

    name = "wrong_answer"

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        task = self.episode_task()
        steps = task.hidden["steps"]
        k = _turn(messages)
        if k < len(steps) - 1:
            return tool_call("calculator", expression=steps[k])
        values = {evaluate(expr) for expr in steps}
        wrong = task.hidden["answer"] + 1
        while wrong in values:
            wrong += 1
        return tool_call("answer", value=wrong)
