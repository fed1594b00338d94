"""Train configs whose values pass the schema but cannot run fail at load time, naming the field, before any run
directory exists."""

from __future__ import annotations

import pytest

from rubricgym.trainers.config import ConfigError, load_config


@pytest.mark.parametrize(
    "text, field, says",
    [
        ("env:\n  id: toy-calculater-v0\n", "env.id", "toy-calculator-v0"),
        ("env:\n  kwargs: {max_opz: 3}\n", "env.kwargs.max_opz", "max_ops"),
        ("model:\n  threads: -2\n", "model.threads", "greater than or equal to 1"),
        ("env:\n  rubric: no/such/rubric.yaml\n", "env.rubric", "no such rubric file"),
        ("model:\n  name: smollm3-9000b\n", "model.name", "known model"),
    ],
)
def test_wrong_values_name_the_field_before_the_run_dir_exists(tmp_path, text, field, says):
    path = tmp_path / "train.yaml"
    path.write_text(f"run_dir: {tmp_path / 'run'}\n" + text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert f"field '{field}'" in str(e.value) and says in str(e.value) and str(path) in str(e.value)
    assert not (tmp_path / "run").exists()


def test_a_rubric_naming_unknown_checks_is_a_config_error(tmp_path):
    rubric = tmp_path / "r.yaml"
    rubric.write_text("id: r\ncriteria:\n  - {id: a, text: a, check: no_such_check}\n")
    path = tmp_path / "train.yaml"
    path.write_text(f"env:\n  rubric: {rubric}\n")
    with pytest.raises(ConfigError, match="env.rubric.*no_such_check"):
        load_config(path)


def test_a_binary_config_names_the_file(tmp_path):
    path = tmp_path / "train.yaml"
    path.write_bytes(b"\xff\xfe\x00\x81binary")
    with pytest.raises(ConfigError, match="train.yaml.*binary"):
        load_config(path)
