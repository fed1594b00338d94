"""Real runs to view, made with the CLI and the scripted agents in seconds: a folder holding a scored run of the
oracle and one of the random agent (tasks carry a planted secret in ``hidden``), an arena, and (slow) a short
training run on the tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rubricgym.cli import app

SECRET = "SECRET-ZEBRA-7731"


def _cli(*args: str) -> None:
    r = CliRunner().invoke(app, list(args))
    assert r.exit_code == 0, r.output


def _tasks(tmp: Path) -> Path:
    """Six toy tasks with ``SECRET`` planted in each one's hidden data."""
    gen = tmp / "gen"
    _cli("run", "toy-calculator-v0", "--out", str(gen), "--agent", "oracle", "--tasks", "6", "--seed", "3")
    path = tmp / "tasks.jsonl"
    with path.open("w") as f:
        for line in (gen / "trajectories.jsonl").read_text().splitlines():
            task = json.loads(line)["task"]
            task["hidden"]["note"] = SECRET
            f.write(json.dumps(task) + "\n")
    return path


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``runs/oracle`` and ``runs/random``: scored runs (``run`` + ``score``) of the same secret-bearing tasks."""
    root = tmp_path_factory.mktemp("viewer-runs")
    tasks = _tasks(tmp_path_factory.mktemp("tasks"))
    for agent in ("oracle", "random"):
        out = root / "runs" / agent
        _cli(
            "run",
            "toy-calculator-v0",
            "--out",
            str(out),
            "--agent",
            agent,
            "--task-file",
            str(tasks),
            "--group-size",
            "2",
        )
        _cli("score", str(out))
    return root / "runs"


@pytest.fixture(scope="session")
def arena_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("viewer-arena")
    suite = tmp / "suite.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "name": "small",
                "version": "1",
                "entries": [
                    {"env": "toy-calculator-v0", "name": "toy", "kwargs": {"min_ops": 1, "max_ops": 2}, "tasks": 3}
                ],
            }
        )
    )
    agents = tmp / "agents.yaml"
    agents.write_text(
        yaml.safe_dump(
            {
                "agents": [
                    {"name": "oracle", "kind": "scripted", "agent": "oracle"},
                    {"name": "random", "kind": "scripted", "agent": "random"},
                ]
            }
        )
    )
    out = tmp / "arena"
    _cli("arena", "--suite", str(suite), "--agents", str(agents), "--out", str(out), "--resamples", "30")
    return out


@pytest.fixture(scope="session")
def train_run(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Path:
    """Three GRPO steps on the tiny model (groups of 3, a held-out evaluation every 2 steps)."""
    from rubricgym.trainers.config import TrainConfig
    from rubricgym.trainers.trainer import Trainer

    out = tmp_path_factory.mktemp("viewer-train") / "train"
    cfg = TrainConfig.model_validate(
        {
            "run_dir": str(out),
            "steps": 3,
            "tasks_per_step": 2,
            "group_size": 3,
            "save_every": 100,
            "eval_every": 2,
            "live": False,
            "plots": True,
            "model": {"name": str(tiny_model_dir)},
            "generation": {"max_new_tokens": 6, "temperature": 1.0},
            "env": {"kwargs": {"min_ops": 1, "max_ops": 1, "max_steps": 2}, "train_tasks": 8, "eval_tasks": 2},
            "optim": {"lr": 1e-3},
        }
    )
    Trainer(cfg).run()
    return out
