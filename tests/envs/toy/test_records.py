"""The calculator's checks read typed step records: a renamed info key fails loudly, never reads as unmet."""

import asyncio

import pytest

import rubricgym
from rubricgym.core.steprecord import RecordError
from rubricgym.envs.toy.agents import CalculatorOracle
from rubricgym.rewards.applicability import applicability
from rubricgym.rewards.prm import ProcessRewardModel

ENV = "toy-calculator-v0"


def test_a_renamed_info_key_is_an_error_not_an_unmet_check():
    task = rubricgym.TaskSet.generate(ENV, 1, seed=0)[0]
    traj = asyncio.run(rubricgym.rollout_many(ENV, CalculatorOracle(), [task], progress=False)).trajectories[0]
    cls = rubricgym.spec(ENV).load()
    grounded = cls.checks()["answer_grounded"]
    assert grounded(traj).met  # the unmodified oracle: grounded, as before

    broken = traj.model_copy(deep=True)
    last_calc = [s for s in broken.steps if s.action.tool_call and s.action.tool_call.name == "calculator"][-1]
    last_calc.info["result"] = last_calc.info.pop("value")  # the answer's value, under another name
    with pytest.raises(RecordError, match=rf"{ENV}: step {last_calc.index}, tool 'calculator'.*'value' is missing"):
        grounded(broken)

    verdicts = asyncio.run(ProcessRewardModel(cls.default_rubric()).score(broken)).verdicts
    grounded_verdict = next(v for v in verdicts if v.criterion_id == "grounded")
    assert grounded_verdict.status == "error" and "'result' is not part of the record" in (grounded_verdict.error or "")


def test_edited_reads_the_envs_records_and_an_env_it_cannot_find_is_an_error():
    task = rubricgym.TaskSet.generate(ENV, 1, seed=0)[0]
    traj = asyncio.run(rubricgym.rollout_many(ENV, CalculatorOracle(), [task], progress=False)).trajectories[0]
    never = applicability(["edited"], traj, None, lambda *_: "no checks")
    assert not never.applies and never.error is None  # the calculator edits no file
    lost = traj.model_copy(update={"task": traj.task.model_copy(update={"env_id": "no-such-env-v0"})})
    error = applicability(["edited"], lost, None, lambda *_: "no checks").error or ""
    assert "condition 'edited'" in error and "no-such-env-v0" in error and "cannot be loaded" in error
