"""Rollouts on a local Ray pool of 2 CPUs: the same tokens as in-process rollouts, before and after a weight push."""

import asyncio

import pytest
import torch

ray = pytest.importorskip("ray")


@pytest.mark.slow
def test_ray_actors_generate_what_the_learner_would_and_follow_weight_pushes(tiny_config, tmp_path):
    from rubricgym.trainers.policy import collect_groups
    from rubricgym.trainers.trainer import Trainer

    cfg = tiny_config(tmp_path / "ray", ray=True, ray_workers=2, generation={"max_new_tokens": 5})
    trainer = Trainer(cfg)
    tasks = trainer.tasks_at(0, 2)
    seeds = trainer.seeds_for(0, 2)  # one group per actor: the same batches as one group at a time locally

    def tokens(groups, views):
        return [[[t.completion_ids for t in views(traj)] for traj in g] for g in groups]

    async def both():
        remote = await trainer.backend.collect(trainer, tasks, seeds, 2, True, None)
        remote_tokens = tokens(remote, trainer.policy.turns_for)
        trainer.policy.forget()
        local = []
        for task, seed in zip(tasks, seeds, strict=True):
            local += await collect_groups(
                cfg.env.id, trainer.policy, [task], 2, [seed], env_kwargs=cfg.env.kwargs, anchor_greedy=True
            )
        return remote, remote_tokens, local, tokens(local, trainer.policy.turns_for)

    try:
        remote, rt, local, lt = asyncio.run(both())
        assert len(remote) == 2 and all(len(g) == 2 for g in remote)
        assert rt == lt
        assert [[t.steps[0].action.text for t in g] for g in remote] == [
            [t.steps[0].action.text for t in g] for g in local
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
