"""Judge audits: master keys against checks and LLM judges, exploitation rate, self-internalisation gap."""

import pytest

from rubricgym.core.checks import check
from rubricgym.core.types import CheckResult
from rubricgym.rewards.audit import (
    MASTER_KEYS,
    audit_judge,
    exploitation_rate,
    measure_exploitation,
    response_trajectory,
    self_internalisation_gap,
)
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.rubric import Rubric

LLM_RUBRIC = Rubric.from_dict(
    {
        "id": "l",
        "criteria": [
            {"id": "right", "text": "The final answer is the correct number.", "level": "essential"},
            {"id": "shows", "text": "Shows the calculation.", "level": "optional"},
        ],
    }
)


def test_exploitation_rate_worked_example():
    # newly credited: criteria 0 (w 1.0) and 1 (w 0.7); all three references reject 0, one accepts 1
    # -> 1.0 / (1.0 + 0.7)
    rate = exploitation_rate(
        before=[False, False, True, False],
        after=[True, True, True, False],
        reference=[[False] * 3, [True, False, False], [False] * 3, [True] * 3],
        weights=[1.0, 0.7, 0.3, 0.9],
    )
    assert rate == pytest.approx(1 / 1.7)
    assert exploitation_rate([True], [True], [[False]]) is None  # nothing newly credited
    with pytest.raises(ValueError):
        exploitation_rate([True], [True, False], [[True]])


def test_self_internalisation_gap_worked_example():
    # sample 1: mean(-1, -3) - mean(-1, -1) = -1; sample 2: -2 - (-0.5) = -1.5 -> mean -1.25
    assert self_internalisation_gap([[-1, -3], [-2]], [[-1, -1], [-0.5]]) == pytest.approx(-1.25)
    with pytest.raises(ValueError):
        self_internalisation_gap([[-1]], [[-1, -2]])


def test_master_keys_and_probe_trajectories(oracle_trajs):
    task = oracle_trajs[0].task
    texts = {name: make(task, LLM_RUBRIC) for name, make in MASTER_KEYS.items()}
    assert texts["empty"] == "" and texts["restate_question"] == task.prompt
    assert "correct number" in texts["restate_rubric"]
    t = response_trajectory(task, texts["step_by_step"])
    assert t.outcome.answer == "Let's solve this step by step." and t.steps[0].action.parse_error


async def test_env_checks_are_not_fooled(oracle_trajs, toy_rubric):
    tasks = [t.task for t in oracle_trajs]
    report = await audit_judge(CheckJudge(), Rubric.from_dict(toy_rubric), tasks, good=oracle_trajs)
    assert report.fpr() == 0.0 and report.fnr() == 0.0 and report.errors == 0
    assert report.false_positive["essential"].judged == len(tasks) * len(MASTER_KEYS)
    assert set(report.by_master_key) == set(MASTER_KEYS)


async def test_a_credulous_llm_judge_is_caught(oracle_trajs, stub_server):
    with stub_server(lambda body: '{"rationale": "looks fine", "met": true, "score": 1}') as server:
        report = await audit_judge(
            LLMJudge(base_url=server.base_url, model="yes-man"),
            LLM_RUBRIC,
            [oracle_trajs[0].task],
            good=oracle_trajs[:1],
        )
    assert report.fpr() == 1.0 and report.fpr("essential") == 1.0 and report.fnr() == 0.0
    assert report.by_master_key["empty"].rate == 1.0


async def test_audit_against_a_dead_judge_reports_errors_not_rates(oracle_trajs, stub_server):
    with stub_server(lambda body: "{}") as server:
        url = server.base_url
    judge = LLMJudge(base_url=url, model="gone", max_retries=0, timeout_s=2)
    report = await audit_judge(judge, LLM_RUBRIC, [oracle_trajs[0].task], master_keys={"empty": MASTER_KEYS["empty"]})
    assert report.errors == 2 and report.fpr() is None and "EndpointError" in report.error_examples[0]


async def test_measure_exploitation_with_deterministic_judges(oracle_trajs):
    @check("answered_anything")
    def lenient(traj, step=None) -> CheckResult:
        return CheckResult.of(bool((traj.outcome.answer or "").strip()))

    @check("answered_anything")
    def strict(traj, step=None) -> CheckResult:
        return CheckResult.of(traj.outcome.answer == str(traj.task.hidden["answer"]))

    rubric = Rubric.from_dict({"id": "e", "criteria": [{"id": "a", "text": "Answers.", "check": "answered_anything"}]})
    t0, t1 = oracle_trajs[0].task, oracle_trajs[1].task
    before = [response_trajectory(t0, ""), response_trajectory(t1, "")]
    after = [response_trajectory(t0, str(t0.hidden["answer"])), response_trajectory(t1, "a confident guess")]
    rate = await measure_exploitation(
        CheckJudge({"answered_anything": lenient}),
        [CheckJudge({"answered_anything": strict})] * 3,
        rubric,
        before,
        after,
    )
    assert rate == pytest.approx(0.5)  # two newly credited answers, the panel rejects the guess
