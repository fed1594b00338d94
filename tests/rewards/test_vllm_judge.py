"""LLM judging against a real vLLM server with SmolLM2-135M (slow).

The model is too weak to judge well, so these tests check the plumbing only: real requests, JSON mode,
parsing (a verdict or a parse error, never a silent zero), the cache, and error verdicts once the server
is stopped mid-run.
"""

import asyncio

import pytest

from rubricgym.rewards.cache import JudgeCache
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.llm_judge import LLMJudge
from rubricgym.rewards.pairwise import PairwiseJudge
from rubricgym.rewards.prm import ProcessRewardModel
from rubricgym.rewards.rubric import Rubric

pytestmark = pytest.mark.slow


def mixed_rubric(toy_rubric: dict) -> Rubric:
    return Rubric.from_dict(
        dict(
            toy_rubric,
            criteria=[
                *toy_rubric["criteria"],
                {"id": "explains", "text": "The agent says what each calculation is for.", "level": "optional"},
                {"id": "sensible", "text": "The step moves the solution forward.", "scope": "step", "stage": "compute"},
            ],
        )
    )


def assert_plumbing(verdicts):
    for v in verdicts:
        if v.status == "n/a":  # the judge may answer N/A (criterion-v2 prompt): no score, no error
            assert v.score is None and v.met is None and v.error is None
        elif v.ok:
            assert 0.0 <= v.score <= 1.0 and isinstance(v.met, bool)
        else:
            assert v.score is None and v.met is None and v.error


async def test_score_toy_run_with_a_real_llm_judge(vllm_server, tmp_path, oracle_trajs, random_trajs, toy_rubric):
    rubric = mixed_rubric(toy_rubric)
    cache = JudgeCache(tmp_path / "cache.sqlite")
    judge = LLMJudge(base_url=vllm_server.base_url, model=vllm_server.model, cache=cache, max_tokens=96)
    prm = ProcessRewardModel(rubric, [CheckJudge(), judge])
    trajs = oracle_trajs[:1] + random_trajs[:1]  # a solved and an unsolved episode
    first = await prm.score_many(trajs)
    llm = [v for b in first for v in b.verdicts if v.judge.startswith("llm:")]
    n_llm = len(trajs) + sum(1 for t in trajs for s in t.steps if s.stage == "compute")
    assert len(llm) == n_llm and judge.client.calls >= n_llm
    assert_plumbing(llm)
    assert all(v.ok for b in first for v in b.verdicts if v.judge == "check")
    ok = [v for v in llm if v.ok]
    assert len(cache) == len(ok)

    calls = judge.client.calls
    again = await prm.score_many([t.model_copy(deep=True) for t in trajs])
    relisted = [v for b in again for v in b.verdicts if v.judge.startswith("llm:")]
    assert sum(v.cached for v in relisted) == len(ok)
    # only verdicts that failed the first time are asked again
    failed_before = len(llm) - len(ok)
    assert (judge.client.calls - calls == 0) if failed_before == 0 else (judge.client.calls > calls)
    await judge.aclose()


async def test_pairwise_llm_plumbing(vllm_server, oracle_trajs, random_trajs):
    # room for a complete reply with a short analysis (the two responses' scores alone take 116 tokens)
    judge = PairwiseJudge(base_url=vllm_server.base_url, model=vllm_server.model, max_tokens=160)
    r = await judge.compare(oracle_trajs[0], random_trajs[0])
    assert judge.calls >= 2
    if r.ok:
        assert 0 <= r.score_a <= 20 and 0 <= r.score_b <= 20 and r.winner in ("a", "b", "tie")
    else:
        assert r.winner is None and r.score_a is None and r.error


def test_stopping_the_judge_server_mid_run_gives_error_verdicts(vllm_server_to_stop, oracle_trajs, toy_rubric):
    server = vllm_server_to_stop  # the session's server: this test runs after every other test that uses it
    try:
        rubric = mixed_rubric(toy_rubric)
        judge = LLMJudge(
            base_url=server.base_url, model=server.model, max_tokens=64, concurrency=1, max_retries=1, timeout_s=20
        )
        judge.client.backoff_s = 0.1
        prm = ProcessRewardModel(rubric, [CheckJudge(), judge], concurrency=1)
        trajs = [t.model_copy(deep=True) for t in oracle_trajs] * 3

        async def stop_after_some_calls() -> None:
            while judge.client.calls < 3:
                await asyncio.sleep(0.05)
            await asyncio.to_thread(server.stop)

        async def score_while_stopping():
            stopper = asyncio.create_task(stop_after_some_calls())
            out = await prm.score_many(trajs, concurrency=1)
            await stopper
            return out

        breakdowns = asyncio.run(score_while_stopping())  # VLLMServer.start runs its own loop: this test is sync
    finally:
        server.stop()
    llm = [v for b in breakdowns for v in b.verdicts if v.judge.startswith("llm:")]
    down = [v for v in llm if not v.ok and "EndpointError" in (v.error or "")]
    assert down, "verdicts judged after the server stopped must be endpoint errors"
    assert_plumbing(llm)
    assert any(v.ok or "JudgeParseError" in (v.error or "") for v in llm)  # some were answered before the stop
    for b in breakdowns:
        checks_ok = all(v.ok for v in b.verdicts if v.judge == "check")
        assert checks_ok and b.total is not None  # check criteria still count; failures are masked, not zeroed
        if any(v in down for v in b.verdicts):
            assert not b.valid and b.n_errors >= 1


def test_score_cli_with_a_real_llm_judge(vllm_server, tmp_path, oracle_trajs, random_trajs, toy_rubric):
    import json

    import typer
    from typer.testing import CliRunner

    from rubricgym.core.store import TrajectoryStore
    from rubricgym.rewards.cli import register
    from rubricgym.rewards.prm import Breakdown

    store = TrajectoryStore(tmp_path / "run")
    store.extend(oracle_trajs[:1] + random_trajs[:1])
    rubric_file = mixed_rubric(toy_rubric).save(tmp_path / "mixed.toml")
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(
        app,
        [
            "score",
            str(store.dir),
            "--rubric",
            str(rubric_file),
            "--judge",
            vllm_server.base_url,
            "--judge-model",
            vllm_server.model,
        ],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert "explains" in res.output and "sensible" in res.output
    bds = [Breakdown.model_validate_json(x) for x in (store.dir / "scores.jsonl").read_text().splitlines()]
    assert len(bds) == 2 and all(b.total is not None for b in bds)
    llm = [v for b in bds for v in b.verdicts if v.judge == f"llm:{vllm_server.model}"]
    assert llm and all(v.criterion_id in ("explains", "sensible") for v in llm)
    assert_plumbing(llm)
    summary = json.loads((store.dir / "scores_summary.json").read_text())
    assert summary["cache"]["misses"] == len(llm)
