"""`rubricgym score` and `rubricgym audit-judge` on a real toy-env run directory."""

import json

import pytest
import typer
from typer.testing import CliRunner

from rubricgym.core.store import TrajectoryStore
from rubricgym.rewards.cli import register
from rubricgym.rewards.prm import Breakdown
from rubricgym.rewards.rubric import Rubric

GOOD = '{"rationale": "fine", "met": true, "score": 1.0}'


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


@pytest.fixture
def run_dir(tmp_path, oracle_trajs, random_trajs):
    store = TrajectoryStore(tmp_path / "run")
    store.extend(oracle_trajs + random_trajs)
    return store.dir


@pytest.fixture
def mixed_rubric(tmp_path, toy_rubric):
    r = Rubric.from_dict(
        dict(
            toy_rubric,
            criteria=[
                *toy_rubric["criteria"],
                {
                    "id": "explains",
                    "text": "The agent says what each calculation is for.",
                    "level": "optional",
                    "judge": "Credit only if most steps say why.",
                },
            ],
        )
    )
    return r.save(tmp_path / "mixed.yaml")


def test_score_with_the_env_default_rubric(app, run_dir):
    res = CliRunner().invoke(app, ["score", str(run_dir)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    lines = (run_dir / "scores.jsonl").read_text().splitlines()
    assert len(lines) == 6
    bds = [Breakdown.model_validate_json(line) for line in lines]
    assert [b.total for b in bds[:3]] == [1.0, 1.0, 1.0] and all(b.valid for b in bds)
    summary = json.loads((run_dir / "scores_summary.json").read_text())
    assert summary["trajectories"] == 6 and summary["errors"] == 0
    assert {c["criterion"] for c in summary["criteria"]} == {
        "correct",
        "grounded",
        "clean",
        "used_calculator",
        "valid_step",
        "progress",
    }
    assert "valid_step" in res.output and "agent oracle: mean total 1.000" in res.output


def test_score_a_rubric_mixing_checks_and_llm_criteria(app, run_dir, mixed_rubric, stub_server):
    with stub_server(lambda body: GOOD) as server:
        args = [
            "score",
            str(run_dir),
            "--rubric",
            str(mixed_rubric),
            "--judge",
            server.base_url,
            "--judge-model",
            "stub",
        ]
        first = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert first.exit_code == 0, first.output
        assert len(server.requests) == 6
        bds = [Breakdown.model_validate_json(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
        llm = [v for b in bds for v in b.verdicts if v.criterion_id == "explains"]
        assert len(llm) == 6 and all(v.ok and v.judge == "llm:stub" for v in llm)
        again = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert again.exit_code == 0 and len(server.requests) == 6  # all six from the cache
    summary = json.loads((run_dir / "scores_summary.json").read_text())
    assert summary["cache"]["hits"] == 6 and summary["cache"]["misses"] == 0
    (explains,) = [c for c in summary["criteria"] if c["criterion"] == "explains"]
    assert explains["cached"] == 6 and explains["judged_by"] == "llm"


def test_llm_criteria_without_a_judge_are_reported_errors(app, run_dir, mixed_rubric):
    res = CliRunner().invoke(app, ["score", str(run_dir), "--rubric", str(mixed_rubric)], env={"COLUMNS": "200"})
    assert res.exit_code == 0
    assert "6 verdict(s) failed" in res.output
    bds = [Breakdown.model_validate_json(x) for x in (run_dir / "scores.jsonl").read_text().splitlines()]
    assert all(b.n_errors == 1 and not b.valid and b.total is not None for b in bds)


def test_score_errors(app, tmp_path):
    empty = CliRunner().invoke(app, ["score", str(tmp_path / "nothing")])
    assert empty.exit_code == 1 and "no trajectories" in empty.output
    store = TrajectoryStore(tmp_path / "r")
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "x", "criteria": [{"id": "a"}]}')
    store.path.write_text("")
    res = CliRunner().invoke(app, ["score", str(store.dir), "--rubric", str(bad)])
    assert res.exit_code == 1  # no trajectories is checked first
    res = CliRunner().invoke(app, ["score", str(store.dir), "--judge", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 1


def test_bad_rubric_file(app, run_dir, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"id": "x", "criteria": [{"id": "a"}]}')
    res = CliRunner().invoke(app, ["score", str(run_dir), "--rubric", str(bad)], env={"COLUMNS": "200"})
    assert res.exit_code == 2 and "criterion 'a', field 'text'" in res.output


def test_audit_judge_on_the_env_checks(app, tmp_path):
    out = tmp_path / "audit.json"
    res = CliRunner().invoke(app, ["audit-judge", "--tasks", "2", "--out", str(out)], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())["judge"]
    assert report["judge"] == "check"
    assert report["false_positive"]["essential"]["credited"] == 0
    assert report["false_positive"]["essential"]["judged"] == 2 * 11
    assert report["false_negative"]["essential"]["credited"] == 0
    assert "master-key FPR" in res.output and "step_by_step" in res.output
    totals = json.loads(out.read_text())["totals"]
    assert totals["good"] == 1.0 and totals["do_nothing"] == {"empty": 0.0, "give_up": 0.0}
    assert "total reward on toy-calculator-v0" in res.output and "known good" in res.output


def test_audit_judge_flags_a_rubric_that_pays_for_giving_up(app, tmp_path):
    rubric = tmp_path / "vacuous.yaml"
    rubric.write_text(
        "id: vacuous\ncriteria:\n"
        "  - {id: correct, text: Correct., level: essential, check: final_answer_correct}\n"
        "  - {id: clean, text: Every action is well-formed., level: pitfall, check: no_invalid_actions}\n"
    )
    res = CliRunner().invoke(app, ["audit-judge", "--tasks", "2", "--rubric", str(rubric)], env={"COLUMNS": "200"})
    # one placeholder answer is "clean": 0.9 / 1.9 for giving up
    assert res.exit_code == 1 and "FLAG" in res.output and "do-nothing 'give_up' earns 0.474" in res.output
