"""`rubricgym check` and `audit-judge` on a user's data file (issue 44, items 5 and 7): a 1-record file is checked on
its one record, tasks are drawn without repeats, a row that played nothing fails, both commands take the same
``--env-arg`` data arguments, and advice for a file says what to change in the file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.registry import register, spec, unregister
from rubricgym.core.types import Task
from rubricgym.env_checker import _leaks, check_env_id
from rubricgym.envs.toy.calculator import CalculatorEnv

ENV_ID = "fixit-problems-file-v0"


class ProblemsFile(CalculatorEnv):
    """The calculator over a user's JSONL file of problems (``{"id", "prompt", "answer", "steps"}`` per line), the
    way clinical-v0 takes ``cases=FILE``: each record once, in file order, and no more than the file holds."""

    env_id = ENV_ID

    def __init__(self, problems: str | None = None, max_steps: int | None = None, render_mode: str | None = None):
        super().__init__(max_steps=max_steps, render_mode=render_mode)
        self.path = problems
        lines = Path(problems).read_text().splitlines() if problems else []
        self.records = [(json.loads(line), n) for n, line in enumerate(lines, 1) if line.strip()]

    def _record_task(self, rec: dict, split: str) -> Task:
        return Task(
            id=rec["id"],
            env_id=self.env_id,
            split=split,
            prompt=rec["prompt"],
            params={"n_ops": len(rec["steps"]), "style": "word"},
            hidden={"answer": rec["answer"], "steps": rec["steps"]},
        )

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        if not self.records:
            return super().task_set(n, seed, split)
        if n > len(self.records):
            raise ValueError(f"the problems file has {len(self.records)} problem(s), fewer than the {n} asked for")
        return [self._record_task(r, split) for r, _ in self.records[:n]]

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        if not self.records:
            return super().sample_task(rng, split)
        return self._record_task(self.records[int(rng.integers(len(self.records)))][0], split)

    def task_origin(self, task: Task) -> str:
        return next((f"{task.id} at {self.path}:{n}" for r, n in self.records if r["id"] == task.id), "")


def _generated() -> list[dict]:
    """Three word problems as a user's file holds them (the generator's own wording, so every agent can read them)."""
    tasks = CalculatorEnv().task_set(3, seed=0)
    return [
        {"id": f"p{i}", "prompt": t.prompt, "answer": t.hidden["answer"], "steps": t.hidden["steps"]}
        for i, t in enumerate(tasks, 1)
    ]


PROBLEMS = _generated()


@pytest.fixture
def problems(tmp_path) -> Iterator[Path]:
    register(ENV_ID, ProblemsFile, replace=True)
    yield tmp_path
    unregister(ENV_ID)


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows(report) -> dict[str, tuple[bool, str]]:
    return {name: (ok, " ".join(detail.split())) for name, ok, detail in report.rows}


def test_a_one_record_file_is_checked_on_its_record_and_says_so(problems):
    one = write(problems / "one.jsonl", PROBLEMS[1:2])  # (on p1 alone the random agent averages 0.11 > 0.1)
    report = rows(check_env_id(ENV_ID, fuzz=5, env_kwargs={"problems": str(one)}, tasks=2))
    failed = {k: v for k, v in report.items() if not v[0]}
    assert not failed, failed
    assert (
        f"the source of problems={one} holds 1 task(s), fewer than --tasks 2: the audits play all 1"
        in (report["tasks the audits play (--tasks 2)"][1])
    )
    assert report["distinct task ids"][1].startswith("the source holds 1 distinct task(s)")
    assert "0 episodes" not in report["leak audit: no hidden value reaches the agent side"][1]


def test_tasks_are_drawn_without_repeats_when_the_source_is_small(problems):
    three = write(problems / "three.jsonl", PROBLEMS)
    ok, detail = rows(check_env_id(ENV_ID, fuzz=5, env_kwargs={"problems": str(three)}, tasks=3))["distinct task ids"]
    assert ok and detail.startswith("the source holds 3 distinct task(s) (no new one in 400 draws): checked them all")


def test_a_row_that_played_nothing_fails(problems):
    """The old leak row passed after 0 episodes when the file held fewer tasks than it asked for."""
    one = write(problems / "one.jsonl", PROBLEMS[:1])
    env_spec = spec(ENV_ID)
    with pytest.raises(AssertionError, match="played no episode, so nothing was audited"):
        _leaks(env_spec, 0, {"problems": str(one)}, 2)


def test_leak_advice_for_a_file_names_the_record_to_edit(problems):
    second = PROBLEMS[1]
    leaky = write(
        problems / "leaky.jsonl", [PROBLEMS[0], {**second, "prompt": f"{second['prompt']} ({second['answer']})"}]
    )
    ok, detail = rows(check_env_id(ENV_ID, fuzz=5, env_kwargs={"problems": str(leaky)}))[
        "leak audit: no hidden value reaches the agent side"
    ]
    assert not ok and f"p2 at {leaky}:2" in detail
    assert f"the leaking record is in your data, problems={leaky}: edit the fields the agent reads" in detail
    assert "Step.info" not in detail and "RubricEnv.discoverable" not in detail


def test_a_guessable_answer_in_the_file_gets_file_advice_and_the_audit_judge_call_with_the_data(problems):
    """Records whose answer is 0: giving up (answering nothing computed) earns; the fix is in the file."""
    zero = [{**p, "steps": ["5 - 5"], "answer": 0} for p in PROBLEMS[:2]]
    guessable = write(problems / "zero.jsonl", zero)
    report = rows(check_env_id(ENV_ID, fuzz=5, env_kwargs={"problems": str(guessable)}))
    ok, detail = report["default rubric pays nothing for nothing"]
    assert not ok and "do-nothing 'give_up' earns 0.700" in detail
    assert f"On your data (problems={guessable}): look at the records audited (p1 at {guessable}:1" in detail
    assert "a probe that scores means a record's answer can be guessed without the work" in detail
    assert f"details: rubricgym audit-judge --env {ENV_ID} --env-arg problems={guessable}" in detail
    assert "gate vacuous criteria" not in detail
    ok, detail = report["outcome consistency: failed work never outranks solved work"]
    assert not ok and f"On your data (problems={guessable})" in detail and "aggregation: {method" not in detail


def test_check_and_audit_judge_take_the_same_data_arguments(problems):
    one = write(problems / "one.jsonl", PROBLEMS[1:2])
    data = ["--env-arg", f"problems={one}"]
    r = CliRunner().invoke(app, ["check", ENV_ID, "--fuzz", "5", "--episodes", "3", *data])
    assert r.exit_code == 0, r.output
    assert f"rubricgym check {ENV_ID}: 17/17 checks" in r.output  # progress, as plain lines outside a terminal
    out = problems / "audit.json"
    r = CliRunner().invoke(app, ["audit-judge", "--env", ENV_ID, "--tasks", "3", "--out", str(out), *data])
    assert r.exit_code == 0, r.output
    audit = json.loads(out.read_text())
    assert audit["totals"]["tasks"] == 1  # the file's one record, not 3 generated problems
    r = CliRunner().invoke(app, ["audit-judge", "--env", ENV_ID, "--env-arg", "problemz=x.jsonl"])
    assert r.exit_code == 2 and "problemz" in r.output
