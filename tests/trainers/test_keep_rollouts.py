"""A training run keeps its scored rollouts, and `rubricgym score RUN_DIR` re-scores them with the rubric the trainer
used (recorded in run.json), reproducing the totals it optimised (issue #24, "show it")."""

import json

import pytest
from typer.testing import CliRunner

import rubricgym
from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore
from rubricgym.trainers.trainer import Trainer


def _entry_rubric() -> dict:
    toy = rubricgym.spec("toy-calculator-v0").load().default_rubric().model_dump(exclude_none=True)
    return {**toy, "id": "entry", "criteria": [c for c in toy["criteria"] if c["id"] != "used_calculator"]}


def test_score_reproduces_the_training_time_totals_of_the_kept_rollouts(tiny_config, tmp_path):
    cfg = tiny_config(tmp_path / "run", steps=2, env={"rubric": _entry_rubric()})
    Trainer(cfg).run()
    trajs = TrajectoryStore(cfg.run_dir).load()
    per_step = cfg.tasks_per_step * cfg.group_size
    assert sorted(t.metrics["train_step"] for t in trajs) == [1.0] * per_step + [2.0] * per_step
    assert all("rubric" in t.rewards for t in trajs)
    assert json.loads((cfg.run_dir / "run.json").read_text())["rubrics"][cfg.env.id]["id"] == "entry"

    result = CliRunner().invoke(app, ["score", str(cfg.run_dir)])
    assert result.exit_code == 0, result.output
    assert f"training-time totals reproduced: {2 * per_step} of {2 * per_step}" in result.output
    summary = json.loads((cfg.run_dir / "scores_summary.json").read_text())
    assert [r["id"] for r in summary["rubrics"]] == ["entry"]  # the run's rubric, not the env default

    # a stored total the rubric does not give back is reported
    lines = (cfg.run_dir / "trajectories.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["rewards"]["rubric"] += 0.5
    (cfg.run_dir / "trajectories.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    result = CliRunner().invoke(app, ["score", str(cfg.run_dir)])
    assert f"training-time totals reproduced: {2 * per_step - 1} of {2 * per_step}" in result.output


@pytest.mark.slow
def test_a_resumed_run_keeps_each_step_s_rollouts_once(tiny_config, tmp_path):
    part = tiny_config(tmp_path / "part", steps=1)
    Trainer(part).run()
    Trainer(part.with_overrides(steps=2)).run(resume=True)
    steps = [t.metrics["train_step"] for t in TrajectoryStore(part.run_dir).load()]
    per_step = part.tasks_per_step * part.group_size
    assert sorted(steps) == [1.0] * per_step + [2.0] * per_step
    Trainer(part).run()  # a fresh run in the same directory starts the file anew
    assert len(TrajectoryStore(part.run_dir).load()) == per_step
