import json

from typer.testing import CliRunner

from rubricgym.cli import app

runner = CliRunner()


def flat(result) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def test_envs_json_lists_the_toy_env():
    result = runner.invoke(app, ["envs", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["id"]: r for r in json.loads(result.output)}
    assert rows["toy-calculator-v0"]["gym_id"] == "rubricgym/ToyCalculator-v0"
    assert {"oracle", "random"} <= set(rows["toy-calculator-v0"]["agents"])


def test_run_then_show_json(tmp_path):
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", "toy-calculator-v0", "--agent", "oracle", "--tasks", "20", "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(runner.invoke(app, ["show", str(out), "--json"]).output)
    assert summary["count"] == 20 and summary["rewards"]["env_reward"]["mean"] == 1.0
    assert summary["errors"]["parse_errors"] == 0
    again = runner.invoke(app, ["run", "toy-calculator-v0", "--agent", "oracle", "--tasks", "20", "--out", str(out)])
    assert "20 tasks already there" in flat(again)
    shown = runner.invoke(app, ["show", str(out)])
    assert shown.exit_code == 0 and "env_reward" in shown.output
    # the oracle answers every task once and never sends an unparsable turn
    assert summary["tools"]["answer"] == {"calls": 20, "episodes": 20, "errors": 0}
    assert "(no call)" not in summary["tools"] and "answer 20 (20/20 episodes)" in flat(shown)


def test_show_counts_every_turn_under_its_tool_or_no_call(tmp_path):
    out = tmp_path / "r"
    result = runner.invoke(app, ["run", "toy-calculator-v0", "--agent", "random", "--tasks", "12", "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(runner.invoke(app, ["show", str(out), "--json"]).output)
    tools = summary["tools"]
    assert sum(row["calls"] for row in tools.values()) == summary["steps"]["mean"] * summary["count"]
    assert tools["(no call)"]["calls"] == summary["errors"]["parse_errors"] > 0
    assert sum(row["errors"] for row in tools.values()) == summary["errors"]["tool_errors"]
    assert all(1 <= row["episodes"] <= min(row["calls"], summary["count"]) for row in tools.values())
    assert list(tools) == sorted(tools, key=lambda name: -tools[name]["calls"])


def test_bad_input_gives_clear_errors(tmp_path):
    r = runner.invoke(app, ["run", "toy-calculater-v0", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "toy-calculator-v0" in flat(r)
    r = runner.invoke(app, ["run", "toy-calculator-v0", "--agent", "wizard", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "oracle" in flat(r)
    r = runner.invoke(app, ["run", "toy-calculator-v0", "--agent", "openai", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--base-url" in flat(r)
    (tmp_path / "t.jsonl").write_text('{"id": "x"}\n')
    r = runner.invoke(
        app, ["run", "toy-calculator-v0", "--task-file", str(tmp_path / "t.jsonl"), "--out", str(tmp_path)]
    )
    assert r.exit_code == 2 and "t.jsonl:1" in flat(r) and "prompt" in flat(r)
    r = runner.invoke(app, ["show", str(tmp_path / "nothing")])
    assert r.exit_code == 2 and "no trajectories.jsonl" in flat(r)


def test_endpoint_down_fails_clearly_and_keeps_going(tmp_path):
    r = runner.invoke(
        app,
        [
            "run",
            "toy-calculator-v0",
            "--agent",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--tasks",
            "2",
            "--out",
            str(tmp_path / "r"),
            "--concurrency",
            "1",
        ],
    )
    assert r.exit_code == 1 and "failed" in flat(r) and "--resume" in flat(r)


def test_check_command_table_and_exit_code():
    r = runner.invoke(app, ["check", "toy-calculator-v0", "--fuzz", "50"])
    assert r.exit_code == 0, r.output
    assert "gymnasium check_env" in flat(r) and "FAIL" not in flat(r)


def test_demo_rejects_a_bad_estimator_before_loading_anything(tmp_path):
    result = runner.invoke(app, ["demo", "--advantage", "ppo", "--out", str(tmp_path / "d")])
    assert result.exit_code == 2
    assert "advantage.estimator" in flat(result) and not (tmp_path / "d").exists()


def test_demo_config_trains_on_expression_problems_the_base_model_can_sometimes_solve():
    from rubricgym.trainers.demo import demo_config

    cfg = demo_config(12)
    assert cfg.env.kwargs["style"] == "expression" and cfg.generation.response_prefix.startswith("<tool_call>")
    assert 0 < cfg.time_budget_s <= 12 * 60 and cfg.advantage.estimator == "grpo"


def test_openmp_waits_passively_only_on_a_loaded_machine(monkeypatch):
    import os

    from rubricgym.cli import shared_cores_wait_policy

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.2, 0.1))
    assert shared_cores_wait_policy() is None and "OMP_WAIT_POLICY" not in os.environ  # idle: spinning is faster
    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    assert shared_cores_wait_policy() == "PASSIVE" and os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert shared_cores_wait_policy() is None and os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # the user's choice
