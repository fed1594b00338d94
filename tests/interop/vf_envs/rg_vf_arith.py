"""A single-turn verifiers (v1) taskset over an in-memory dataset, scored by exact match (a test data module:
``verifiers:rg_vf_arith`` once this folder is on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Iterator

import verifiers.v1 as vf

ROWS = [
    ("What is fifteen times seven? Reply with the number only.", "105"),
    ("What is eighty-one times three? Reply with the number only.", "243"),
    ("What is nineteen times eighteen? Reply with the number only.", "342"),
    ("What is thirty-six squared? Reply with the number only.", "1296"),
]


class ArithData(vf.TaskData):
    answer: str
    """The exact reply that earns the reward."""


class ArithTask(vf.Task[ArithData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def exact_match(self, task: ArithData, trace: vf.Trace) -> float:
        return float(trace.last_reply.strip() == task.answer)


class ArithConfig(vf.TasksetConfig):
    n: int = len(ROWS)


class ArithTaskset(vf.Taskset[ArithTask, ArithConfig]):
    def load(self) -> Iterator[ArithTask]:
        for prompt, answer in ROWS[: self.config.n]:
            yield ArithTask(ArithData(prompt=prompt, answer=answer), self.config.task)


__all__ = ["ArithTaskset"]
