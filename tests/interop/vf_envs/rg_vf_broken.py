"""A verifiers (v1) taskset whose reward function fails (its judge is down): the failure must reach rubricgym as
an error, never as a score of 0 — a test data module (``verifiers:rg_vf_broken``)."""

from __future__ import annotations

from collections.abc import Iterator

import verifiers.v1 as vf


class BrokenData(vf.TaskData):
    answer: str


class BrokenTask(vf.Task[BrokenData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def judged(self, task: BrokenData, trace: vf.Trace) -> float:
        raise RuntimeError("the judge endpoint is down")


class BrokenTaskset(vf.Taskset[BrokenTask, vf.TasksetConfig]):
    def load(self) -> Iterator[BrokenTask]:
        yield BrokenTask(BrokenData(prompt="Name the capital of France.", answer="Paris"), self.config.task)


__all__ = ["BrokenTaskset"]
