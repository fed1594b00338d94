"""Run by ``torchrun --nproc-per-node 2`` from test_sharding.py: FSDP2 on gloo, every check in one launch.

- ``grads``/``lora_grads``: one update's gradients of a sharded model (gathered whole) and their global norm;
- ``tokens``: what a sharded policy samples inside ``gathered``, each rank its own prompt;
- ``after2``: the whole weights after resuming a 1-process DCP checkpoint (``resume_from``) and one more update,
  whose own DCP checkpoint (2 ranks' shards) goes to ``OUT/dcp``.
Rank 0 saves them to ``OUT/result.pt``.
"""

import sys
from pathlib import Path

import torch

from rubricgym.trainers.config import LoraConfig, LossConfig, OptimConfig, ParallelConfig
from rubricgym.trainers.engine.checkpoint import load_distributed, save_distributed
from rubricgym.trainers.engine.distributed import init_from_env, leave, rank_world, shard
from rubricgym.trainers.engine.sharding import full_state_dict, gathered, grad_norm_and_clip
from rubricgym.trainers.engine.sharding import shard as fsdp_shard
from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients, policy_update, sync_gradients

sys.path.insert(0, str(Path(__file__).parent))
from ddp_worker import synthetic_samples

SETTINGS = UpdateSettings(LossConfig(beta=0.0), OptimConfig(micro_batch=1, lr=1e-3))


def load(model_dir: str, lora: bool = False) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The model and what is trained (the ``PeftModel`` under LoRA, with non-zero ``B`` so adapters get
    gradients from the first step)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if not lora:
        return model, model
    from rubricgym.trainers.engine.lora import add_adapters

    trained = add_adapters(model, LoraConfig(r=4, alpha=8), seed=0)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02, generator=torch.Generator().manual_seed(len(name)))
    return model, trained


def samples_for(model: torch.nn.Module, step: int, sharded: bool) -> list:
    """5 synthetic samples (dealt 3 + 2 over 2 ranks: unequal micro-batch counts, so lockstep fillers run)."""
    samples = synthetic_samples(model.config.vocab_size, n=5, seed=step)
    return shard(samples) if sharded else samples


def gradients(model_dir: str, sharded: bool, lora: bool = False, mixed_precision: str = "none") -> dict:
    """Whole gradients and the global norm after one backward."""
    model, _ = load(model_dir, lora)
    if sharded:
        fsdp_shard(model, ParallelConfig(strategy="fsdp2", mixed_precision=mixed_precision))  # type: ignore[arg-type]
    compute_gradients(model, samples_for(model, 0, sharded), SETTINGS, pad_id=0)
    sync_gradients(model)
    norm = grad_norm_and_clip([p for p in model.parameters() if p.grad is not None], None)
    grads = {}
    for name, p in model.named_parameters():
        if p.grad is not None:
            grads[name] = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad.clone()
    return {"grads": grads, "norm": norm}


def generate(model_dir: str, prompts: list[list[int]], sharded: bool) -> list[list[int]]:
    """Tokens a ``TrainingPolicy`` (packed weights on) samples for ``prompts`` at temperature 1, seed 11."""
    import asyncio

    from rubricgym.trainers.engine.policy import TrainingPolicy

    policy = TrainingPolicy(model_dir, temperature=1.0, max_new_tokens=8)
    policy.load()
    if sharded:
        fsdp_shard(policy.lm, ParallelConfig(strategy="fsdp2"))

    async def run() -> list[list[int]]:
        return [(await policy.episode(None, seed=11).generate(p)).completion_ids for p in prompts]  # type: ignore[arg-type, union-attr]

    with gathered(policy.lm):
        return asyncio.run(run())


def updated(model_dir: str, steps: range, sharded: bool, resume_from: Path | None = None, save_to: Path | None = None):
    """(model, optimizer) after ``policy_update`` on each step's samples, resuming from / saving to a DCP dir."""
    model, _ = load(model_dir)
    if sharded:
        fsdp_shard(model, ParallelConfig(strategy="fsdp2"))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if resume_from is not None:
        load_distributed(model, opt, resume_from)
    for step in steps:
        policy_update(model, opt, samples_for(model, step, sharded), SETTINGS, pad_id=0)
    if save_to is not None:
        save_distributed(model, opt, save_to)
    return model, opt


PROMPTS = [[1, 2, 3, 4], [1, 2, 3, 5]]

if __name__ == "__main__":
    model_dir, resume_from, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    init_from_env("gloo")
    rank, world = rank_world()
    result = {"world": world, "grads": gradients(model_dir, True), "lora_grads": gradients(model_dir, True, lora=True)}
    result["bf16_grads"] = gradients(model_dir, True, mixed_precision="bf16")
    tokens: list = [None] * world
    torch.distributed.all_gather_object(tokens, generate(model_dir, [PROMPTS[rank]], sharded=True))
    result["tokens"] = [t for per_rank in tokens for t in per_rank]
    model, _ = updated(model_dir, range(1, 2), sharded=True, resume_from=resume_from, save_to=out / "dcp")
    result["after2"] = full_state_dict(model)
    if rank == 0:
        torch.save(result, out / "result.pt")
    leave()
