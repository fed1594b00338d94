"""The clinical teacher: solves the demo's cases from what it observed, varies its path, writes the policy's format."""

from __future__ import annotations

import asyncio
import json

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.parsing import parse_action
from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout
from rubricgym.core.types import Message, Task, Trajectory
from rubricgym.envs.clinical.teacher import MAX_CHARS, Teacher
from rubricgym.rewards.judges import CheckJudge
from rubricgym.rewards.path import RewardPath
from rubricgym.trainers.demo import FAMILY_DEMOS

DEMO = FAMILY_DEMOS["clinical-v0"]["env"]["kwargs"]
"""The clinical demo's env knobs (configs/demo-clinical.yaml): cardiology cases, the env's 12 turns."""
PREFIX = '<tool_call>{"name": "'
"""The demo's response prefix: every turn of the policy starts with it, so every teacher action must too."""


def play(tasks: list[Task], seed: int = 0, **kwargs) -> list[Trajectory]:
    env = make("clinical-v0", **{**DEMO, **kwargs})
    teacher = type(env).agents()["teacher"](seed=seed)
    return [asyncio.run(rollout(env, teacher, t, seed=seed + i)) for i, t in enumerate(tasks)]


def summary(trajs: list[Trajectory]) -> tuple[float, float]:
    path = RewardPath([CheckJudge()])
    totals = [asyncio.run(path.score(t)).total for t in trajs]
    return sum(t.outcome.succeeded for t in trajs) / len(trajs), sum(totals) / len(totals)


@pytest.mark.parametrize("split", ["train", "test"])
def test_solves_most_demo_cases_with_a_high_rubric_total(split: str) -> None:
    tasks = make("clinical-v0", **DEMO).task_set(20, seed=0, split=split)
    solved, total = summary(play(tasks))
    assert solved >= 0.6 and total >= 0.6, (solved, total)  # measured: 100/100 solved, rubric 0.997


def test_registered_as_the_envs_teacher_and_never_holds_the_task() -> None:
    env = make("clinical-v0", **DEMO)
    assert type(env).agents()["teacher"] is Teacher
    assert make("clinical-cost-v0").agents()["teacher"] is Teacher
    task = env.task_set(1, seed=0)[0]
    ep = Teacher(3).episode(task, 7)
    assert ep.seed == 7 and task not in vars(ep).values()


def test_path_varies_with_the_seed_and_stays_sensible() -> None:
    task = make("clinical-v0", **DEMO).task_set(2, seed=0)[1]
    trajs = [play([task], seed=s)[0] for s in range(10)]
    paths = {tuple(s.action.text for s in t.steps) for t in trajs}
    assert len(paths) >= 6, len(paths)
    assert all(t.outcome.succeeded for t in trajs)
    for t in trajs:  # history (two questions or more) and an examination before the first exam, as the rubric asks
        tools = [s.action.tool_call.name for s in t.steps if s.action.tool_call]
        first_order = tools.index("order")
        assert tools[:first_order].count("ask") >= 2 and "examine" in tools[:first_order], tools


def test_every_action_is_a_valid_call_in_the_policys_format() -> None:
    env = make("clinical-v0", **DEMO)
    trajs = play(env.task_set(20, seed=1))
    tools = env.reset_typed(seed=0, task=env.task_set(1, seed=1)[0]).tools
    for t in trajs:
        for s in t.steps:
            assert s.action.text.startswith(PREFIX) and len(s.action.text) <= MAX_CHARS, s.action.text
            assert parse_action(s.action.text, tools).parse_error is None and s.tool_error is None, s


def _chat(ecg: str) -> list[Message]:
    prompt = (
        "A 58-year-old man presents with chest pain. You have at most 4 turns; commit to a diagnosis with the "
        "diagnose tool before they run out."
    )
    order = '<tool_call>{"name": "order", "arguments": {"exam": "ECG", "impression": "STEMI", "reason": "chest pain"}}'
    trop = '<tool_call>{"name": "order", "arguments": {"exam": "Troponin I", "impression": "STEMI", "reason": "pain"}}'
    return [
        Message(role="system", content="You are the physician."),
        Message(role="user", content=prompt),
        Message(role="assistant", content=order + "</tool_call>"),
        Message(role="user", content=f"Here is the result: 12-lead ECG: {ecg}"),
        Message(role="assistant", content=trop + "</tool_call>"),
        Message(role="user", content="Here is the result: Troponin I 2.10 ng/mL (H, ref < 0.04)"),
        Message(role="assistant", content='<tool_call>{"name": "ask", "arguments": {"question": "Any sweating?"}}'),
        Message(role="user", content='Patient: "No, I haven\'t had sweating."'),
    ]


@pytest.mark.parametrize(
    ("ecg", "expected"),
    [
        ("ST elevation of 3 mm in leads II, III and aVF with reciprocal ST depression in I and aVL.", "ST-elevation"),
        ("Sinus rhythm; 1-2 mm horizontal ST depression in V4-V6; no ST elevation.", "Non-ST-elevation"),
    ],
)
def test_diagnosis_follows_the_results_it_was_shown(ecg: str, expected: str) -> None:
    action = asyncio.run(Teacher(0).act(_chat(ecg), []))
    call = json.loads(action.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert call["name"] == "diagnose" and call["arguments"]["diagnosis"].startswith(expected), call
    assert "ECG" in call["arguments"]["reason"] and "Troponin I" in call["arguments"]["reason"], call


def test_rubricgym_run_agent_teacher_writes_teacher_trajectories(tmp_path) -> None:
    out = tmp_path / "run"
    args = ["run", "clinical-v0", "--agent", "teacher", "--tasks", "4", "--env-arg", "specialty=cardiology"]
    result = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and {r["agent"] for r in rows} == {"teacher"}
    assert all(r["outcome"]["solved"] for r in rows)
