"""PRM-guided test-time scaling in `rubricgym eval` and the arena: a tts-wrapped noisy oracle beats the same noisy
oracle, the reports say which agent was wrapped and how, and bad tts settings fail before any episode runs."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from rubricgym.arena.agents import AgentsFileError, LocalSpec, ScriptedSpec, load_agents, spec_from_cli
from rubricgym.arena.arena import run_arena
from rubricgym.cli import app
from rubricgym.suites.suite import load_suite

runner = CliRunner()
TOY = {
    "name": "toy-tts",
    "version": "1",
    "entries": [{"env": "toy-calculator-v0", "name": "toy", "kwargs": {"min_ops": 2, "max_ops": 3}, "tasks": 8}],
}
NOISY = "noisy(p=0.6):oracle"


@pytest.fixture
def toy_suite(tmp_path):
    path = tmp_path / "toy-tts.yaml"
    path.write_text(yaml.safe_dump(TOY))
    return path


def test_eval_agent_takes_the_run_syntax_and_tts_beats_the_noisy_agent(tmp_path, toy_suite):
    reports = {}
    for agent in (NOISY, f"tts(k=4,beta=10,keep=0.5):{NOISY}"):
        out = tmp_path / agent.split("(")[0]
        r = runner.invoke(app, ["eval", "--suite", str(toy_suite), "--agent", agent, "--out", str(out), "--json"])
        assert r.exit_code == 0, r.output
        reports[agent] = json.loads((out / "report.json").read_text())
    plain, tts = reports[NOISY], reports[f"tts(k=4,beta=10,keep=0.5):{NOISY}"]
    assert tts["success"] > plain["success"] and tts["reward"] > plain["reward"]
    assert plain["agent_spec"]["tts"] is None and plain["agent_spec"]["agent"] == NOISY
    assert tts["agent"].startswith("tts-k-4") and tts["agent_spec"]["agent"] == NOISY
    assert tts["agent_spec"]["tts"] == {"k": 4, "beta": 10.0, "keep": 0.5}


def test_arena_entry_with_tts_outranks_the_same_agent_without(tmp_path, toy_suite, agents_file):
    path = agents_file(
        {"name": "noisy", "kind": "scripted", "agent": NOISY},
        {"name": "noisy-tts", "kind": "scripted", "agent": NOISY, "tts": {"k": 4, "beta": 10, "keep": 0.5}},
    )
    rep = asyncio_run(run_arena(load_suite(str(toy_suite)), load_agents(path), tmp_path / "arena", progress=False))
    assert rep["order"] == ["noisy-tts", "noisy"]
    by = {a["name"]: a for a in rep["agents"]}
    assert by["noisy-tts"]["wins"] > by["noisy-tts"]["losses"]
    assert by["noisy-tts"]["tts"] == {"k": 4, "beta": 10.0, "keep": 0.5} and by["noisy"]["tts"] is None
    saved = json.loads((tmp_path / "arena" / "arena.json").read_text())
    assert saved["agents"][0]["tts"]["k"] == 4


def asyncio_run(coro):
    import asyncio

    return asyncio.run(coro)


@pytest.mark.parametrize(
    ("tts", "field"),
    [
        ({"k": 0}, "tts.k"),
        ({"k": 4, "keep": 1.5}, "tts.keep"),
        ({"k": 4, "beta": -1}, "tts.beta"),
        ({"k": 4, "temperature": 1}, "tts.temperature"),
        ("four", "tts"),
    ],
)
def test_bad_tts_fields_name_the_file_entry_and_field(tmp_path, toy_suite, agents_file, tts, field):
    path = agents_file(
        {"name": "a", "kind": "scripted", "agent": "oracle"}, {"name": "b", "kind": "scripted", "tts": tts}
    )
    with pytest.raises(AgentsFileError) as e:
        load_agents(path)
    assert f"{path}: agents[1] (b): field '{field}'" in str(e.value)
    r = runner.invoke(
        app, ["arena", "--suite", str(toy_suite), "--agents", str(path), "--out", str(tmp_path / "never")]
    )
    assert r.exit_code == 2 and "agents[1] (b)" in r.output and not (tmp_path / "never").exists()


def test_greedy_model_entry_with_tts_is_refused(agents_file):
    path = agents_file(
        {"name": "a", "kind": "scripted", "agent": "oracle"}, {"name": "m", "kind": "local", "tts": {"k": 4}}
    )
    with pytest.raises(AgentsFileError, match=r"agents\[1\] \(m\).*temperature is 0"):
        load_agents(path)


def test_eval_agent_wrappers_parse_and_fail_before_any_episode(tmp_path, toy_suite):
    spec = spec_from_cli("tts(k=2):local")
    assert isinstance(spec, LocalSpec) and spec.tts is not None and spec.tts.k == 2 and spec.temperature == 1.0
    spec = spec_from_cli("noisy(p=0.3):oracle")
    assert isinstance(spec, ScriptedSpec) and spec.needs() == ["oracle", "random"]
    for bad, says in [
        ("tts(k=0):oracle", "k"),
        ("tts(k=2,temp=1):oracle", "temp"),
        ("tts(k=2):tts(k=2):oracle", "one tts"),
        ("noisy(p=2):oracle", r"p in \[0, 1\]"),
        ("noisy(p=0.5):local", "scripted agents only"),
    ]:
        with pytest.raises(AgentsFileError, match=says):
            spec_from_cli(bad)
    out = tmp_path / "never"
    r = runner.invoke(app, ["eval", "--suite", str(toy_suite), "--agent", "tts(k=0):oracle", "--out", str(out)])
    assert r.exit_code == 2 and "tts(k=0):oracle" in r.output and not out.exists()
    r = runner.invoke(app, ["eval", "--suite", str(toy_suite), "--agent", "tts(k=2):nobody", "--out", str(out)])
    assert r.exit_code == 2 and "no scripted agent 'nobody'" in " ".join(r.output.split()) and not out.exists()
