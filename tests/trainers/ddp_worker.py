"""Run by ``torchrun --nproc-per-node 2`` from test_distributed.py: a data-parallel gradient per loss aggregation,
saved by rank 0."""

import sys

import torch

from rubricgym.trainers.config import LossConfig, OptimConfig
from rubricgym.trainers.engine.distributed import init_from_env, leave, rank_world, shard
from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients, sync_gradients


def synthetic_samples(vocab: int, n: int = 6, seed: int = 0):
    from rubricgym.trainers.algo.samples import Sample

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        length = 8 + 3 * i
        prompt = 4 + i % 3
        s = Sample(rollout=i)
        ids = torch.randint(0, vocab, (length,), generator=g).tolist()
        s.input_ids = ids
        s.loss_mask = [0] * prompt + [1] * (length - prompt)
        s.step_ids = [-1] * prompt + [0] * (length - prompt)
        s.stage_ids = list(s.step_ids)
        s.sampled_logprobs = [0.0] * length
        adv = float(torch.randn(1, generator=g))
        s.advantages = [0.0] * prompt + [adv] * (length - prompt)
        out.append(s)
    return out


def gradients(model_dir: str, aggregation: str, distributed: bool) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    samples = synthetic_samples(model.config.vocab_size)
    if distributed:
        samples = shard(samples)
    settings = UpdateSettings(LossConfig(aggregation=aggregation, beta=0.0), OptimConfig(micro_batch=2))
    compute_gradients(model, samples, settings, pad_id=0)
    sync_gradients(model)
    return {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}


def main(model_dir: str, aggregations: str, out: str) -> None:
    """Every gradient lives in this frame, so it is freed before the interpreter shuts down: a tensor a gloo work
    object still holds, freed during finalization, can abort the process (pytorch/pytorch#190489)."""
    init_from_env("gloo")
    grads = {a: gradients(model_dir, a, distributed=True) for a in aggregations.split(",")}
    if rank_world()[0] == 0:
        torch.save({"world": rank_world()[1], "grads": grads}, out)
    leave()


if __name__ == "__main__":
    main(*sys.argv[1:4])  # aggregations: comma-separated, one gradient each
