"""A suite trains on Ray as a single env does: the actors play each task in its own entry's env (kwargs
included), the same rollouts as in-process, and a run's steps, per-entry metrics and evaluations go through."""

import asyncio
import json

import pytest
import yaml

from tests.trainers.conftest import fingerprint

ray = pytest.importorskip("ray")

ENTRIES = [  # two entries of one env that differ only by kwargs: only routing tells their episodes apart
    {
        "env": "toy-calculator-v0",
        "name": "expr",
        "tasks": 1,
        "kwargs": {"style": "expression", "min_ops": 1, "max_ops": 1, "max_steps": 1},
    },
    {
        "env": "toy-calculator-v0",
        "name": "word",
        "tasks": 1,
        "kwargs": {"style": "word", "min_ops": 1, "max_ops": 1, "max_steps": 3},
    },
]


@pytest.mark.slow
def test_a_suite_trains_on_ray_with_each_task_in_its_entrys_env(tiny_config, tmp_path):
    from rubricgym.trainers.config import TrainConfig
    from rubricgym.trainers.engine.backends import LocalBackend
    from rubricgym.trainers.trainer import Trainer

    suite = tmp_path / "two-toys.yaml"
    suite.write_text(yaml.safe_dump({"name": "two-toys", "entries": ENTRIES}))
    data = tiny_config(tmp_path / "run", steps=1, ray=True, ray_workers=1).model_dump(mode="json")
    data["env"] = {"suite": str(suite), "train_tasks": 4, "curriculum": {"method": "weights"}}
    cfg = TrainConfig.model_validate(data)
    trainer = Trainer(cfg)
    tasks = [trainer.data.entries[name].train[0] for name in ("expr", "word")]
    seeds = trainer.seeds_for(0, 2)
    local = LocalBackend.of(cfg, trainer.policy, trainer.env_of)

    async def both():
        remote = [await trainer.backend.collect([t], [s], 2) for t, s in zip(tasks, seeds, strict=True)]
        here = [await local.collect([t], [s], 2) for t, s in zip(tasks, seeds, strict=True)]
        return [g for gs in remote for g in gs], [g for gs in here for g in gs]

    remote, here = asyncio.run(both())
    assert fingerprint(remote) == fingerprint(here)
    # the word entry's episodes may run 3 steps, the expression entry's only 1: each was played in its own env
    assert all(len(r.trajectory.steps) <= 1 for r in remote[0])
    summary = trainer.run()  # closes the pool
    assert not ray.is_initialized()
    records = [json.loads(x) for x in (cfg.run_dir / "metrics.jsonl").read_text().splitlines()]
    (train,) = [r for r in records if r["kind"] == "train"]
    assert train["env/expr/tasks"] + train["env/word/tasks"] == cfg.tasks_per_step
    assert [(r["tag"], r["entry"]) for r in records if r["kind"] == "eval_env"] == [
        ("base", "expr"),
        ("base", "word"),
        ("trained", "expr"),
        ("trained", "word"),
    ]
    assert set(summary["per_env"]) == {"expr", "word"}
