"""`rubricgym arena` end to end on scripted agents of two envs: ratings, cache, incremental runs, bad input."""

import json
import socket

import pytest
import yaml
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.suites.topology import expected_comparisons

runner = CliRunner()
ORACLE = {"name": "oracle", "kind": "scripted", "agent": "oracle"}
RANDOM = {"name": "random", "kind": "scripted", "agent": "random"}
RANDOM7 = {"name": "random7", "kind": "scripted", "agent": "random", "seed": 7}


def flat(result) -> str:
    return " ".join(result.output.split())


def arena(suite, agents, out, *extra):
    result = runner.invoke(
        app, ["arena", "--suite", str(suite), "--agents", str(agents), "--out", str(out), "--resamples", "50", *extra]
    )
    assert result.exit_code == 0, result.output
    return json.loads((out / "arena.json").read_text())


def test_round_robin_ranks_rates_and_caches(tmp_path, small_suite_file, agents_file):
    out = tmp_path / "arena"
    rep = arena(small_suite_file, agents_file(RANDOM, ORACLE, RANDOM7), out)
    tasks = 6 + 3
    assert rep["order"][0] == "oracle" and rep["matches"] == 3 and rep["games"] == 3 * tasks
    top = rep["agents"][0]
    assert top["wins"] == 2 * tasks and top["ci"][0] <= top["rating"] <= top["ci"][1]
    assert top["rating"] > max(a["ci"][1] for a in rep["agents"][1:])
    o = rep["names"].index("oracle")
    assert all(rate == 1.0 for k, rate in enumerate(rep["win_rate"][o]) if k != o)
    assert set(rep["per_entry"]) == {"toy", "ds"} and rep["per_entry"]["ds"]["oracle"] > 1000
    assert rep["position_bias"] == 0.0 and rep["unjudged"] == [] and rep["judge_calls"] == 3 * tasks
    assert rep["example"]["a"] == "oracle" or rep["example"]["b"] == "oracle"

    again = arena(small_suite_file, agents_file(RANDOM, ORACLE, RANDOM7), out)
    assert again["judge_calls"] == 0 and again["cached_verdicts"] == 3 * tasks
    assert [a["rating"] for a in again["agents"]] == [a["rating"] for a in rep["agents"]]

    verdicts = out / "verdicts.jsonl"
    lines = verdicts.read_text().splitlines(keepends=True)
    verdicts.write_text("".join(lines[:-1]) + lines[-1][:40])  # killed while writing the last verdict
    resumed = arena(small_suite_file, agents_file(RANDOM, ORACLE, RANDOM7), out)
    assert resumed["judge_calls"] == 1 and resumed["games"] == 3 * tasks
    assert [a["rating"] for a in resumed["agents"]] == [a["rating"] for a in rep["agents"]]

    guess = {"name": "guess", "kind": "scripted", "agent": "guess"}  # toy only: fails preflight on ds
    r = runner.invoke(
        app,
        [
            "arena",
            "--suite",
            str(small_suite_file),
            "--agents",
            str(agents_file(RANDOM, ORACLE, RANDOM7, guess)),
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 2 and "agents[3] (guess): env deepsearch-v0 has no scripted agent 'guess'" in flat(r)
    assert not (out / "trajectories" / "guess").exists()

    shortcut_free = {"name": "random3", "kind": "scripted", "agent": "random", "seed": 3}
    grown = arena(small_suite_file, agents_file(RANDOM, ORACLE, RANDOM7, shortcut_free), out)
    assert grown["judge_calls"] == 3 * tasks  # only the newcomer's matches are judged
    assert grown["cached_verdicts"] == 3 * tasks and grown["games"] == 6 * tasks


@pytest.mark.parametrize("topology", ["swiss", "single_elimination", "anchor"])
def test_cheaper_topologies_play_their_match_count(tmp_path, small_suite_file, agents_file, topology):
    agents = agents_file(ORACLE, RANDOM, RANDOM7, {"name": "random3", "kind": "scripted", "agent": "random", "seed": 3})
    rep = arena(small_suite_file, agents, tmp_path / topology, "--topology", topology)
    assert rep["matches"] == expected_comparisons(topology, 4)
    assert rep["order"][0] == "oracle"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "x", "kind": "wizard"}, "agents[2] (x): unknown agent kind 'wizard'"),
        ({"name": "step40", "kind": "checkpoint", "path": "runs/nowhere"}, "agents[2] (step40): no checkpoint at"),
        (
            {"name": "down", "kind": "openai", "base_url": "http://127.0.0.1:{port}/v1", "model": "m"},
            "agents[2] (down): endpoint http://127.0.0.1:{port}/v1 is unreachable",
        ),
        ({"name": "oops", "kind": "local", "model": "no-such-model"}, "agents[2] (oops): model 'no-such-model'"),
        ({"name": "t", "kind": "openai", "model": "m"}, "agents[2] (t): field 'base_url'"),
    ],
)
def test_bad_agents_fail_before_any_match_naming_the_entry(tmp_path, small_suite_file, agents_file, entry, message):
    port = _free_port()  # nothing listens there
    entry = yaml.safe_load(yaml.safe_dump(entry).replace("{port}", str(port)))
    out = tmp_path / "a"
    r = runner.invoke(
        app,
        [
            "arena",
            "--suite",
            str(small_suite_file),
            "--agents",
            str(agents_file(ORACLE, RANDOM, entry)),
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 2, r.output
    assert message.replace("{port}", str(port)) in flat(r)
    assert not out.exists()


def test_judge_errors_leave_games_unjudged_and_reported(tmp_path, agents_file):
    rubric = {
        "id": "needs-llm",
        "criteria": [
            {"id": "correct", "text": "Correct answer", "check": "correct"},
            {"id": "polite", "text": "Is the answer polite?", "judge": "Polite?"},
        ],
    }
    suite = tmp_path / "s.yaml"
    suite.write_text(
        yaml.safe_dump({"name": "s", "entries": [{"env": "toy-calculator-v0", "tasks": 3, "rubric": rubric}]})
    )
    rep = arena(suite, agents_file(ORACLE, RANDOM), tmp_path / "o")
    assert rep["games"] == 0 and len(rep["unjudged"]) == 3
    assert all("LLM judge" in u["error"] for u in rep["unjudged"])
    assert all(a["wins"] == a["losses"] == a["ties"] == 0 for a in rep["agents"])


@pytest.mark.slow
def test_the_local_model_plays_and_is_rated(tmp_path, agents_file, local_model_dir):
    suite = tmp_path / "s.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "name": "s",
                "entries": [
                    {
                        "env": "toy-calculator-v0",
                        "tasks": 3,
                        "kwargs": {"style": "expression", "min_ops": 1, "max_ops": 1, "max_steps": 2},
                    }
                ],
            }
        )
    )
    local = {
        "name": "smollm2",
        "kind": "local",
        "model": str(local_model_dir),
        "max_new_tokens": 24,
        "response_prefix": '<tool_call>{"name": "',
    }
    rep = arena(suite, agents_file(ORACLE, local, RANDOM), tmp_path / "o")
    assert rep["games"] == 9 and rep["order"][0] == "oracle"
    trajs = (tmp_path / "o" / "trajectories" / "smollm2" / "toy-calculator-v0" / "trajectories.jsonl").read_text()
    assert trajs.count("\n") == 3 and '<tool_call>{\\"name\\": \\"' in trajs
