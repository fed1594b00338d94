"""ProcessRewardModel on real toy-env trajectories: roll-ups computed by hand, every aggregation method, and
failed verdicts that are counted and masked, never scored 0."""

import pytest

from rubricgym.core.checks import check
from rubricgym.core.types import CheckResult
from rubricgym.rewards.judges import CheckJudge, env_checks
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.prm import ProcessRewardModel


def wrong_guess(guess_trajs):
    return next(t for t in guess_trajs if t.outcome.reward == 0)


@check("never")
def never(traj, step=None) -> CheckResult:
    return CheckResult.of(False, "never met")


@check("no_calculator")
def no_calculator(traj, step=None) -> CheckResult:
    used = any(s.action.tool_call and s.action.tool_call.name == "calculator" for s in traj.steps)
    return CheckResult.of(not used, "guessed without the calculator" if not used else "used the calculator")


def judge_with_extras() -> CheckJudge:
    return CheckJudge({**env_checks("toy-calculator-v0"), "never": never, "no_calculator": no_calculator})


async def test_oracle_scores_full_marks(oracle_trajs, toy_rubric):
    t = oracle_trajs[0]
    b = await ProcessRewardModel(toy_rubric).score(t)
    assert b.valid and b.total == 1.0 and b.outcome == 1.0 and b.process == 1.0
    assert b.per_stage == {"compute": 1.0, "answer": 1.0}
    assert t.rewards["rubric"] == 1.0 and t.rewards["rubric/errors"] == 0.0
    assert all(s.rewards["rubric"] == 1.0 for s in t.steps)
    assert "rubric/progress" in t.steps[0].rewards and "rubric/progress" not in t.steps[-1].rewards


async def test_wrong_guess_by_hand(guess_trajs, toy_rubric):
    # one valid answer step (stage answer), wrong, no calculator. "clean" and "valid_step" apply only once the
    # calculator was used (a single guess is no work to be clean about): both N/A. correct 0 (w1), grounded 0
    # (.7), used_calculator 0 (.3): total 0, outcome 0; no step criterion applies; stage answer = correct +
    # grounded = 0, stage compute = used_calculator = 0
    t = wrong_guess(guess_trajs)
    b = await ProcessRewardModel(toy_rubric).score(t)
    assert b.total == 0.0 and b.outcome == 0.0 and b.valid
    assert b.per_step == [None] and b.process is None
    assert b.per_stage == {"answer": 0.0, "compute": 0.0}
    assert b.per_criterion == {"correct": 0.0, "grounded": 0.0, "used_calculator": 0.0}
    assert len(b.verdicts) == 5 and b.n_not_applicable == 2
    assert {v.criterion_id for v in b.verdicts if v.step == 0} == {"valid_step"}
    assert t.rewards["rubric/stage/answer"] == 0.0 and "rubric/criterion/clean" not in t.rewards


async def test_signed_weights_penalise_the_pitfall(oracle_trajs, guess_trajs):
    rubric = {
        "id": "s",
        "aggregation": {"method": "signed"},
        "criteria": [
            {"id": "correct", "text": "Correct.", "level": "essential", "check": "final_answer_correct"},
            {"id": "guessed", "text": "Answers without the calculator.", "weight": -0.9, "check": "no_calculator"},
        ],
    }
    prm = ProcessRewardModel(rubric, [judge_with_extras()])
    # oracle: (1*1 + 0.9*(1-0)) / 1.9 = 1; wrong guess: (0 + 0.9*(1-1)) / 1.9 = 0
    assert (await prm.score(oracle_trajs[0])).total == pytest.approx(1.0)
    assert (await prm.score(wrong_guess(guess_trajs))).total == pytest.approx(0.0)


async def test_renorm_step_rewards(oracle_trajs, guess_trajs, random_trajs):
    rubric = {
        "id": "r",
        "aggregation": {"method": "renorm"},
        "criteria": [{"id": "valid", "text": "Valid step.", "scope": "step", "check": "step_valid"}],
    }
    prm = ProcessRewardModel(rubric)
    t = oracle_trajs[0]
    b = await prm.score(t)
    # every step valid (p=1) and the outcome right (1): r_t = 0.5 + 0.5
    assert b.step_rewards == [1.0] * len(t.steps) and b.total == 1.0
    assert [s.rewards["rubric"] for s in t.steps] == b.step_rewards
    g = await prm.score(wrong_guess(guess_trajs))
    assert g.step_rewards == [0.0] and g.outcome_signal == 0.0  # (1 - .5) + (0 - .5)
    r = random_trajs[0]
    rb = await prm.score(r)
    expected = [
        (float(s.action.parse_error is None and s.tool_error is None) - 0.5) + (r.outcome.reward - 0.5) for s in r.steps
    ]
    assert rb.step_rewards == pytest.approx(expected)


async def test_swe_trace_margin_gated_on_an_outcome_check(oracle_trajs, guess_trajs):
    rubric = {
        "id": "w",
        "aggregation": {"method": "swe_trace", "gamma": 0.7, "outcome_check": "final_answer_correct"},
        "criteria": [
            {"id": "grounded", "text": "Grounded.", "check": "answer_grounded"},
            {"id": "clean", "text": "Clean.", "check": "no_invalid_actions"},
        ],
    }
    prm = ProcessRewardModel(rubric)
    good = await prm.score(oracle_trajs[0])
    assert good.outcome_signal == 1.0 and good.total == pytest.approx(0.7 + 0.3 * 1.0)
    bad = await prm.score(wrong_guess(guess_trajs))
    # fails: s_prm = (0.7*0 + 0.7*1)/1.4 = 0.5 -> 0.3 * 0.5
    assert bad.outcome_signal == 0.0 and bad.total == pytest.approx(0.15)
    # the outcome check may also be a criterion of the rubric: it is then left out of s_prm
    rubric["criteria"].append({"id": "correct", "text": "Correct.", "check": "final_answer_correct"})
    rubric["aggregation"]["outcome_check"] = "correct"
    assert (await ProcessRewardModel(rubric).score(wrong_guess(guess_trajs))).total == pytest.approx(0.15)


async def test_carr_chain_and_c_grpo(oracle_trajs, guess_trajs):
    rubric = {
        "id": "c",
        "aggregation": {"method": "carr", "alpha": 0.3},
        "criteria": [
            {"id": "s0", "text": "E0 relates to E1.", "entities": ["E0", "E1"], "check": "used_calculator"},
            {"id": "s1", "text": "E1 relates to E2.", "entities": ["E1", "E2"], "check": "never"},
            {"id": "s2", "text": "E2 relates to E3.", "entities": ["E2", "E3"], "check": "answer_grounded"},
        ],
    }
    prm = ProcessRewardModel(rubric, [judge_with_extras()])
    b = await prm.score(oracle_trajs[0])
    # s1 unsupported cuts s2 off: chain = 1/3; outcome 1 -> 0.7 + 0.3/3
    assert b.per_criterion["__chain__"] == pytest.approx(1 / 3)
    assert b.total == pytest.approx(0.8)
    assert (await prm.score(wrong_guess(guess_trajs))).total == 0.0


async def test_failed_verdicts_are_counted_and_masked_not_zeroed(oracle_trajs, toy_rubric):
    rubric = dict(
        toy_rubric,
        criteria=[*toy_rubric["criteria"], {"id": "explains", "text": "Explains its steps.", "level": "essential"}],
    )
    t = oracle_trajs[0]
    b = await ProcessRewardModel(rubric).score(t)  # no LLM judge: the LLM criterion cannot be judged
    assert b.n_errors == 1 and not b.valid
    (err,) = b.errors()
    assert err.criterion_id == "explains" and err.score is None and "LLM judge" in err.error
    assert b.total == 1.0  # the other criteria, all met; not dragged towards 0 by the failure
    assert "explains" not in b.per_criterion and t.rewards["rubric/errors"] == 1.0


async def test_dead_llm_judge_mid_rubric(oracle_trajs, toy_rubric, stub_server):
    rubric = dict(
        toy_rubric,
        criteria=[
            *toy_rubric["criteria"],
            {"id": "explains", "text": "Explains its steps.", "judge": "Reasons?"},
            {"id": "tidy", "text": "Each step is tidy.", "scope": "step"},
        ],
    )
    with stub_server(lambda body: '{"met": true, "score": 1}') as server:
        url = server.base_url
    judge = LLMJudge(base_url=url, model="stub", max_retries=0, timeout_s=2)
    t = oracle_trajs[0]
    b = await ProcessRewardModel(rubric, [CheckJudge(), judge]).score(t)
    assert b.n_errors == 1 + len(t.steps)
    assert all(v.score is None and "EndpointError" in v.error for v in b.errors())
    assert b.total == 1.0 and all(s.rewards["rubric"] == 1.0 for s in t.steps)


async def test_rar_implicit_uses_one_llm_call(oracle_trajs, toy_rubric, stub_server):
    rubric = dict(toy_rubric, aggregation={"method": "rar_implicit"})
    with stub_server(lambda body: '{"rationale": "fine", "score": 10}') as server:
        b = await ProcessRewardModel(rubric, [CheckJudge(), LLMJudge(base_url=server.base_url, model="s")]).score(
            oracle_trajs[0]
        )
    assert len(server.requests) == 1 and b.total == 1.0 and b.valid
    none = await ProcessRewardModel(rubric).score(oracle_trajs[0])
    assert none.total is None and none.n_errors == 1


async def test_score_many_keeps_order(oracle_trajs, random_trajs, toy_rubric):
    trajs = [oracle_trajs[0], random_trajs[0], oracle_trajs[1]]
    out = await ProcessRewardModel(toy_rubric).score_many(trajs, concurrency=2)
    assert [b.trajectory_id for b in out] == [t.id for t in trajs]
    assert out[0].total == 1.0 and out[1].total < 1.0
