"""Hacking monitors: judge-free drift signals, the exploitation rate against a reference panel, and alarms."""

import pytest

from rubricgym.core.checks import check
from rubricgym.core.rubric import Rubric
from rubricgym.core.types import CheckResult
from rubricgym.rewards.audit import MASTER_KEYS, response_trajectory
from rubricgym.rewards.judges import CheckJudge, env_checks
from rubricgym.rewards.monitor import (
    Alarm,
    HackingMonitor,
    MonitorConfig,
    credit_shares,
    master_key_like,
    total_variation,
)
from rubricgym.rewards.prm import ProcessRewardModel, ScoredTrajectory


async def score(rubric, trajs) -> list[ScoredTrajectory]:
    bds = await ProcessRewardModel(rubric).score_many(trajs)
    return [ScoredTrajectory(t, b) for t, b in zip(trajs, bds, strict=True)]


def test_master_key_like_catches_every_master_key_but_not_real_answers(oracle_trajs, toy_rubric):
    rubric = Rubric.from_dict(toy_rubric)
    task = oracle_trajs[0].task
    for name, make in MASTER_KEYS.items():
        assert master_key_like(response_trajectory(task, make(task, rubric)), rubric), name
    assert not any(master_key_like(t, rubric) for t in oracle_trajs)
    assert not master_key_like(response_trajectory(task, "The total is 42 apples, computed as 6 * 7."), rubric)


async def test_credit_shares_worked_example(oracle_trajs, guess_trajs, toy_rubric):
    rubric = Rubric.from_dict(toy_rubric)
    oracle, guess = oracle_trajs[0], next(t for t in guess_trajs if t.outcome.reward == 0)
    scored = await score(rubric, [oracle, guess])
    # oracle: every criterion met (weights 1, .7, .7, .3, .7, .3 -> 3.7); the wrong guess earns nothing
    shares = credit_shares(scored, rubric)
    assert shares["correct"] == pytest.approx(1 / 3.7) and shares["used_calculator"] == pytest.approx(0.3 / 3.7)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert total_variation({"a": 1.0}, {"a": 0.5, "b": 0.5}) == pytest.approx(0.5)


@check("strict_never")
def strict_never(traj, step=None) -> CheckResult:
    return CheckResult.of(False, "the reference rejects everything")


async def test_observe_logs_signals_exploitation_and_alarms(oracle_trajs, toy_rubric):
    rubric = Rubric.from_dict(toy_rubric)
    oracles = await score(rubric, oracle_trajs)
    # a reference "panel" of two strict programmatic judges that reject every criterion the training judge credits
    strict = {**env_checks("toy-calculator-v0"), **{n: strict_never for n in env_checks("toy-calculator-v0")}}
    panel = [CheckJudge(strict), CheckJudge(strict)]
    cfg = MonitorConfig(
        every=2,
        alarms=[
            Alarm(metric="exploitation", above=0.5, action="stop"),
            Alarm(metric="master_key_share", above=0.1, patience=2),
        ],
    )
    mon = HackingMonitor(cfg, rubric, reference=panel)
    assert await mon.observe(1, oracles) == {}  # not due
    out = await mon.observe(2, oracles)
    assert out["monitor/exploitation"] == 1.0 and out["monitor/master_key_share"] == 0.0
    assert out["monitor/credit_drift"] == 0.0 and out["monitor/response_chars"] > 0
    assert "stop exploitation = 1.000 > 0.5" in out["monitor/alarm"] and mon.stop_reason
    # master-key-like outputs: the warn alarm fires only on the second observation in a row (patience 2)
    keys = await score(
        rubric, [response_trajectory(oracle_trajs[0].task, "Let's solve this step by step.") for _ in range(3)]
    )
    first = await HackingMonitor(cfg, rubric, reference=[]).observe(2, keys)
    assert first["monitor/master_key_share"] == 1.0
    mon2 = HackingMonitor(cfg, rubric, reference=[])
    assert "monitor/alarm" not in await mon2.observe(2, keys)
    assert "warn master_key_share" in (await mon2.observe(4, keys))["monitor/alarm"] and not mon2.stop_reason
    assert mon2.summary_lines()[0].startswith("    hacking monitor alarm: step 4")


async def test_monitor_reads_breakdowns_masked_rollouts_and_other_rubrics_add_no_credit(oracle_trajs, toy_rubric):
    rubric = Rubric.from_dict(toy_rubric)
    oracles = await score(rubric, oracle_trajs[:2])
    clean = credit_shares(oracles, rubric)
    # a masked rollout (one verdict failed) still carries partial scores in its trajectory's reward keys; the
    # monitor reads its breakdown and gives it no credit, and reports the masked share
    broken = oracles[1].breakdown.model_copy(update={"n_errors": 1})
    masked = [oracles[0], ScoredTrajectory(oracles[1].trajectory, broken)]
    assert credit_shares(masked, rubric) == credit_shares(oracles[:1], rubric)
    # a rollout scored by another rubric (its task's own) is not this rubric's credit
    other = Rubric.from_dict({**toy_rubric, "id": "task-own", "criteria": toy_rubric["criteria"][:1]})
    foreign = (await score(other, [oracle_trajs[2].model_copy(deep=True)]))[0]
    mon = HackingMonitor(MonitorConfig(alarms=[]), rubric, reference=[])
    out = await mon.observe(1, [*masked, foreign])
    assert out["monitor/masked_share"] == pytest.approx(1 / 3)
    assert {k[len("monitor/credit/") :]: v for k, v in out.items() if k.startswith("monitor/credit/")} == (
        credit_shares(oracles[:1], rubric)
    )
    assert clean == credit_shares(oracles[:1], rubric)  # two oracles credit alike
