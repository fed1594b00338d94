"""The calculator teacher: reads the problem from the prompt, computes with the calculator, answers its result."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.cli_env import TEACHER, endpoint_teacher
from rubricgym.core.parsing import parse_action
from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout, rollout_many
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.tasks import TaskSet
from rubricgym.core.types import Message, Trajectory
from rubricgym.envs.toy.teacher import Operation, ProblemError, Teacher, read_problem
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.path import RewardPath
from rubricgym.trainers.demo import DEMO_CONFIG

DEMO = DEMO_CONFIG["env"]["kwargs"]
"""The toy demo's env knobs: one-operation expressions, three turns."""


def play(n: int, seed: int = 0, teacher: Teacher | None = None, **kwargs) -> list[Trajectory]:
    env = make("toy-calculator-v0", **kwargs)
    agent = teacher or type(env).agents()["teacher"](seed=seed)
    return [asyncio.run(rollout(env, agent, t, seed=seed + i)) for i, t in enumerate(env.task_set(n, seed=seed))]


def summary(trajs: list[Trajectory]) -> tuple[float, float]:
    path = RewardPath([CheckJudge()])
    totals = [asyncio.run(path.score(t)).total for t in trajs]
    return sum(t.outcome.succeeded for t in trajs) / len(trajs), sum(totals) / len(totals)


@pytest.mark.parametrize(
    "kwargs", [DEMO, {}, {"style": "expression"}, {"min_ops": 1, "max_ops": 2, "max_steps": 3, "style": "expression"}]
)
def test_solves_the_demo_and_the_default_problems(kwargs: dict) -> None:
    solved, total = summary(play(20, **kwargs))
    assert solved >= 0.6 and total >= 0.6, (solved, total)  # measured: 100/100 at each of these, rubric 1.000


def test_registered_for_the_calculator_env() -> None:
    assert make("toy-calculator-v0").agents()["teacher"] is Teacher


def test_reads_word_and_expression_problems() -> None:
    word = "Ada has 40 apples. Ada gives away 12 apples. Every one of them is swapped for 3 apples. How many?"
    assert read_problem(word) == [Operation("-", 40, 12), Operation("*", None, 3)]
    assert read_problem("Compute ((34 + 12) * 3) // 2. Use the calculator.") == [
        Operation("+", 34, 12),
        Operation("*", None, 3),
        Operation("//", None, 2),
    ]
    assert read_problem("Compute 2 * (3 + 4).") == [Operation("+", 3, 4), Operation("*", 2, None)]
    with pytest.raises(ProblemError, match="starting amount"):
        read_problem("What is the capital of France?")


def test_answers_what_the_calculator_returned_not_its_own_arithmetic() -> None:
    chat = [
        Message(role="user", content="Compute 6 * 7. Use the calculator, then call answer."),
        Message(role="assistant", content='<tool_call>{"name": "calculator", "arguments": {"expression": "6 * 7"}}'),
        Message(role="user", content="41"),  # whatever the tool says is what the policy has seen
    ]
    action = asyncio.run(Teacher(0).act(chat, []))
    assert json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))["arguments"] == {"value": 41}


def test_each_step_starts_from_the_previous_result_and_the_path_varies() -> None:
    env = make("toy-calculator-v0", min_ops=4, max_ops=4)
    task = env.task_set(1, seed=0)[0]
    paths = set()
    for seed in range(12):
        traj = asyncio.run(rollout(env, Teacher(), task, seed=seed))  # the episode's seed is the teacher's
        assert traj.outcome.succeeded
        calls = [s.action.tool_call for s in traj.steps]
        results = [s.observation.messages[0].content for s in traj.steps]
        for k in range(1, 4):  # operation k+1 uses the number the calculator returned for operation k
            assert results[k - 1] in re.findall(r"\d+", calls[k].arguments["expression"]), (results, calls)
        paths.add(tuple(c.arguments.get("expression") for c in calls))
    assert len(paths) >= 6, paths


def test_more_operations_than_turns_are_combined_two_a_call() -> None:
    trajs = play(10, teacher=Teacher(0, max_steps=3), min_ops=4, max_ops=4, max_steps=3)
    assert all(t.outcome.succeeded and len(t.steps) == 3 for t in trajs)


def test_every_action_is_a_valid_call_in_the_policys_format() -> None:
    prefix = DEMO_CONFIG["generation"]["response_prefix"]
    env = make("toy-calculator-v0")
    tools = env.reset_typed(seed=0, task=env.task_set(1)[0]).tools
    for t in play(20):
        for s in t.steps:
            assert s.action.text.startswith(prefix), s.action.text
            assert parse_action(s.action.text, tools).parse_error is None and s.tool_error is None, s


def test_rubricgym_run_agent_teacher_writes_teacher_trajectories(tmp_path) -> None:
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["run", "toy-calculator-v0", "--agent", "teacher", "--tasks", "5", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 5 and {r["agent"] for r in rows} == {"teacher"} and all(r["outcome"]["solved"] for r in rows)


def test_an_endpoint_teacher_needs_its_url_and_model(tmp_path) -> None:
    with pytest.raises(ValueError, match="--base-url .* and --model"):
        endpoint_teacher("http://127.0.0.1:8000/v1", " ")
    args = ["run", "toy-calculator-v0", "--agent", "teacher", "--base-url", "http://127.0.0.1:9/v1", "--tasks", "1"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code != 0 and "needs --model" in result.output


@pytest.mark.slow  # a vLLM server of the embedded model (~40 s to start on CPU)
def test_an_openai_compatible_endpoint_is_a_teacher_whose_episodes_are_teacher_data(vllm_server, tmp_path) -> None:
    agent = endpoint_teacher(vllm_server.base_url, vllm_server.model, temperature=0.0, seed=0)
    tasks = TaskSet.generate("toy-calculator-v0", 2, seed=0, **DEMO)
    store = TrajectoryStore(tmp_path)
    report = asyncio.run(
        rollout_many("toy-calculator-v0", agent, tasks, store=store, progress=False, env_kwargs=DEMO, seed=0)
    )
    assert report.ok, report.failures
    trajs = store.load()
    assert len(trajs) == 2 and {t.agent for t in trajs} == {TEACHER} and {t.model for t in trajs} == {vllm_server.model}
    assert all(s.action.text for t in trajs for s in t.steps)  # the model's own completions, as the env got them
    # the same through the command users run
    out = tmp_path / "cli"
    args = ["run", "toy-calculator-v0", "--agent", "teacher", "--base-url", vllm_server.base_url]
    # greedy on the demo's knobs, as above: at the default 0.7 and the env's default turns, the 135M model can ramble
    # past vLLM's 4096-token context (HTTP 400, the task fails)
    args += ["--model", vllm_server.model, "--tasks", "2", "--temperature", "0", "--out", str(out)]
    args += [x for k, v in DEMO.items() for x in ("--env-arg", f"{k}={json.dumps(v)}")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert (
        len(rows) == 2 and {r["agent"] for r in rows} == {TEACHER} and {r["model"] for r in rows} == {vllm_server.model}
    )
