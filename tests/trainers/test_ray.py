"""Rollouts on a local Ray pool of 2 CPUs: the same tokens as in-process rollouts, before and after a weight push;
the pool's options checked before Ray starts (multi-node placement and failures: ``test_ray_cluster.py``)."""

import asyncio

import pytest
import torch

ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_ray_actors_generate_what_the_learner_would_and_follow_weight_pushes(tiny_config, tmp_path):
    from rubricgym.trainers.engine.backends import LocalBackend
    from rubricgym.trainers.engine.sampling import fixed_env
    from rubricgym.trainers.trainer import Trainer

    cfg = tiny_config(tmp_path / "ray", ray=True, ray_workers=2, generation={"max_new_tokens": 5})
    trainer = Trainer(cfg)
    tasks = trainer.tasks_at(0, 2)
    seeds = trainer.seeds_for(0, 2)  # one group per actor: the same batches as one group at a time locally

    local_backend = LocalBackend(trainer.policy, fixed_env(cfg.env.id, cfg.env.kwargs))

    def tokens(groups):
        return [[[t.completion_ids for t in r.turns] for r in g] for g in groups]

    async def both():
        remote = await trainer.backend.collect(tasks, seeds, 2, anchor_greedy=True)
        local = []
        for task, seed in zip(tasks, seeds, strict=True):
            local += await local_backend.collect([task], [seed], 2, anchor_greedy=True)
        return remote, tokens(remote), local, tokens(local)

    try:
        remote, rt, local, lt = asyncio.run(both())
        assert len(remote) == 2 and all(len(g) == 2 for g in remote)
        assert rt == lt
        assert [[r.trajectory.steps[0].action.text for r in g] for g in remote] == [
            [r.trajectory.steps[0].action.text for r in g] for g in local
        ]
        torch.manual_seed(1)
        with torch.no_grad():
            for p in trainer.model.parameters():
                p.add_(torch.randn_like(p) * 0.5)
        trainer.backend.push_weights(trainer.model)
        _, rt2, _, lt2 = asyncio.run(both())
        assert rt2 == lt2
        assert rt2 != rt
    finally:
        trainer.backend.close()
    assert not ray.is_initialized()


def test_pool_options_are_checked_before_ray_starts():
    from rubricgym.trainers.config import EnvConfig, GenerationConfig, ModelConfig
    from rubricgym.trainers.engine.ray_backend import RayBackend

    configs = (ModelConfig(), GenerationConfig(), EnvConfig())
    with pytest.raises(ValueError, match=r"unknown keys \['cpus'\].*under 'resources'"):
        RayBackend(*configs, worker_resources={"cpus": 1})
    with pytest.raises(ValueError, match="placement='sideways'"):
        RayBackend(*configs, placement="sideways")
    with pytest.raises(ValueError, match="max_restarts=-1"):
        RayBackend(*configs, max_restarts=-1)
    assert not ray.is_initialized()
