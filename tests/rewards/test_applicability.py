"""Not-applicable verdicts: worked examples for every aggregator with N/A entries, ``applies_if`` in the process
reward model (built-ins, env checks, negation), checks that return N/A, and an LLM judge that answers N/A."""

import pytest
from pydantic import ValidationError

from rubricgym.core.checks import check
from rubricgym.core.rubric import Criterion, Rubric, Verdict
from rubricgym.core.types import CheckResult, Trajectory
from rubricgym.rewards.aggregate import (
    c_grpo_reward,
    carr_rubric_reward,
    rar_explicit,
    renorm_step_rewards,
    signed_reward,
    swe_trace_reward,
    weighted_mean,
)
from rubricgym.rewards.audit import response_trajectory
from rubricgym.rewards.judges import CheckJudge, env_checks
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.panel import PanelJudge
from rubricgym.rewards.parse import parse_verdict
from rubricgym.rewards.prm import ProcessRewardModel

# ---- aggregators: None is N/A, in neither numerator nor denominator -------------------------------------------


def test_rar_with_na_worked_example():
    # essential met, important N/A, optional unmet, pitfall N/A: (1.0*1 + 0.3*0) / (1.0 + 0.3)
    assert rar_explicit([1, None, 0, None], [1.0, 0.7, 0.3, 0.9]) == pytest.approx(1 / 1.3)
    # all N/A: nothing earned (not a vacuous 1)
    assert rar_explicit([None, None], [1.0, 0.9]) == 0.0
    assert weighted_mean([None, None], [1.0, 0.9]) is None  # the roll-up says "nothing to judge"


def test_signed_with_na_worked_example():
    # +1.0 met, -0.9 pitfall N/A, +0.7 unmet, -0.5 pitfall triggered (g=1):
    # [1.0*1 + 0.7*0 + 0.5*(1-1)] / (1.0 + 0.7 + 0.5) = 1 / 2.2   (the N/A 0.9 is in neither sum)
    assert signed_reward([1, None, 0, 1], [1.0, -0.9, 0.7, -0.5]) == pytest.approx(1 / 2.2)
    # a do-nothing trajectory: the deliverable unmet, both pitfalls N/A -> 0, not 0.9 / 1.9
    assert signed_reward([0, None, None], [1.0, -0.9, 0.9]) == 0.0


def test_renorm_with_na_worked_example():
    # process [0.8, N/A, 0.2], outcome 1: r = [0.3 + 0.5, 0 + 0.5, -0.3 + 0.5]
    assert renorm_step_rewards([0.8, None, 0.2], 1.0) == pytest.approx([0.8, 0.5, 0.2])
    assert renorm_step_rewards([None], 0.0) == pytest.approx([-0.5])


def test_swe_trace_with_na_worked_example():
    # s_prm over applicable: (0.7*1 + 0.7*0) / 1.4 = 0.5 (pitfalls N/A); pass: 0.7 + 0.3*0.5; fail: 0.3*0.5
    scores, weights = [1, 0, None, None], [0.7, 0.7, 0.9, 0.9]
    assert swe_trace_reward(scores, weights, True, 0.7) == pytest.approx(0.85)
    assert swe_trace_reward(scores, weights, False, 0.7) == pytest.approx(0.15)
    # nothing done: no process criterion applies, tests fail -> 0, whatever the pitfalls would have said
    assert swe_trace_reward([None, None], [0.9, 0.9], False, 0.7) == 0.0


def test_carr_with_na_worked_example():
    # statements E0-E1 supported, E1-E2 N/A (dropped from graph and denominator), E2-E3 supported but cut off:
    # reachable 1 of 2 applicable
    rubrics = [["E0", "E1"], ["E1", "E2"], ["E2", "E3"]]
    assert carr_rubric_reward(rubrics, [True, None, True]) == pytest.approx(1 / 2)
    assert carr_rubric_reward(rubrics, [None, None, None]) == 0.0
    # C-GRPO: an N/A chain leaves the outcome alone; a wrong answer still gets 0
    assert c_grpo_reward(1.0, None, 0.3) == 1.0
    assert c_grpo_reward(1.0, 0.5, 0.3) == pytest.approx(0.85)
    assert c_grpo_reward(0.0, None, 0.3) == 0.0


# ---- the Verdict model ------------------------------------------------------------------------------------------


def test_verdict_statuses():
    assert Verdict(criterion_id="c", score=1.0, met=True).status == "met"
    na = Verdict.not_applicable("c", "nothing edited")
    assert na.ok and not na.scored and na.status == "n/a" and na.score is None
    assert Verdict.failed("c", "boom").status == "error"
    with pytest.raises(ValidationError, match="not-applicable"):
        Verdict(criterion_id="c", applicable=False, score=0.0, met=False)
    assert Verdict.model_validate_json(na.model_dump_json()) == na


def test_applies_if_schema_and_hash():
    c = Criterion(id="p", text="No test edits.", level="pitfall", check="x", applies_if="edited")
    assert c.applies_if == ["edited"]
    with pytest.raises(ValidationError, match="empty"):
        Criterion(id="p", text="t", applies_if=["not:"])
    plain = Rubric(id="r", criteria=[Criterion(id="a", text="t", check="x")])
    gated = Rubric(id="r", criteria=[Criterion(id="a", text="t", check="x", applies_if="answered")])
    assert plain.hash != gated.hash  # applicability changes verdicts, so it is part of the identity


# ---- applies_if in the process reward model ---------------------------------------------------------------------


@check("edits_tests_pitfall")
def edits_tests_pitfall(traj: Trajectory, step: int | None = None) -> CheckResult:
    """Pitfall phrased positively; returns N/A itself when nothing was computed."""
    if not any(s.action.tool_call and s.action.tool_call.name == "calculator" for s in traj.steps):
        return CheckResult.not_applicable("no calculator call to judge")
    return CheckResult.of(True, "fine")


def judge() -> CheckJudge:
    return CheckJudge({**env_checks("toy-calculator-v0"), "edits_tests_pitfall": edits_tests_pitfall})


RUBRIC = {
    "id": "na",
    "criteria": [
        {"id": "correct", "text": "Correct.", "level": "essential", "check": "final_answer_correct"},
        {
            "id": "clean_if_acted",
            "text": "Clean.",
            "level": "pitfall",
            "check": "no_invalid_actions",
            "applies_if": "acted",
        },
        {"id": "calc_pitfall", "text": "Pitfall.", "level": "pitfall", "check": "edits_tests_pitfall"},
        {
            "id": "grounded_if_used",
            "text": "Grounded.",
            "check": "answer_grounded",
            "applies_if": ["tool:calculator", "used_calculator"],
        },
        {"id": "valid_step", "text": "Valid.", "scope": "step", "check": "step_valid", "applies_if": "acted"},
        {"id": "says_why", "text": "Tried the calculator.", "check": "used_calculator", "applies_if": "not:answered"},
    ],
}


async def test_do_nothing_earns_nothing(oracle_trajs):
    empty = response_trajectory(oracle_trajs[0].task, "")
    b = await ProcessRewardModel(RUBRIC, [judge()]).score(empty)
    status = {v.criterion_id: v.status for v in b.verdicts}
    assert status == {
        "correct": "unmet",
        "clean_if_acted": "n/a",
        "calc_pitfall": "n/a",
        "grounded_if_used": "n/a",
        "valid_step": "n/a",
        "says_why": "unmet",
    }
    assert b.total == 0.0 and b.valid and b.n_not_applicable == 4 and b.per_step == [None]
    assert "rubric/criterion/clean_if_acted" not in empty.rewards
    assert next(v for v in b.verdicts if v.criterion_id == "clean_if_acted").judge == "applies_if"


async def test_applicable_criteria_count_for_the_oracle(oracle_trajs):
    t = oracle_trajs[0]
    b = await ProcessRewardModel(RUBRIC, [judge()]).score(t)
    # every criterion applies except says_why (the oracle answered); valid_step on every (valid) step
    assert b.total == 1.0 and b.n_not_applicable == 1 and b.per_step == [1.0] * len(t.steps)


async def test_unknown_condition_is_an_error_not_a_guess(oracle_trajs):
    rubric = {"id": "x", "criteria": [{"id": "a", "text": "t", "check": "answered", "applies_if": "no_such"}]}
    b = await ProcessRewardModel(rubric).score(oracle_trajs[0])
    assert b.n_errors == 1 and b.total is None and "no_such" in b.verdicts[0].error


# ---- LLM judges may answer N/A --------------------------------------------------------------------------------


def test_parse_not_applicable_replies():
    assert (
        parse_verdict('{"rationale": "nothing edited", "applicable": false, "met": true, "score": 1}')["applicable"]
        is False
    )
    assert parse_verdict('{"rationale": "-", "met": "N/A"}')["applicable"] is False
    assert parse_verdict("Verdict: not applicable, the agent never cited anything.")["applicable"] is False
    assert parse_verdict('{"rationale": "ok", "applicable": true, "met": false, "score": 0}')["met"] is False


async def test_llm_judge_na_prompt_and_verdict(oracle_trajs, stub_server):
    crit = Criterion(id="cites", text="Cites no unseen page.", level="pitfall")
    reply = '{"rationale": "no citation at all", "applicable": false, "met": true, "score": 1}'
    with stub_server(lambda body: reply) as server:
        j = LLMJudge(base_url=server.base_url, model="stub", max_retries=0, timeout_s=5)
        v = await j.judge(crit, oracle_trajs[0])
        panel = PanelJudge([j, LLMJudge(base_url=server.base_url, model="stub2", max_retries=0, timeout_s=5)])
        pv = await panel.judge(crit, oracle_trajs[0])
    prompt = server.requests[0]["messages"][1]["content"]
    assert "# When a criterion does not apply" in prompt and "is not N/A" in prompt
    assert v.status == "n/a" and v.score is None and v.rationale == "no citation at all"
    assert pv.status == "n/a"
