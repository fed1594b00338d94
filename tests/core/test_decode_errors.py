"""Every file the project reads names the file and line when its bytes are not UTF-8 (issue 23, item 10)."""

from __future__ import annotations

import pytest

BAD = b"first line\nsecond \xff\xfe line\n"


def _clinical(path):
    from rubricgym.envs.clinical.cases import load_cases
    from rubricgym.envs.clinical.schema import load_kb

    return load_cases(path, load_kb())


def _suite(path):
    from rubricgym.suites.suite import load_suite

    return load_suite(path)


def _agents(path):
    from rubricgym.arena.agents import load_agents

    return load_agents(path)


def _config(path):
    from rubricgym.trainers.config import load_config

    return load_config(path)


def _rubric(path):
    from rubricgym.core.rubric import Rubric

    return Rubric.load(path)


def _env_config(path):
    from rubricgym.core.envargs import load_env_config

    return load_env_config(path)


def _swe(path):
    from rubricgym.envs.swe.env import load_instances

    return load_instances(path)


@pytest.mark.parametrize(
    ("load", "name"),
    [
        (_clinical, "cases.jsonl"),
        (_suite, "suite.yaml"),
        (_agents, "agents.yaml"),
        (_config, "train.yaml"),
        (_rubric, "rubric.yaml"),
        (_env_config, "env.yaml"),
        (_swe, "instances.jsonl"),
    ],
)
def test_a_file_that_is_not_utf8_is_an_error_naming_file_and_line(tmp_path, load, name):
    path = tmp_path / name
    path.write_bytes(BAD)
    with pytest.raises(ValueError) as raised:
        load(path)
    assert not isinstance(raised.value, UnicodeDecodeError), "a raw UnicodeDecodeError names no file"
    assert f"{path}:2: not UTF-8 text (byte 0xff at column 8)" in str(raised.value)
