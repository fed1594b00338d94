"""``--env-arg`` / ``--env-config`` on the commands that take an env id (issue 9, item 7)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.store import TrajectoryStore

runner = CliRunner()


def test_run_passes_env_args_and_a_config_file(tmp_path):
    cfg = tmp_path / "env.json"
    cfg.write_text(json.dumps({"min_ops": 1, "max_ops": 1}))
    out = tmp_path / "r"
    r = runner.invoke(
        app,
        [
            "run",
            "toy-calculator-v0",
            "--tasks",
            "3",
            "--out",
            str(out),
            "--env-config",
            str(cfg),
            "--env-arg",
            "style=expression",
        ],
    )
    assert r.exit_code == 0, r.output
    trajs = TrajectoryStore(out).load()
    assert len(trajs) == 3 and all(t.task.prompt.startswith("Compute ") for t in trajs)
    assert TrajectoryStore(out).meta()["env_kwargs"] == {"min_ops": 1, "max_ops": 1, "style": "expression"}


def test_check_passes_env_args_and_bad_ones_fail_early(tmp_path):
    r = runner.invoke(app, ["check", "toy-calculator-v0", "--fuzz", "5", "--env-arg", "style=expression"])
    assert r.exit_code == 0, r.output
    for cmd in (["check", "toy-calculator-v0"], ["run", "toy-calculator-v0", "--out", str(tmp_path / "x")]):
        bad = runner.invoke(app, [*cmd, "--env-arg", "styel=expression"])
        assert bad.exit_code == 2 and "styel" in bad.output and "style" in bad.output, bad.output
        bad = runner.invoke(app, [*cmd, "--env-arg", "style"])
        assert bad.exit_code == 2 and "KEY=VALUE" in bad.output
