"""``rubricgym demo --score-only`` never scores an errored verdict as 0 (issue 9, item 15)."""

from __future__ import annotations

import asyncio

from rich.console import Console

from rubricgym.core.rollout import rollout_many
from rubricgym.core.tasks import TaskSet
from rubricgym.demo import MASKED, TOTAL, criterion_means, score_rows
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards import CheckJudge, ProcessRewardModel


def test_an_errored_total_is_masked_not_zero():
    tasks = TaskSet.generate("toy-calculator-v0", 2, seed=0)
    trajs = asyncio.run(rollout_many("toy-calculator-v0", CalculatorOracle(), tasks, progress=False)).trajectories
    prm = ProcessRewardModel(
        {"id": "g", "criteria": [{"id": "ok", "text": "correct", "check": "final_answer_correct"}]}, [CheckJudge()]
    )
    good, other = (asyncio.run(prm.score(t)) for t in trajs)
    errored = other.model_copy(update={"total": None})  # what a failed judge verdict leaves
    rows = score_rows(trajs, [good, errored])
    assert TOTAL in rows[0] and TOTAL not in rows[1] and rows[1][MASKED] == 1.0
    console = Console(record=True, width=200)
    console.print(criterion_means({"oracle": rows}, "t"))
    text = console.export_text()
    line = next(ln for ln in text.splitlines() if TOTAL in ln)
    assert f"{good.total:.3f}" in line  # the mean over the valid total only, not (total + 0) / 2
    assert "1" in next(ln for ln in text.splitlines() if MASKED in ln)
