"""The outcome-consistency audit (issue 39): on one task no failed episode's rubric total exceeds a solved one's,
and chance-level behaviour (random, doing nothing, activity without progress) earns at most 0.1."""

from __future__ import annotations

import pytest

from rubricgym.core.registry import register, unregister
from rubricgym.core.types import ToolSpec
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.rewards.consistency import (
    ActivityAgent,
    ConsistencyReport,
    Episode,
    audit_consistency,
    example_arguments,
    players,
)
from rubricgym.rewards.shortcuts import play

ENV = "toy-calculator-v0"

UNGATED_TOY_RUBRIC = {
    # the toy rubric of v2 (before issue 39): a weighted sum, so a wrong answer taken from calculator calls earns
    # grounded + clean + used_calculator + valid_step and outranks a lucky correct guess
    "id": "toy-calculator",
    "version": "2",
    "criteria": [
        {"id": "correct", "text": "Correct.", "level": "essential", "scope": "trajectory", "stage": "answer",
         "check": "final_answer_correct"},
        {"id": "grounded", "text": "Grounded.", "level": "important", "scope": "trajectory", "stage": "answer",
         "check": "answer_grounded"},
        {"id": "clean", "text": "Clean.", "level": "important", "scope": "trajectory", "check": "no_invalid_actions",
         "applies_if": "tool:calculator"},
        {"id": "used_calculator", "text": "Calc.", "level": "optional", "scope": "trajectory", "stage": "compute",
         "check": "used_calculator"},
        {"id": "valid_step", "text": "Valid.", "level": "important", "scope": "step", "check": "step_valid",
         "applies_if": "tool:calculator"},
        {"id": "progress", "text": "Progress.", "level": "optional", "scope": "step", "stage": "compute",
         "check": "step_progress"},
    ],
}  # fmt: skip


def _episode(task: str, agent: str, total: float | None, solved: bool, role: str = "failed") -> Episode:
    return Episode(task_id=task, agent=agent, role=role, total=total, reward=float(solved), solved=solved)  # type: ignore[arg-type]


def test_breaches_pair_each_failed_episode_with_each_solved_one_it_outranks_on_its_task():
    report = ConsistencyReport(
        env_id="e",
        rubric_id="r",
        rubric_hash="h",
        method="rar",
        tasks=2,
        criteria=3,
        episodes=[
            _episode("a", "oracle", 0.9, True, "oracle"),
            _episode("a", "lucky", 0.5, True, "shotgun"),
            _episode("a", "busy", 0.6, False),  # beats lucky (0.5), not the oracle
            _episode("a", "tie", 0.5, False),  # a tie is no breach
            _episode("a", "broken", None, False),  # no total: never a breach
            _episode("b", "busy", 0.95, False),  # beats the oracle of task a, but not on the same task
            _episode("b", "oracle", 1.0, True, "oracle"),
            _episode("b", "rnd", 0.3, False, "chance"),
            _episode("b", "idle", 0.0, False, "chance"),
        ],
    )
    (breach,) = report.breaches()
    assert (breach.task_id, breach.failed_agent, breach.failed_total) == ("a", "busy", 0.6)
    assert (breach.solved_agent, breach.solved_total) == ("lucky", 0.5)
    assert report.problems() == [
        "task a: failed 'busy' earns 0.600 > solved 'lucky' 0.500",
        "chance-level 'rnd' averages 0.300 > 0.1",  # per agent: 'idle' at 0.0 does not hide it
    ]
    assert not report.ok
    roles = {r.role: r for r in report.roles()}
    assert roles["oracle"].mean_total == pytest.approx(0.95) and roles["oracle"].solve_rate == 1.0
    assert roles["failed"].mean_total == pytest.approx((0.6 + 0.5 + 0.95) / 3)  # the None total is left out
    assert roles["chance"].mean_total == pytest.approx(0.15) and roles["chance"].solve_rate == 0.0
    assert report.table_rows()[0] == ("oracle", "oracle", "0.950", "100%")
    assert "1 breach(es) over 2 task(s)" in report.line()
    assert report.model_copy(update={"criteria": 0}).ok  # nothing judgeable: nothing to flag


async def test_the_toy_default_rubric_is_outcome_consistent_and_ranks_work_within_an_outcome():
    report = await audit_consistency(ENV, n_tasks=4)
    assert report.ok, report.problems()
    assert report.method == "swe_trace" and not report.skipped_criteria and report.errors == 0
    means = {r.role: r.mean_total for r in report.roles()}
    assert means["oracle"] == 1.0
    assert means["oracle"] > means["partial"] > means["failed"] > means["chance"]  # near miss > wrong answer > none
    assert means["chance"] == 0.0  # random, give up, activity, empty
    assert {r.role: r.solve_rate for r in report.roles()}["partial"] == 0.0
    solved = [e.total for e in report.episodes if e.solved]
    failed = [e.total for e in report.episodes if not e.solved]
    assert min(solved) >= 0.7 > 0.3 >= max(failed)  # the gate: gamma 0.7, every solve above every failure


async def test_the_ungated_toy_rubric_is_flagged_with_the_breach_pair():
    report = await audit_consistency(ENV, n_tasks=2, rubric=UNGATED_TOY_RUBRIC)
    # on one task the guesser's lucky correct answer (no calculator: 0.5) is outranked by two wrong answers: the
    # near miss and the wrong answer after real work
    pairs = [(b.failed_agent, round(b.failed_total, 3), b.solved_agent, b.solved_total) for b in report.breaches()]
    assert pairs == [
        ("outcome:partial", 0.689, "guess", 0.5),
        ("outcome:failed", 0.541, "guess", 0.5),
    ], report.as_json()
    assert all(b.line() in report.problems() for b in report.breaches())
    assert "task " + report.breaches()[0].task_id + ": failed 'outcome:partial' earns 0.689 > solved 'guess' 0.500" in (
        report.problems()
    )
    assert "chance-level 'probe:activity' averages 0.459 > 0.1" in report.problems()  # computing, answering nothing
    assert any(p.startswith("chance-level 'random' averages") for p in report.problems())


async def test_a_gated_rubric_that_pays_for_activity_trips_the_chance_level_threshold():
    pays_activity = {
        "id": "gated-but-busy",
        "criteria": [
            {"id": "correct", "text": "Correct.", "level": "essential", "check": "final_answer_correct"},
            {"id": "used_calculator", "text": "Calc.", "level": "important", "check": "used_calculator"},
        ],
        "aggregation": {"method": "swe_trace", "outcome_check": "correct", "gamma": 0.6},
    }
    report = await audit_consistency(ENV, n_tasks=2, rubric=pays_activity)
    assert not report.breaches()  # the gate holds...
    assert report.agent_means()["probe:activity"] == pytest.approx(0.4)  # ...but calling a tool pays (1 - 0.6)
    assert "chance-level 'probe:activity' averages 0.400 > 0.1" in report.problems()
    assert (await audit_consistency(ENV, n_tasks=2, rubric=pays_activity, chance_max=0.5)).ok


def test_players_take_the_envs_outcome_agents_and_its_own_activity_over_the_generic_probe():
    names = {name: role for name, role, _ in players(CalculatorEnv)}
    assert names == {
        "oracle": "oracle",
        "random": "chance",
        "guess": "baseline",
        "teacher": "teacher",
        "outcome:partial": "partial",
        "outcome:failed": "failed",
        "probe:give_up": "chance",
        "probe:activity": "chance",
        "probe:wrong_submit": "shotgun",
        "probe:shotgun": "shotgun",
    }

    class OwnActivity(CalculatorEnv):
        env_id = "consistency-own-activity-v0"
        outcome_agents = {"activity": "rubricgym.envs.toy.agents:RandomAgent"}

    got = {name: role for name, role, _ in players(OwnActivity)}
    assert got["outcome:activity"] == "chance" and "probe:activity" not in got

    class Typo(CalculatorEnv):
        env_id = "consistency-typo-v0"
        outcome_agents = {"partal": "rubricgym.envs.toy.agents:NearMissAgent"}

    with pytest.raises(ValueError, match=r"unknown role\(s\) \['partal'\]: use \['partial', 'failed', 'activity'\]"):
        players(Typo)


async def test_an_env_activity_agent_is_played_and_env_kwargs_reach_the_episodes():
    class OwnActivity(CalculatorEnv):
        env_id = "consistency-own-activity-v0"
        outcome_agents = {"activity": "rubricgym.envs.toy.agents:RandomAgent"}

    register(OwnActivity.env_id, OwnActivity, replace=True)
    try:
        report = await audit_consistency(OwnActivity.env_id, n_tasks=2, env_kwargs={"max_steps": 2})
    finally:
        unregister(OwnActivity.env_id)
    agents = {e.agent for e in report.episodes}
    assert "outcome:activity" in agents and "probe:activity" not in agents
    assert report.tasks == 2 and len(report.episodes) == 2 * (len(agents))
    oracle = [e for e in report.episodes if e.agent == "oracle"]
    assert oracle and not any(e.solved for e in oracle)  # max_steps 2: too few to compute 2+ operations and answer


async def test_example_arguments_and_the_activity_probe_call_tools_with_well_formed_values():
    tool = ToolSpec(
        name="search",
        description="d",
        parameters={
            "type": "object",
            "required": ["q", "k", "mode", "tags"],
            "properties": {
                "q": {"type": "string", "examples": ["capital of France"]},
                "k": {"type": ["integer", "null"]},
                "mode": {"enum": ["fast", "deep"]},
                "tags": {"type": "array"},
                "unused": {"type": "string"},
            },
        },
    )
    assert example_arguments(tool) == {"q": "capital of France", "k": 1, "mode": "fast", "tags": []}
    env = CalculatorEnv()
    task = env.task_set(1, seed=0, split="test")[0]
    traj = await play(env, ActivityAgent(), task, 0, "probe:activity")
    calls = [(s.action.tool_call.name, s.action.tool_call.arguments) for s in traj.steps if s.action.tool_call]
    assert calls == [("calculator", {"expression": "17 * 23 - 4"})] * 4 + [("answer", {"value": 0})]  # no answer
    assert all(s.tool_error is None for s in traj.steps) and traj.outcome.terminated
