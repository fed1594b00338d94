"""The learner group placed by Ray (``ray_learners: N`` with ``ray: true``): one launch places N learner ranks and
the rollout actors.

``rubricgym train`` (the driver) reserves one bundle per rank (``ray_learner_resources``) in a placement group of
strategy ``ray_learner_placement``, starts a ``LearnerRank`` actor in each, and gives every rank what ``torchrun``
would (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` 0, and rank 0's node address with a free port there as
``MASTER_ADDR``/``MASTER_PORT``). Each rank then runs the trainer as a torchrun rank does: rank 0 holds the pool of
rollout actors for every rank (``engine/ray_ranks.py``), the ranks sum gradients over the process group (gloo on
CPU, nccl when each bundle has a GPU: Ray gives each actor its own), rank 0 writes the checkpoints. The driver
returns rank 0's summary; a rank that fails stops the others and the driver raises its error. The run directory
must be one every rank can write (a shared filesystem on a real cluster); it is made absolute before it is sent.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from rubricgym.trainers.config import TrainConfig


class LearnerRank:
    """A Ray actor running one rank of the learner group."""

    def address(self) -> tuple[str, int]:
        """This node's address and a port free on it now (rank 0's rendezvous)."""
        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = int(s.getsockname()[1])
        return ray.util.get_node_ip_address(), port

    def run(self, cfg: dict[str, Any], rank: int, world: int, master: tuple[str, int], resume: bool) -> dict[str, Any]:
        """Train as rank ``rank`` of ``world`` (the environment of a torchrun rank); returns the run's summary."""
        import torch

        from rubricgym.trainers.trainer import Trainer

        os.environ.update(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK="0",
            LOCAL_WORLD_SIZE="1",
            MASTER_ADDR=master[0],
            MASTER_PORT=str(master[1]),
        )
        try:
            return Trainer(TrainConfig.model_validate(cfg)).run(resume=resume)
        finally:
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()


def run_learners(cfg: TrainConfig, *, resume: bool = False, timeout_s: float = 120.0) -> dict[str, Any]:
    """Place ``cfg.ray_learners`` learner ranks on Ray (joining ``cfg.ray_address``, else a local Ray with room for
    them and the rollout actors) and train; returns rank 0's summary."""
    import ray
    from ray.util.placement_group import remove_placement_group

    from rubricgym.trainers.engine.ray_placement import actor_options, bundle_of, check_resources, reserve

    n = cfg.ray_learners
    data = cfg.model_dump(mode="json", by_alias=True) | {"run_dir": str(Path(cfg.run_dir).resolve()), "live": False}
    owns = not ray.is_initialized()
    if owns:
        if cfg.ray_address:
            ray.init(address=cfg.ray_address, log_to_driver=False)
        else:
            cpus = n * cfg.ray_learner_resources.num_cpus + cfg.ray_workers * cfg.ray_worker_resources.num_cpus
            ray.init(address="local", num_cpus=max(1, round(cpus)), include_dashboard=False, log_to_driver=False)
    group: Any = None
    actors: list[Any] = []
    try:
        resources = check_resources(cfg.ray_learner_resources.given())
        advice = "add nodes or lower ray_learner_resources"
        group = reserve(bundle_of(resources), n, cfg.ray_learner_placement, timeout_s, "learner ranks", advice)
        actors = [ray.remote(LearnerRank).options(**actor_options(resources, group, i)).remote() for i in range(n)]
        master = ray.get(actors[0].address.remote(), timeout=timeout_s)
        runs = [a.run.remote(data, i, n, master, resume) for i, a in enumerate(actors)]
        pending = list(runs)
        while pending:  # the first rank to fail stops the run (the others would wait in a collective)
            done, pending = ray.wait(pending, num_returns=1)
            ray.get(done[0])
        summary: dict[str, Any] = ray.get(runs[0])
        return summary
    finally:
        for a in actors:
            ray.kill(a)
        if group is not None:
            remove_placement_group(group)
        if owns:
            ray.shutdown()
