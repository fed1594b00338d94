"""Every ```yaml block of README.md and of the docs site validates against the model it shows: a training config
(or a fragment of one: its keys are config fields and the defaults fill the rest), a web-task spec, an arena agents
file, a suite or a rubric. A block that is none of these fails, so no example escapes validation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from rubricgym.arena.agents import parse_agents
from rubricgym.envs.gui.byo import WebTaskSpec
from rubricgym.rewards import Rubric
from rubricgym.suites.suite import suite_from_dict
from rubricgym.trainers.config import TrainConfig, validate_config
from tests.docs.pages import Block, blocks

BLOCKS = blocks("yaml")
CONFIG_KEYS = {f.alias or name for name, f in TrainConfig.model_fields.items()}
SPEC_KEYS = {f.alias or name for name, f in WebTaskSpec.model_fields.items()}


def kind_of(data: Any) -> str | None:
    """Which model a YAML example is an instance of (None: not one we know)."""
    if not isinstance(data, dict) or not data:
        return None
    keys = set(data)
    if keys <= CONFIG_KEYS:
        return "training config"
    if "agents" in keys:
        return "agents file"
    if "entries" in keys:
        return "suite"
    if "criteria" in keys:
        return "rubric"
    if keys <= SPEC_KEYS and "reset" in keys:
        return "web-task spec"
    return None


VALIDATORS: dict[str, Callable[[Any, str], Any]] = {
    "training config": validate_config,
    "agents file": parse_agents,
    "suite": suite_from_dict,
    "rubric": lambda data, source: Rubric.model_validate(data),
    "web-task spec": lambda data, source: WebTaskSpec.model_validate(data),
}


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_yaml_block_validates(block: Block):
    data = yaml.safe_load(block.text)
    kind = kind_of(data)
    assert kind is not None, (
        f"{block.id}: a yaml example that is no training config, agents file, suite, rubric or web-task spec "
        f"(keys {sorted(data) if isinstance(data, dict) else type(data).__name__}); fix the example or teach "
        "tests/docs/test_yaml_blocks.py to validate its kind"
    )
    VALIDATORS[kind](data, block.id)


def test_the_docs_show_each_kind_and_the_full_training_config():
    kinds = {kind_of(yaml.safe_load(b.text)) for b in BLOCKS}
    assert {"training config", "agents file", "web-task spec"} <= kinds
    readme = [b for b in BLOCKS if b.path == "README.md"]
    assert readme, "the README shows a training config"
    cfg = validate_config(yaml.safe_load(readme[0].text), "README.md")
    assert cfg.env.kwargs["style"] == "expression" and cfg.advantage.estimator == "tournament"


def test_a_config_example_with_a_wrong_field_fails():
    """The check bites: a renamed field in an example is caught by the same validation the examples go through."""
    bad = yaml.safe_load("steps: 3\nloss: {clip_lo: 0.2}\n")
    assert kind_of(bad) == "training config"
    with pytest.raises(ValueError, match="clip_lo"):
        validate_config(bad, "example")
