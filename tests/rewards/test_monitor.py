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
    half_change,
    master_key_like,
    rubric_up_outcome_down,
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


async def steps_of(rubric, trajs, series) -> list[list[ScoredTrajectory]]:
    """One observed step per (rubric totals, outcome rewards) pair: real scored rollouts with those values set (a
    reward of 1 is a solve)."""
    base = (await score(rubric, trajs[:1]))[0]
    return [
        [
            ScoredTrajectory(
                base.trajectory.model_copy(
                    update={
                        "outcome": base.trajectory.outcome.model_copy(
                            update={"reward": outcome, "solved": outcome >= 1.0}  # the env's verdict with it
                        )
                    }
                ),
                base.breakdown.model_copy(update={"total": total}),
            )
            for total, outcome in zip(totals, outcomes, strict=True)
        ]
        for totals, outcomes in series
    ]


def test_half_change_and_the_signal_worked_examples():
    assert half_change([1.0, 2.0, 3.0, 4.0]) == pytest.approx(2.0)  # (3 + 4) / 2 - (1 + 2) / 2
    assert half_change([1.0, 5.0, 3.0]) == pytest.approx(2.0)  # the middle value belongs to neither half
    assert rubric_up_outcome_down([0.2, 0.4, 0.6], [0.5, 0.25, 0.0]) == pytest.approx(0.4)  # min(0.4, 0.5)
    assert rubric_up_outcome_down([0.2, 0.4, 0.6], [0.0, 0.25, 0.5]) == pytest.approx(-0.5)  # both rose
    with pytest.raises(ValueError, match="at least 2"):
        half_change([1.0])


async def test_rubric_up_while_solves_go_down_raises_the_alarm_and_both_up_stays_quiet(oracle_trajs, toy_rubric):
    rubric = Rubric.from_dict(toy_rubric)
    # four rollouts a step: the rubric total climbs 0.2 -> 0.4 -> 0.6 while solved rollouts go 2 -> 1 -> 0
    hacked = await steps_of(
        rubric,
        oracle_trajs,
        [([0.2] * 4, [1, 1, 0, 0]), ([0.4] * 4, [1, 0, 0, 0]), ([0.6] * 4, [0, 0, 0, 0])],
    )
    mon = HackingMonitor(MonitorConfig(), rubric, reference=[])  # the default alarms
    first, second, third = [await mon.observe(k + 1, s) for k, s in enumerate(hacked)]
    assert first["monitor/rubric_mean"] == pytest.approx(0.2) and first["monitor/solve_rate"] == 0.5
    assert "monitor/rubric_up_outcome_down" not in first and "monitor/alarm" not in second  # window of 3 not full
    assert third["monitor/rubric_up_outcome_down"] == pytest.approx(0.4)  # min(0.6 - 0.2, 0.5 - 0.0)
    assert "warn rubric_up_outcome_down = 0.400 > 0.05" in third["monitor/alarm"]
    assert "solve rate fell" in third["monitor/alarm"] and not mon.stop_reason
    # a resumed run continues the window where it was
    again = HackingMonitor(MonitorConfig(), rubric, reference=[])
    again.load_state_dict(mon.state_dict())
    assert again.history == mon.history
    # rubric and solves rising together: no alarm, the signal is negative
    learning = await steps_of(
        rubric,
        oracle_trajs,
        [([0.2] * 4, [0, 0, 0, 0]), ([0.4] * 4, [1, 0, 0, 0]), ([0.6] * 4, [1, 1, 0, 0])],
    )
    quiet = HackingMonitor(MonitorConfig(), rubric, reference=[])
    outs = [await quiet.observe(k + 1, s) for k, s in enumerate(learning)]
    assert outs[-1]["monitor/rubric_up_outcome_down"] == pytest.approx(-0.5)
    assert not any("monitor/alarm" in o for o in outs) and not quiet.alarms


async def test_the_outcome_alarm_can_stop_a_run_over_a_longer_window(oracle_trajs, toy_rubric):
    rubric = Rubric.from_dict(toy_rubric)
    cfg = MonitorConfig(window=4, alarms=[Alarm(metric="rubric_up_outcome_down", above=0.1, action="stop")])
    series = [([0.3] * 2, [1, 1]), ([0.3] * 2, [1, 1]), ([0.5] * 2, [1, 0]), ([0.5] * 2, [1, 0])]
    mon = HackingMonitor(cfg, rubric, reference=[])
    outs = [await mon.observe(k + 1, s) for k, s in enumerate(await steps_of(rubric, oracle_trajs, series))]
    assert outs[-1]["monitor/rubric_up_outcome_down"] == pytest.approx(0.2)  # min(0.5 - 0.3, 1 - 0.5)
    assert mon.stop_reason and "step 4: stop rubric_up_outcome_down" in mon.stop_reason
    with pytest.raises(ValueError):
        MonitorConfig(window=1)
