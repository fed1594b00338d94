"""The default physician rubric ranks the oracle above the shotgun and the guesser, even a right guesser."""

import asyncio
import statistics

import pytest

import rubricgym
from rubricgym.rewards import CheckJudge, ProcessRewardModel, Rubric


def _scores(env_id: str, tasks, agents=("oracle", "shotgun", "guesser")):
    cls = rubricgym.spec(env_id).load()
    prm = ProcessRewardModel(cls.default_rubric(), [CheckJudge()])
    out, right = {}, []
    for name in agents:
        res = asyncio.run(rubricgym.rollout_many(env_id, cls.agents()[name](), tasks, progress=False))
        assert res.ok
        breakdowns = asyncio.run(prm.score_many(res.trajectories))
        assert all(b.valid for b in breakdowns)
        out[name] = [b.total for b in breakdowns]
        if name == "guesser":
            right = [bool(t.steps[-1].info.get("correct")) for t in res.trajectories]
    return out, right


def _check_ranking(n: int) -> None:
    tasks = rubricgym.TaskSet.generate("clinical-v0", n, seed=11)
    s, right = _scores("clinical-v0", tasks)
    # the outcome gate leaves (1 - gamma) = 0.4 of the range to the work-up when both diagnoses are right: the
    # shotgun's worse work-up still loses on every task, by a smaller margin than under a plain weighted sum
    for other, margin in (("shotgun", 0.05), ("guesser", 0.1)):
        margins = [a - b for a, b in zip(s["oracle"], s[other], strict=True)]
        assert min(margins) > margin, (other, min(margins))
    lucky = [a - b for a, b, r in zip(s["oracle"], s["guesser"], right, strict=True) if r]
    assert lucky and min(lucky) > 0.1  # a right guess without history or exams still loses clearly
    assert statistics.mean(s["oracle"]) > 0.95


def test_oracle_beats_shotgun_and_guesser_on_every_task():
    _check_ranking(40)


@pytest.mark.slow
def test_oracle_beats_shotgun_and_guesser_over_200_tasks():
    _check_ranking(200)


def test_cost_aware_rubric_widens_the_gap_to_the_shotgun():
    tasks = rubricgym.TaskSet.generate("clinical-cost-v0", 15, seed=3)
    cost, _ = _scores("clinical-cost-v0", tasks, ("oracle", "shotgun"))
    plain_tasks = [t.model_copy(update={"env_id": "clinical-v0"}) for t in tasks]
    plain, _ = _scores("clinical-v0", plain_tasks, ("oracle", "shotgun"))
    gap = statistics.mean(cost["oracle"]) - statistics.mean(cost["shotgun"])
    assert gap > statistics.mean(plain["oracle"]) - statistics.mean(plain["shotgun"])
    rubric = Rubric.model_validate(rubricgym.spec("clinical-cost-v0").load().default_rubric())
    assert {"cost", "invasiveness"} <= {c.id for c in rubric.criteria}


def test_step_checks_flag_process_faults(kb):
    from rubricgym.envs.clinical.checks import ALL

    from .conftest import call, start

    env = rubricgym.make("clinical-v0")
    start(env, kb, "acute_appendicitis")
    env.step(call("order", exam="CT abdomen"))  # invasive, no history, no reason
    env.step(call("order", exam="CT abdomen", impression="appendicitis", reason="confirm appendicitis"))
    env.step(call("diagnose", diagnosis="appendicitis", reason="CT abdomen shows it; troponin normal"))
    traj = env.trajectory()
    assert not ALL["order_justified"](traj, 0).met and ALL["order_justified"](traj, 1).met
    assert not ALL["history_before_invasive"](traj, 0).met
    assert not ALL["no_repeat_exam"](traj, 1).met
    assert not ALL["reasoning_consistent"](traj).met  # cites a troponin never ordered
    assert not ALL["history_taken"](traj).met and ALL["diagnosis_correct"](traj).met
    assert ALL["key_exams_ordered"](traj).score == 0.5  # CT, but no CBC


def test_llm_rubric_judges_the_reasoning_with_an_llm():
    cls = rubricgym.spec("clinical-v0").load()
    rubric = Rubric.model_validate(cls.llm_rubric())
    reasoning = rubric.criterion("reasoning")
    assert (
        reasoning.check is None
        and reasoning.judged_by == "llm"
        and "cites results never obtained" in (reasoning.judge or "")
    )
    assert Rubric.model_validate(cls.default_rubric()).criterion("reasoning").check == "reasoning_consistent"
