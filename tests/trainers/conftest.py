"""Small training configs on the tiny model (``tiny_model_dir``, tests/conftest.py)."""

from pathlib import Path

import pytest


@pytest.fixture
def tiny_config(tiny_model_dir: Path):
    """A factory of small training configs on the tiny model: ``tiny_config(run_dir, steps=3, ...)``."""
    from rubricgym.trainers.config import TrainConfig

    def make(run_dir: Path, **over) -> TrainConfig:
        data = {
            "run_dir": str(run_dir),
            "steps": 2,
            "tasks_per_step": 2,
            "group_size": 2,
            "save_every": 1,
            "live": False,
            "plots": True,
            "model": {"name": str(tiny_model_dir)},
            "generation": {"max_new_tokens": 6, "temperature": 1.0},
            "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 2}, "train_tasks": 8, "eval_tasks": 2},
            "optim": {"lr": 1e-3},
        }
        for k, v in over.items():
            data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
        return TrainConfig.model_validate(data)

    return make
