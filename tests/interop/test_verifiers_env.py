"""verifiers environments come in: real verifiers (v1) tasksets and envs written in ``vf_envs/`` (a single-turn
exact-match taskset, a taskset with a ``vf.Toolset`` tool, a multi-turn ``vf.Env`` with its own ``run``) run as
``rubricgym.make("verifiers:<id>")``, through ``rubricgym run`` and ``rubricgym score``, with their answers hidden."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.core.agent import tool_call
from rubricgym.interop.verifiers_env import VerifiersEnv
from rubricgym.rewards.leaks import audit_leaks
from rubricgym.rewards.prm import ProcessRewardModel

VF_ENVS = Path(__file__).with_name("vf_envs")


@pytest.fixture(autouse=True, scope="module")
def _vf_envs_importable() -> Iterator[None]:
    """verifiers finds a taskset as a top-level module (what vf-eval does with an installed env package)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(VF_ENVS))
        yield


def _answer(text: str) -> str:
    return tool_call("answer", text=text)


def test_tasks_come_from_the_dataset_with_the_answers_hidden():
    from rg_vf_arith import ROWS

    env = rubricgym.make("verifiers:rg_vf_arith")
    try:
        assert isinstance(env, VerifiersEnv) and [t.name for t in env.tools()] == ["answer"]
        tasks = env.task_set(4)
        assert [t.prompt for t in tasks] == [prompt for prompt, _ in ROWS]
        assert [t.hidden for t in tasks] == [{"answer": answer} for _, answer in ROWS]
        for task, (_, answer) in zip(tasks, ROWS, strict=True):
            assert task.env_id == "verifiers:rg_vf_arith" and answer not in json.dumps(task.params) + task.id
        shuffled = env.task_set(4, seed=3)
        assert sorted(t.id for t in shuffled) == sorted(t.id for t in tasks)
        assert env.task_set(4, seed=3) == shuffled
        assert [t.prompt for t in rubricgym.make("verifiers:rg_vf_arith", n=2).task_set(2)] == [r[0] for r in ROWS[:2]]
    finally:
        env.close()


@pytest.mark.parametrize("taskset", ["rg_vf_arith", "rg_vf_tools", "rg_vf_guess"])
def test_the_leak_audit_passes(taskset):
    report = asyncio.run(audit_leaks(f"verifiers:{taskset}", n_tasks=3, splits=("train",)))
    assert report.secrets >= 3 and report.episodes > 0  # it looked for every task's answer, in played episodes
    assert report.ok, [leak.line() for leak in report.leaks]


def test_a_right_answer_scores_1_and_a_wrong_one_0_through_run_and_score(tmp_path):
    runner = CliRunner()
    totals = {}
    for agent in ("oracle", "probe"):
        out = tmp_path / agent
        ran = runner.invoke(app, ["run", "verifiers:rg_vf_arith", "--agent", agent, "--tasks", "4", "--out", str(out)])
        assert ran.exit_code == 0, ran.output
        trajs = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
        assert len(trajs) == 4 and all(t["outcome"]["terminated"] for t in trajs)
        scored = runner.invoke(app, ["score", str(out)])
        assert scored.exit_code == 0, scored.output
        scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
        assert all(s["rubric_id"] == "verifiers-rg_vf_arith" and s["n_errors"] == 0 for s in scores)
        totals[agent] = (
            [t["outcome"]["reward"] for t in trajs],
            [s["per_criterion"]["reward_exact_match"] for s in scores],
        )
    assert totals["oracle"] == ([1.0] * 4, [1.0] * 4)
    assert totals["probe"] == ([0.0] * 4, [0.0] * 4)


def test_tool_calls_run_the_verifiers_tool_and_reach_its_rewards():
    env = rubricgym.make("verifiers:rg_vf_tools")
    try:
        [multiply, answer] = env.tools()
        assert multiply.name == "calc_multiply" and multiply.parameters["required"] == ["a", "b"]
        task = env.task_set(1)[0]
        env.reset_typed(task=task)
        out = env.step_typed(tool_call("calc_multiply", a=123, b=457))
        assert out.messages[-1].content == "56211" and not out.done  # the toolset's own method computed it
        bad = env.step_typed(tool_call("calc_multiply", a=3))
        assert "missing required argument" in bad.messages[-1].content and "b" in bad.messages[-1].content
        end = env.step_typed(_answer("56211"))
        assert end.done and end.reward == pytest.approx(1.0)
        scored = env.steps[-1].info["verifiers"]
        assert scored["rewards"] == {
            "correct": {"score": 1.0, "weight": 0.75},
            "used_calculator": {"score": 1.0, "weight": 0.25},  # the verifiers trace holds the tool result
        }
        env.reset_typed(task=task)  # answered without the tool: the tool reward is not earned
        assert env.step_typed(_answer("56211")).reward == pytest.approx(0.75)
    finally:
        env.close()


def test_a_multi_turn_env_answers_each_reply_with_its_env_response():
    env = rubricgym.make("verifiers:rg_vf_guess")
    try:
        task = env.task_set(1)[0]  # the secret is 107
        first = env.reset_typed(task=task)
        assert "Guess it" in first.messages[-1].content
        assert env.step_typed(_answer("103")).messages[-1].content == "No. Go higher."
        assert env.step_typed(_answer("110")).messages[-1].content == "No. Go lower."
        end = env.step_typed(_answer("107"))
        assert end.done and end.reward == pytest.approx(1.0)
        scored = env.steps[-1].info["verifiers"]
        assert scored["metrics"] == {"guesses": 3.0} and scored["rewards"]["found"]["score"] == 1.0
        trajectory = env.trajectory(agent="test")
        assert [s.stage for s in trajectory.steps] == ["answer"] * 3 and trajectory.outcome.answer == "107"
    finally:
        env.close()


def test_the_step_limit_ends_the_verifiers_run_and_it_is_still_scored():
    env = rubricgym.make("verifiers:rg_vf_tools", max_steps=2)
    try:
        env.reset_typed(task=env.task_set(1)[0])
        env.step_typed(tool_call("calc_multiply", a=1, b=2))
        last = env.step_typed(tool_call("calc_multiply", a=123, b=457))
        assert last.truncated and not last.done
        assert env.outcome.reward == pytest.approx(0.25)  # no answer; the tool was used
        assert env.steps[-1].info["verifiers"]["rewards"]["correct"]["score"] == 0.0
        env.reset_typed(task=env.task_set(2)[1])  # a fresh episode after the old run was wound up
        assert env.step_typed(_answer("8008")).reward == pytest.approx(0.75)
    finally:
        env.close()


def test_bad_ids_and_arguments_say_what_to_do():
    with pytest.raises(KeyError, match="PYTHONPATH"):
        rubricgym.make("verifiers:rg_vf_no_such_taskset")
    with pytest.raises(KeyError, match="names no taskset"):
        rubricgym.make("verifiers:")
    with pytest.raises(ValueError, match="config fields"):
        rubricgym.make("verifiers:rg_vf_arith", n="many")
    with pytest.raises(ValueError, match=r"seats \['assistant', 'user'\].*vf-eval"):
        rubricgym.make("verifiers:rg_vf_arith", vf_env="user-sim")  # its user is a second model
    env = rubricgym.make("verifiers:rg_vf_arith")
    try:
        with pytest.raises(ValueError, match="fewer than the 5 asked for"):
            env.task_set(5)
        assert env.task_set(2, split="test") == [t.model_copy(update={"split": "test"}) for t in env.task_set(2)]
    finally:
        env.close()


def test_a_reward_function_that_fails_is_an_error_verdict_never_a_zero():
    env = rubricgym.make("verifiers:rg_vf_broken")
    try:
        env.reset_typed(task=env.task_set(1)[0])
        end = env.step_typed(_answer("Paris"))
        assert end.done and "judge endpoint is down" in end.messages[-1].content
        trajectory = env.trajectory(agent="test")
    finally:
        env.close()
    assert trajectory.steps[-1].info["verifiers"]["rewards"] == {"judged": None}
    breakdown = asyncio.run(ProcessRewardModel(type(env).default_rubric()).score(trajectory))
    [verdict] = breakdown.verdicts
    assert verdict.error and "judge endpoint is down" in verdict.error and not breakdown.valid
