"""PairwiseJudge: programmatic rubric mode on real toy trajectories, and LLM-mode plumbing over loopback HTTP."""

import json

import pytest

from rubricgym.rewards.pairwise import ANSWER_DIMS, RESEARCH_PATH, PairwiseJudge, combine


def test_combine():
    assert combine(8.0, 6.0, 0.6) == pytest.approx(7.2)  # ArenaRL travel: 0.6 P + 0.4 A
    assert combine(None, 6.0, 0.6) == 6.0 and combine(8.0, None, 0.6) == 8.0


async def test_rubric_mode_prefers_the_oracle(oracle_trajs, random_trajs, toy_rubric):
    judge = PairwiseJudge.from_rubric(toy_rubric)
    a, b = oracle_trajs[0], random_trajs[0]
    assert a.task.id == b.task.id
    r = await judge.compare(a, b)
    assert r.ok and r.mode == "rubric" and r.winner == "a" and r.position_bias == 0.0
    # the oracle meets every criterion: path 10, answer 10 -> combined 10 per order, 20 over both
    assert r.score_a == pytest.approx(20.0) and r.score_b < r.score_a
    assert r.orders[0].path["a"] == {"valid_step": 10.0, "progress": 10.0}
    swapped = await judge.compare(b, a)
    assert swapped.winner == "b" and swapped.score_b == r.score_a and swapped.score_a == r.score_b
    assert r.outcome_for("a") == 1.0 and r.outcome_for("b") == 0.0
    tie = await judge.compare(a, a.model_copy(update={"id": "copy"}))
    assert tie.winner == "tie" and tie.outcome_for("a") == 0.5
    assert a.rewards == {}  # rubric mode scores copies: the caller's trajectories are untouched


async def test_llm_mode_runs_both_orders_and_measures_position_bias(oracle_trajs, random_trajs, stub_server):
    def first_always_wins(body):
        high = {"path": dict.fromkeys(RESEARCH_PATH, 8), "answer": dict.fromkeys(ANSWER_DIMS, 8)}
        low = {"path": dict.fromkeys(RESEARCH_PATH, 4), "answer": dict.fromkeys(ANSWER_DIMS, 4)}
        return json.dumps({"analysis": "the first is better", "response_1": high, "response_2": low})

    with stub_server(first_always_wins) as server:
        judge = PairwiseJudge(base_url=server.base_url, model="stub")
        r = await judge.compare(oracle_trajs[0], random_trajs[0])
    assert len(server.requests) == 2
    text = oracle_trajs[0].steps[0].action.text
    prompts = [req["messages"][1]["content"] for req in server.requests]  # the two orders run concurrently
    firsts = sorted(p.index(text) < p.index("<<<RESPONSE 2 ") for p in prompts)
    assert firsts == [False, True]  # the oracle was shown first once and second once
    # order 1: a 8, b 4; order 2: b 8, a 4 -> 12 each: a tie, and the first slot is worth 4 points
    assert r.score_a == pytest.approx(12.0) and r.score_b == pytest.approx(12.0) and r.winner == "tie"
    assert r.position_bias == pytest.approx(4.0)
    assert [o.first for o in r.orders] == ["a", "b"]


async def test_llm_mode_failures_are_errors(oracle_trajs, random_trajs, stub_server):
    with stub_server(lambda body: '{"response_1": {"path": {}}, "response_2": {}}') as server:
        r = await PairwiseJudge(base_url=server.base_url, model="stub").compare(oracle_trajs[0], random_trajs[0])
    assert not r.ok and r.winner is None and r.outcome_for("a") is None and "missing" in r.error
    with pytest.raises(ValueError, match="one task"):
        await PairwiseJudge(base_url=server.base_url, model="s").compare(oracle_trajs[0], random_trajs[1])
    with pytest.raises(ValueError, match="needs an LLM"):
        PairwiseJudge()
