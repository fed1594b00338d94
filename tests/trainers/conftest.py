"""Small training configs on the tiny model (``tiny_model_dir``, tests/conftest.py), and what a Ray rollout is."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).parents[2]


def torchrun(args: list[str], timeout: int = 300, nproc: int = 2) -> subprocess.CompletedProcess:
    """``torchrun --standalone`` with ``nproc`` local ranks (1 thread each), repo importable, output captured.

    ``--standalone`` lets the launcher's store bind a free port itself: picking one here and handing it over left
    a window in which another process could take it (a CI failure with nothing but exit status 1)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *args]
    return subprocess.run(cmd, env=env, timeout=timeout, capture_output=True, text=True)


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


def fingerprint(groups: list[Any]) -> list[list[tuple[Any, ...]]]:
    """What a rollout is, without its random ids: task, seed, the generated tokens and actions, the reward."""
    return [
        [
            (
                r.trajectory.task.id,
                r.trajectory.seed,
                [t.completion_ids for t in r.turns],
                [s.action.text for s in r.trajectory.steps],
                r.trajectory.outcome.model_dump_json(),
            )
            for r in g
        ]
        for g in groups
    ]


class _KillAfterSubmit:
    """Stands in for rollout worker 0's handle for one call: submits its ``rollout`` call, puts the real handle back
    in the pool and kills the actor, so the kill always lands while that call is in flight (a fixed sleep before
    the kill raced a fast machine: the call had returned, there was nothing to replace, and the test failed with
    DID NOT WARN)."""

    def __init__(self, pool: Any) -> None:
        self._pool, self._handle = pool, pool.workers[0]
        self.rollout = self

    def remote(self, *args: Any) -> Any:
        import ray

        ref = self._handle.rollout.remote(*args)
        self._pool.workers[0] = self._handle
        ray.kill(self._handle)
        return ref


async def collect_killing_worker_0(pool: Any, tasks: list[Any], seeds: list[int]) -> list[Any]:
    """``pool.collect`` (groups of 2, greedy anchor) with rollout worker 0 killed while its call is in flight."""
    victim = pool.workers[0]
    pool.workers[0] = _KillAfterSubmit(pool)
    try:
        return await pool.collect(tasks, seeds, 2, anchor_greedy=True)
    finally:
        if isinstance(pool.workers[0], _KillAfterSubmit):  # never called: put the real handle back for close()
            pool.workers[0] = victim
