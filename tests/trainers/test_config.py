"""Training configs: YAML in, bad fields named before any work starts."""

import pytest

from rubricgym.trainers.config import ConfigError, TrainConfig, load_config, validate_config


def test_yaml_round_trip(tmp_path):
    p = tmp_path / "train.yaml"
    p.write_text("steps: 3\ngroup_size: 4\nadvantage:\n  estimator: stage\nenv:\n  kwargs: {min_ops: 1, max_ops: 1}\n")
    cfg = load_config(p)
    assert cfg.steps == 3 and cfg.advantage.estimator == "stage" and cfg.env.kwargs == {"min_ops": 1, "max_ops": 1}
    assert cfg.loss.clip_low == 0.2 and cfg.loss.clip_high == 0.28


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("advantage:\n  estimator: ppo\n", "advantage.estimator"),
        ("group_size: 1\n", "group_size"),
        ("optim:\n  lr: -1\n", "optim.lr"),
        ("loss:\n  bta: 0.1\n", "loss.bta"),
        ("generation:\n  top_p: 2\n", "generation.top_p"),
    ],
)
def test_bad_configs_name_the_field(tmp_path, text, field):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=f"field '{field}'"):
        load_config(p)


def test_not_yaml_and_missing_file(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("steps: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)
    with pytest.raises(ConfigError, match="no such config"):
        load_config(tmp_path / "missing.yaml")


def test_overrides_are_validated():
    cfg = TrainConfig().with_overrides(**{"advantage.estimator": "tournament", "steps": 2})
    assert cfg.advantage.estimator == "tournament" and cfg.steps == 2
    with pytest.raises(ConfigError, match="advantage.estimator"):
        TrainConfig().with_overrides(**{"advantage.estimator": "nope"})
    assert validate_config(None).steps == TrainConfig().steps


def test_every_shipped_config_validates():
    """The configs the README points to (``configs/*.yaml``) load; a field renamed in the code breaks this test,
    not a user's first run."""
    from pathlib import Path

    from rubricgym.trainers.config import load_config

    shipped = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
    assert shipped, "configs/ is empty"
    for path in shipped:
        cfg = load_config(path)
        assert cfg.steps >= 1, path
