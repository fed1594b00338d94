"""`rubricgym score` refuses rubrics that would give totals that lie, before anything is scored or overwritten."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from rubricgym.core.store import TrajectoryStore
from rubricgym.envs.toy.calculator import CalculatorEnv
from rubricgym.rewards.cli import register
from rubricgym.rewards.rubric import Rubric, RubricError


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _rubric(path, **criterion):
    base = CalculatorEnv.default_rubric().model_dump(exclude_none=True)
    data = dict(base, criteria=[*base["criteria"], {"id": "extra", "text": "x", "level": "important", **criterion}])
    path.write_text(__import__("yaml").safe_dump(data))
    return path


def test_a_rubric_naming_an_unknown_check_fails_before_scoring(app, tmp_path, oracle_trajs):
    run_dir = TrajectoryStore(tmp_path / "run")
    run_dir.extend(oracle_trajs)
    scores = tmp_path / "run" / "scores.jsonl"
    scores.write_text("previous scores\n")
    r = CliRunner().invoke(
        app,
        ["score", str(tmp_path / "run"), "--rubric", str(_rubric(tmp_path / "r.yaml", check="final_answer_corect"))],
    )
    out = " ".join(r.output.split())
    assert r.exit_code == 2 and "final_answer_corect" in out and "final_answer_correct" in out, r.output
    assert scores.read_text() == "previous scores\n", "scores.jsonl was overwritten by a failed scoring"


@pytest.mark.parametrize("weight", ["1e999", "-1e999", ".nan"])
def test_non_finite_weights_are_rejected(tmp_path, weight):
    path = tmp_path / "r.yaml"
    _rubric(path, check="final_answer_correct")
    path.write_text(path.read_text().replace("id: extra", f"id: extra\n  weight: {weight}"))
    with pytest.raises(RubricError, match="extra.*weight.*finite"):
        Rubric.load(path)


def test_a_binary_rubric_file_names_the_file(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00")
    with pytest.raises(RubricError, match="r.yaml.*binary"):
        Rubric.load(path)


def test_a_misspelled_run_dir_is_not_created(app, tmp_path):
    r = CliRunner().invoke(app, ["score", str(tmp_path / "runz")])
    assert r.exit_code == 1 and "no trajectories.jsonl" in " ".join(r.output.split())
    assert not (tmp_path / "runz").exists()
