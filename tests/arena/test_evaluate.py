"""`rubricgym eval`: scripted agents of two envs, per-entry and overall CIs, resume, judge errors reported."""

import json

import yaml
from typer.testing import CliRunner

from rubricgym.arena.evaluate import weighted_bootstrap
from rubricgym.cli import app

runner = CliRunner()


def test_weighted_bootstrap_weights_entry_means():
    point, (lo, hi) = weighted_bootstrap({"a": [1.0, 1.0], "b": [0.0, 0.0]}, {"a": 0.75, "b": 0.25})
    assert point == 0.75 and lo == hi == 0.75
    point, ci = weighted_bootstrap({"a": [0.0, 1.0] * 10, "b": []}, {"a": 1.0, "b": 1.0})
    assert point == 0.5 and ci[0] < 0.5 < ci[1]
    assert weighted_bootstrap({}, {}) == (None, None)


def test_eval_scores_each_entry_resumes_and_writes_reports(tmp_path, small_suite_file):
    out = tmp_path / "oracle"
    r = runner.invoke(app, ["eval", "--suite", str(small_suite_file), "--agent", "oracle", "--out", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads((out / "report.json").read_text())
    assert [e["entry"] for e in report["entries"]] == ["toy", "ds"]
    assert all(e["reward"] == 1.0 and e["success"] == 1.0 and e["scored"] == e["tasks"] for e in report["entries"])
    assert report["reward"] == 1.0 and report["judge_errors"] == 0
    assert "<table>" in (out / "report.html").read_text()
    lines = (out / "toy" / "trajectories.jsonl").read_text().count("\n")
    again = runner.invoke(app, ["eval", "--suite", str(small_suite_file), "--agent", "oracle", "--out", str(out)])
    assert again.exit_code == 0 and (out / "toy" / "trajectories.jsonl").read_text().count("\n") == lines

    rand = tmp_path / "random"
    r = runner.invoke(
        app, ["eval", "--suite", str(small_suite_file), "--agent", "random", "--out", str(rand), "--json"]
    )
    assert r.exit_code == 0, r.output
    worse = json.loads(r.output)
    assert worse["reward"] < report["reward"]
    low, high = worse["reward_ci"]
    assert low <= worse["reward"] <= high


def test_judge_errors_are_reported_not_scored(tmp_path):
    rubric = {"id": "needs-llm", "criteria": [{"id": "polite", "text": "Is the answer polite?", "judge": "Polite?"}]}
    suite = tmp_path / "s.yaml"
    suite.write_text(
        yaml.safe_dump({"name": "s", "entries": [{"env": "toy-calculator-v0", "tasks": 2, "rubric": rubric}]})
    )
    out = tmp_path / "o"
    r = runner.invoke(app, ["eval", "--suite", str(suite), "--agent", "oracle", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["judge_errors"] == 2 and rep["reward"] is None and rep["entries"][0]["scored"] == 0
    rows = json.loads((out / "report.json").read_text())["rows"]
    assert all(row["reward"] is None and "LLM judge" in row["judge_error"] for row in rows)


def test_an_agent_no_env_has_fails_before_playing(tmp_path, small_suite_file):
    r = runner.invoke(
        app, ["eval", "--suite", str(small_suite_file), "--agent", "shortcut", "--out", str(tmp_path / "x")]
    )
    assert r.exit_code == 2 and "toy-calculator-v0 has no scripted agent 'shortcut'" in " ".join(r.output.split())
    assert not (tmp_path / "x").exists()
