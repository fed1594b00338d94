"""Configs cannot be turned against a run (issue 23, items 11 and 12): non-finite numbers, absurd sizes, duplicate
keys, empty files, directories and bad env values are refused before anything is created, naming the field; a
loss or gradient that stops being finite stops the run with the last good checkpoint kept."""

from __future__ import annotations

import math
import re

import pytest
from typer.testing import CliRunner

from rubricgym.cli import app
from rubricgym.trainers.config import ConfigError, load_config

runner = CliRunner()


def _load(tmp_path, text: str):
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return load_config(path)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("optim:\n  lr: .inf\n", "optim.lr"),
        ("optim:\n  lr: .nan\n", "optim.lr"),
        ("generation:\n  temperature: .inf\n", "generation.temperature"),
        ("loss:\n  clip_high: .inf\n", "loss.clip_high"),
        ("loss:\n  tis_cap: .inf\n", "loss.tis_cap"),
        ("optim:\n  betas: [0.9, .nan]\n", "optim.betas[1]"),
        ("env:\n  kwargs:\n    max_ops: -.inf\n", "env.kwargs.max_ops"),
        ("generation:\n  max_new_tokens: 1000000000000\n", "generation.max_new_tokens"),
        ("seed: -1\n", "seed"),
        ("env:\n  task_seed: -1\n", "env.task_seed"),
        ("env:\n  kwargs:\n    max_ops: many\n", "env.kwargs.max_ops"),
    ],
)
def test_bad_numbers_are_refused_naming_the_field(tmp_path, text, field):
    with pytest.raises(ConfigError, match=re.escape(f"field '{field}'")):
        _load(tmp_path, text)


def test_duplicate_keys_an_empty_file_and_a_directory_are_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"duplicate key 'steps' \(lines 1 and 3\)"):
        _load(tmp_path, "steps: 3\ngroup_size: 4\nsteps: 50\n")
    with pytest.raises(ConfigError, match="duplicate key 'lr'"):
        _load(tmp_path, "optim:\n  lr: 1.0e-5\n  lr: 1.0\n")
    for empty in ("", "# only a comment\n", "\n\n"):
        with pytest.raises(ConfigError, match="the config is empty"):
            _load(tmp_path, empty)
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    r = runner.invoke(app, ["train", "--config", str(tmp_path), "--no-live"])
    assert (
        r.exit_code == 2 and "is a directory" in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    ), r.output


def test_env_values_out_of_range_are_refused_before_the_run_directory_exists(tmp_path):
    run = tmp_path / "run"
    cfg = tmp_path / "train.yaml"
    cfg.write_text(f"run_dir: {run}\nenv:\n  kwargs:\n    max_ops: 50\n")
    r = runner.invoke(app, ["train", "--config", str(cfg), "--no-live"])
    assert r.exit_code == 2 and "field 'env.kwargs'" in r.output and "max_ops=50" in r.output, r.output
    assert not run.exists()


def test_a_non_finite_loss_stops_the_run_keeping_the_last_good_checkpoint(tiny_config, tmp_path):
    from safetensors.torch import load_file

    from rubricgym.trainers.trainer import Trainer

    over = {"optim": {"lr": 1e30, "max_grad_norm": None}, "loss": {"entropy_coef": 0.01}}  # a gradient even at reward 0
    cfg = tiny_config(tmp_path / "run", steps=4, **over)
    with pytest.raises(FloatingPointError, match="training stopped at step") as stopped:  # NonFiniteUpdate
        Trainer(cfg).run()
    assert "last good checkpoint is" in str(stopped.value) and "step-000001" in str(stopped.value), stopped.value
    checkpoints = sorted((cfg.run_dir / "checkpoints").glob("step-*"))
    for ckpt in checkpoints:  # every checkpoint written holds finite weights only
        tensors = load_file(str(ckpt / "model.safetensors"))
        assert all(bool(t.isfinite().all()) for t in tensors.values()), ckpt
    assert len(checkpoints) < 4
    from rubricgym.trainers.config import dump_config

    dump_config(cfg.with_overrides(run_dir=str(tmp_path / "cli")), tmp_path / "cli.yaml")
    r = runner.invoke(app, ["train", "--config", str(tmp_path / "cli.yaml"), "--no-live"])
    assert r.exit_code == 3 and "training stopped at step" in r.output, r.output[-2000:]


def test_non_finite_helper_lists_nested_fields():
    from rubricgym.trainers.config import non_finite

    assert non_finite({"a": {"b": [1.0, math.inf]}, "c": math.nan, "d": 1}) == ["a.b[1]", "c"]


def test_the_weights_check_names_the_first_non_finite_tensor_and_passes_finite_ones_whose_sum_overflows():
    import torch

    from rubricgym.trainers.engine.update import NonFiniteUpdate, _check_weights

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    with torch.no_grad():
        model[0].weight.fill_(3e38)  # finite, but their sum is inf
    _check_weights(model)
    with torch.no_grad():
        model[1].bias[2] = float("nan")
    with pytest.raises(NonFiniteUpdate, match=r"1 weight tensor\(s\) non-finite \(first: 1.bias\)"):
        _check_weights(model)
