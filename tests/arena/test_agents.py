"""Agents files: kinds, checkpoint resolution, CLI shorthands, duplicate names."""

import pytest

from rubricgym.arena.agents import (
    AgentFactory,
    AgentsFileError,
    CheckpointSpec,
    OpenAISpec,
    ScriptedSpec,
    checkpoint_dir,
    parse_agents,
    spec_from_cli,
)


def test_a_run_dir_resolves_to_its_newest_complete_checkpoint(tmp_path):
    for step in ("step-000010", "step-000020", "step-000030"):
        (tmp_path / "checkpoints" / step).mkdir(parents=True)
    for step in ("step-000010", "step-000020"):
        (tmp_path / "checkpoints" / step / "config.json").write_text("{}")
    assert checkpoint_dir(str(tmp_path)) == tmp_path / "checkpoints" / "step-000020"
    assert checkpoint_dir(str(tmp_path / "checkpoints" / "step-000010")) == tmp_path / "checkpoints" / "step-000010"
    assert checkpoint_dir(str(tmp_path / "nowhere")) is None


def test_parse_kinds_and_reject_duplicates():
    specs = parse_agents(
        {
            "agents": [
                {"name": "o", "kind": "scripted", "agent": "oracle"},
                {"name": "c", "kind": "checkpoint", "path": "runs/x"},
                {"name": "v", "kind": "openai", "base_url": "http://h/v1", "model": "m"},
            ]
        },
        "a.yaml",
    )
    assert [type(s) for s in specs] == [ScriptedSpec, CheckpointSpec, OpenAISpec]
    with pytest.raises(AgentsFileError, match=r"a.yaml: agents\[1\] \(o\): the name is used twice"):
        parse_agents({"agents": [{"name": "o", "kind": "scripted"}, {"name": "o", "kind": "scripted"}]}, "a.yaml")
    with pytest.raises(AgentsFileError, match="'agents' list"):
        parse_agents({"agent": []}, "a.yaml")


def test_cli_shorthands_and_scripted_agents_per_env():
    assert isinstance(spec_from_cli("checkpoint:runs/x"), CheckpointSpec)
    assert spec_from_cli("local").model == "smollm2-135m-instruct"
    with pytest.raises(AgentsFileError, match="--base-url"):
        spec_from_cli("openai")
    factory = AgentFactory([ScriptedSpec(name="oracle")])
    toy, ds = factory.agent("oracle", "toy-calculator-v0"), factory.agent("oracle", "deepsearch-v0")
    assert type(toy) is not type(ds)  # each env's own oracle
