"""The served viewer over each kind of run directory: what a page says, and what a wrong address answers."""

from __future__ import annotations

import re

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from rubricgym.cli import app as main_app
from rubricgym.viewer.app import create_app
from rubricgym.viewer.cli import register


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("viewer-eval")
    suite = tmp / "suite.yaml"
    entries = [
        {"env": "toy-calculator-v0", "name": "easy", "kwargs": {"min_ops": 1, "max_ops": 1}, "tasks": 3},
        {"env": "toy-calculator-v0", "name": "hard", "kwargs": {"min_ops": 3, "max_ops": 3}, "tasks": 2},
    ]
    suite.write_text(yaml.safe_dump({"name": "two", "version": "1", "entries": entries}))
    r = CliRunner().invoke(main_app, ["eval", "--suite", str(suite), "--out", str(tmp / "eval"), "--agent", "random"])
    assert r.exit_code == 0, r.output
    return tmp / "eval"


def test_an_eval_run_lists_its_entries_and_scores_an_episode_with_the_env_checks(eval_run):
    client = TestClient(create_app(eval_run))
    assert "suite evaluation" in client.get("/").text
    hard = client.get("/r/run/episodes", params={"entry": "hard"}).text
    assert hard.count('class="ep ') == 2 and "2 episode(s) match" in hard
    episode = client.get("/r/run/ep/1/0").text
    assert "the env&#39;s programmatic checks, run now by the viewer" in episode  # no scores.jsonl in an eval
    assert "Trajectory-level criteria" in episode and "Aggregation" in episode


def test_wrong_addresses_say_what_exists(eval_run, runs):
    client = TestClient(create_app(eval_run))
    r = client.get("/r/run/ep/7/0")
    assert r.status_code == 404 and "no episode 7/0" in r.text
    r = client.get("/r/run/dashboard")
    assert r.status_code == 404 and "only training runs have a dashboard" in r.text
    r = client.get("/r/run/episodes", params={"page": "40"})
    assert r.status_code == 404 and "fill 1 page(s)" in r.text
    r = client.get("/r/nope/")
    assert r.status_code == 404 and "runs: run" in r.text
    r = TestClient(create_app(runs)).get("/r/oracle/episodes", params={"min_total": "high"})
    assert r.status_code == 400 and "min_total must be a number" in r.text


def test_sorting_by_total_puts_the_best_first(runs):
    client = TestClient(create_app(runs))
    page = client.get("/r/oracle/episodes", params={"sort": "total", "desc": "1"}).text
    totals = re.findall(r'data-total="([^"]*)"', page)
    assert totals and totals == sorted(totals, reverse=True)


def test_the_command_refuses_a_path_without_runs(tmp_path):
    import typer

    app = typer.Typer()
    register(app)
    app.command("noop", hidden=True)(lambda: None)
    r = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert r.exit_code == 2 and "holds no run directory" in r.output
    (tmp_path / "file.txt").write_text("x")
    r = CliRunner().invoke(app, ["view", str(tmp_path / "file.txt")])
    assert r.exit_code == 2 and "is a file" in r.output


def test_text_from_a_run_is_escaped_not_executed(runs, tmp_path):
    import json

    run = tmp_path / "xss"
    run.mkdir()
    d = json.loads((runs / "random" / "trajectories.jsonl").read_text().splitlines()[0])
    d["steps"][0]["action"]["text"] = "<script>alert('x')</script>"
    d["task"]["id"] = "<img src=x onerror=alert(1)>"
    (run / "trajectories.jsonl").write_text(json.dumps(d) + "\n")
    client = TestClient(create_app(run))
    for url in ("/r/run/episodes", "/r/run/ep/0/0"):
        text = client.get(url).text
        assert "<script>alert" not in text and "<img src=x" not in text
        assert "&lt;img src=x onerror=alert(1)&gt;" in text
