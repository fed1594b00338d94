"""Every number a user types is finite and bounded, and the message gives the bound (issue 40, item 8):
``audit-judge --threshold nan`` never flagged, ``serve --idle-timeout 1e-9`` spun a core, ``--workers`` had no
ceiling, and training configs took ``lr: 1e308`` and ``steps: 10**15``."""

from __future__ import annotations

from typing import Annotated

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.core.bounds import bound_error, bounded
from rubricgym.server import ServerConfig
from rubricgym.trainers.config import ConfigError, validate_config

runner = CliRunner()


def _flat(result) -> str:
    """The output with rich's box borders and line breaks removed."""
    return " ".join(result.output.replace("│", " ").split())


def test_bound_error_says_the_range():
    assert bound_error(0.5, 0.0, 1.0) is None and bound_error(1, 1, None) is None
    assert bound_error(float("nan"), 0.0, 1.0) == "must be a finite number in [0.0, 1.0], got nan"
    assert bound_error(float("inf"), 0, None) == "must be a finite number in [0, ...], got inf"
    assert bound_error(0, 1, 64) == "must be at least 1 (a number in [1, 64]), got 0"
    assert bound_error(1000, 1, 64) == "must be at most 64 (a number in [1, 64]), got 1000"


def test_bounded_is_a_typer_callback_for_every_numeric_option():
    probe = typer.Typer()

    @probe.command()
    def go(
        x: Annotated[float, typer.Option(callback=bounded(0.0, 1.0))] = 0.5,
        n: Annotated[list[int] | None, typer.Option(callback=bounded(1, 3))] = None,
    ):
        print(f"ok {x} {n or []}")

    assert runner.invoke(probe, ["--x", "0.25", "--n", "2"]).output.strip() == "ok 0.25 [2]"
    for args, said in [
        (["--x", "nan"], "--x must be a finite number in [0.0, 1.0], got nan"),
        (["--x", "-inf"], "--x must be a finite number"),
        (["--x", "1.5"], "--x must be at most 1.0"),
        (["--n", "1", "--n", "9"], "--n must be at most 3"),
    ]:
        r = runner.invoke(probe, args)
        assert r.exit_code == 2 and said in _flat(r), (args, r.output)


@pytest.mark.parametrize("value", ["nan", "inf", "-0.5", "2"])
def test_audit_judge_threshold_must_be_a_share(value):
    """``--threshold nan`` compared false with every total: the audit never flagged anything."""
    r = runner.invoke(app, ["audit-judge", "--threshold", value], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "--threshold must be" in _flat(r) and "[0.0, 1.0]" in _flat(r), r.output


def test_audit_judge_good_min_and_tasks_are_bounded():
    r = runner.invoke(app, ["audit-judge", "--good-min", "nan"], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "--good-min must be a finite number" in _flat(r)
    r = runner.invoke(app, ["audit-judge", "--tasks", "0"], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "--tasks must be at least 1" in _flat(r)


@pytest.mark.parametrize(
    "args, said",
    [
        (["--idle-timeout", "1e-9"], "--idle-timeout must be at least 0.1"),
        (["--idle-timeout", "nan"], "--idle-timeout must be a finite number"),
        (["--workers", "1000"], "--workers must be at most 64"),
        (["--max-message-bytes", "10"], "--max-message-bytes must be at least 1024"),
        (["--max-tasks", "0"], "--max-tasks must be at least 1"),
        (["--port", "70000"], "--port must be at most 65535"),
    ],
)
def test_serve_refuses_numbers_out_of_bounds_before_it_starts(args, said):
    r = runner.invoke(app, ["serve", "toy-calculator-v0", *args], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and said in _flat(r), r.output


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("idle_timeout_s", 1e-9, "greater than or equal to 0.1"),  # the reaper slept a quarter of it: a spin
        ("idle_timeout_s", float("nan"), "idle_timeout_s"),
        ("workers", 1000, "less than or equal to 64"),
        ("max_sessions", 10**9, "less than or equal to 10000"),
        ("issued_tasks", 10**12, "less than or equal to 1000000"),
    ],
)
def test_server_config_bounds(field, value, said):
    with pytest.raises(ValidationError, match=said):
        ServerConfig(env_id="toy-calculator-v0", **{field: value})


@pytest.mark.parametrize(
    "data, said",
    [
        ({"optim": {"lr": 1e308}}, "field 'optim.lr': Value error, a learning rate must be at most 1e+30, got 1e+308"),
        ({"steps": 10**15}, "field 'steps': Input should be less than or equal to 10000000"),
        ({"group_size": 10**9}, "field 'group_size'"),
        ({"optim": {"betas": [0.9, 1.5]}}, "field 'optim.betas.1'"),
        ({"loss": {"entropy_coef": 1e300}}, "field 'loss.entropy_coef'"),
        ({"env": {"train_tasks": 10**12}}, "field 'env.train_tasks'"),
        ({"generation": {"temperature": 1e9}}, "field 'generation.temperature'"),
        ({"warm_start": {"agent": "teacher", "lr": 1e100}}, "field 'warm_start.lr'"),
        ({"warm_start": {"agent": "teacher", "steps": 10**15}}, "field 'warm_start.steps'"),
        ({"guidance": {"threshold": 1e30}}, "field 'guidance.threshold'"),
        ({"time_budget_s": 1e300}, "field 'time_budget_s'"),
    ],
)
def test_training_configs_bound_every_number(data, said):
    with pytest.raises(ConfigError) as e:
        validate_config(data, "train.yaml")
    assert said in str(e.value) and str(e.value).startswith("train.yaml"), str(e.value)


@pytest.mark.parametrize(
    "args, said",
    [
        (["--temperature", "nan"], "--temperature must be a finite number"),
        (["--tasks", str(10**15)], "--tasks must be at most 1000000"),
        (["--seed", "-1"], "--seed must be at least 0"),
        (["--concurrency", "100000"], "--concurrency must be at most 4096"),
    ],
)
def test_run_refuses_numbers_out_of_bounds(tmp_path, args, said):
    out = tmp_path / "r"
    r = runner.invoke(app, ["run", "toy-calculator-v0", *args, "--out", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and said in _flat(r), r.output
    assert not out.exists()


@pytest.mark.parametrize(
    "args, said",
    [
        (["--timeout", "nan"], "--timeout must be a finite number"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--max-retries", "-1"], "--max-retries must be at least 0"),
    ],
)
def test_score_refuses_numbers_out_of_bounds(tmp_path, args, said):
    r = runner.invoke(app, ["score", str(tmp_path), *args], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and said in _flat(r), r.output


def test_check_and_show_counts_are_bounded(tmp_path):
    r = runner.invoke(app, ["check", "toy-calculator-v0", "--fuzz", str(10**15)], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "--fuzz must be at most 1000000" in _flat(r)
    r = runner.invoke(app, ["show", str(tmp_path), "--examples", "-1"], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "--examples must be at least 0" in _flat(r)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["export", "RUN", "x.jsonl", "--format", "sft", "--min-score", "nan"], "--min-score"),
        (["arena", "--suite", "toy", "--agents", "a.yaml", "--resamples", "0"], "--resamples"),
        (["swe", "build", "pkg==1.0", "--out", "x", "--timeout-factor", "inf"], "--timeout-factor"),
    ],
)
def test_the_remaining_numeric_options_are_bounded(args, option):
    from typer.testing import CliRunner

    from rubricgym.cli import app

    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2 and option in result.output, result.output


def test_a_scaffold_name_with_a_trailing_newline_is_refused():
    from rubricgym.scaffold import Names

    with pytest.raises(ValueError):
        Names.of("fine\n")
