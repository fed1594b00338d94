"""A verifiers (v1) taskset with a tool: a ``vf.Toolset`` whose ``multiply`` the agent may call, and two weighted
rewards (the right product; the tool was used) — a test data module (``verifiers:rg_vf_tools``)."""

from __future__ import annotations

from collections.abc import Iterator

import verifiers.v1 as vf

PAIRS = [(123, 457), (88, 91), (301, 17)]


class Calculator(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "calc"

    @vf.tool
    async def multiply(self, a: int, b: int) -> str:
        """Multiply two integers and return the product."""
        return str(a * b)


class MulData(vf.TaskData):
    answer: str


class MulTask(vf.Task[MulData, vf.State, vf.TaskConfig]):
    @classmethod
    def toolsets(cls, config: vf.TaskConfig) -> list[vf.Toolset]:
        return [Calculator(vf.ToolsetConfig())]

    @vf.reward(weight=0.75)
    async def correct(self, task: MulData, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == task.answer)

    @vf.reward(weight=0.25)
    async def used_calculator(self, trace: vf.Trace) -> float:
        return float(any(m.name == "calc_multiply" for m in trace.tool_messages))


class MulTaskset(vf.Taskset[MulTask, vf.TasksetConfig]):
    def load(self) -> Iterator[MulTask]:
        for a, b in PAIRS:
            prompt = f"Multiply {a} by {b} with the calculator, then answer with the product alone."
            yield MulTask(MulData(prompt=prompt, answer=str(a * b)), self.config.task)


__all__ = ["MulTaskset"]
