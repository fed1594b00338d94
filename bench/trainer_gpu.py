"""GPU readiness bench: the trainer's generation and update throughput and model FLOPs utilisation (MFU).

Runs our real code paths (``agents.decode.sample`` with the shared-prefix cache, ``trainers.update`` with the
fused fp32 LM-head log-prob, AdamW) on ``--device`` (default: a GPU when torch sees one) in bf16 autocast with
fp32 master weights, and prints tokens/s for generation and for the update, and MFU against the GPU's dense
bf16 peak (known GPUs by name, or ``--peak-tflops``). FLOPs are counted analytically: 2 x matmul parameters per
token forward (plus attention ``4 n_layers d ctx``), 3x that for forward + backward.

Without a GPU it runs on the CPU in a DEGRADED mode (smaller defaults, says so, MFU only with ``--peak-tflops``):
the numbers then check that the path works, not GPU speed. ``--vllm URL`` also times generation through a vLLM
server (server mode) and one weight push (``VLLMBackend.push_weights``; the server needs VLLM_SERVER_DEV_MODE=1).

``--lora R`` trains LoRA adapters, ``--fsdp2`` shards the policy with FSDP2 (``trainers/engine/sharding.py``; under
``torchrun --nproc-per-node N`` one GPU per rank over nccl, alone a group of one).

    .venv/bin/python bench/trainer_gpu.py [--device cuda] [--group 16] [--new-tokens 256] [--vllm http://...]
    torchrun --nproc-per-node 8 bench/trainer_gpu.py --fsdp2 --lora 16
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any, NoReturn

import torch

PEAK_BF16_TFLOPS = {  # dense (no sparsity) bf16 tensor-core peaks from the vendors' data sheets
    "H200": 989.0,
    "H100": 989.0,
    "GH200": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
    "A10": 125.0,
    "RTX 4090": 165.0,
    "V100": 125.0,
}
TASKS = ["Compute 22 / 2.", "Compute 17 * 4 - 1.", "Compute 90 - 45.", "Compute 8 + 13 * 2."]


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def forward_flops_per_token(model: Any, ctx: float) -> float:
    """2 x (matmul parameters) + attention score/value products at mean context ``ctx``."""
    cfg = model.config
    matmul = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n)
    head = model.get_output_embeddings().weight.numel()  # tied heads are not in named_parameters twice
    if not any("lm_head" in n for n, _ in model.named_parameters()):
        matmul += head
    return 2.0 * matmul + 4.0 * cfg.num_hidden_layers * cfg.hidden_size * ctx


def prompts_for(policy, n_tasks: int) -> list[list[int]]:
    from rubricgym.core.registry import make

    env = make("toy-calculator-v0", style="expression", min_ops=1, max_ops=1)
    out = []
    for task in list(env.task_set(n_tasks, seed=3, split="train"))[:n_tasks]:
        out.append(policy.prompt_ids(list(env.reset_typed(task=task).messages)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="auto")
    ap.add_argument("--tasks", type=int, default=None)
    ap.add_argument("--group", type=int, default=None)
    ap.add_argument("--new-tokens", type=int, default=None)
    ap.add_argument("--steps", type=int, default=2, help="measured steps after one warm-up")
    ap.add_argument("--peak-tflops", type=float, default=None, help="bf16 peak to compute MFU against")
    ap.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    ap.add_argument("--vllm", default=None, help="also time a vLLM server (OpenAI base URL ending in /v1)")
    ap.add_argument("--lora", type=int, default=0, metavar="R", help="train LoRA adapters of rank R (alpha 2R)")
    ap.add_argument("--fsdp2", action="store_true", help="shard with FSDP2 (world 1, or every rank under torchrun)")
    a = ap.parse_args()
    device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if a.device == "auto" else a.device)
    degraded = device.type != "cuda"
    tasks = a.tasks or (2 if degraded else 8)
    group = a.group or (4 if degraded else 16)
    new = a.new_tokens or (32 if degraded else 256)
    if degraded:
        print(
            f"DEGRADED MODE: no GPU (device {device}); {tasks} tasks x {group} rollouts x {new} new tokens on the "
            "CPU. These numbers check the code path, not GPU throughput."
        )
    else:
        print(f"device: {torch.cuda.get_device_name(device)}")

    from rubricgym.agents.decode import sample
    from rubricgym.trainers.algo.samples import Sample
    from rubricgym.trainers.config import LoraConfig, OptimConfig, ParallelConfig
    from rubricgym.trainers.engine.distributed import backend_for, init_from_env, local_device
    from rubricgym.trainers.engine.lora import add_adapters, trainable_parameters
    from rubricgym.trainers.engine.policy import TrainingPolicy
    from rubricgym.trainers.engine.sharding import gathered, shard
    from rubricgym.trainers.engine.update import UpdateSettings, policy_update

    if a.fsdp2:  # under torchrun: one GPU per rank and nccl; alone: a process group of one
        device = torch.device(local_device(str(device)))
        init_from_env(backend_for(str(device)))
    policy = TrainingPolicy(max_new_tokens=new, device=str(device), bf16_autocast=not a.fp32).load()
    model, tok = policy.lm, policy.tokenizer
    if a.lora:
        add_adapters(model, LoraConfig(r=a.lora, alpha=2 * a.lora), seed=0)
    if a.fsdp2:
        shard(model, ParallelConfig(strategy="fsdp2"))
    print(f"training: {'LoRA r=' + str(a.lora) if a.lora else 'full'}{', FSDP2' if a.fsdp2 else ''}")
    prompts = [p for p in prompts_for(policy, tasks) for _ in range(group)]
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=not a.fp32)
    opt = torch.optim.AdamW(trainable_parameters(model), lr=1e-6)
    settings = UpdateSettings(
        optim=OptimConfig(micro_batch=len(prompts) if not degraded else 8), bf16_autocast=not a.fp32
    )
    peak = peak_tflops(device, a.peak_tflops)
    gen_rates, upd_rates, gen_mfu, upd_mfu = [], [], [], []
    for step in range(a.steps + 1):
        gen = torch.Generator(device).manual_seed(step)
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        t0 = time.perf_counter()
        with autocast, gathered(model):  # a sharded model samples from whole weights
            rows = sample(
                model,
                prompts,
                max_new_tokens=new,
                temperature=1.0,
                pad_id=tok.pad_token_id,
                is_end=lambda r, t: t[-1] == tok.eos_token_id,
                generator=gen,
            )
        sync()
        t1 = time.perf_counter()
        samples = []
        for i, (p, r) in enumerate(zip(prompts, rows, strict=True)):
            s = Sample(i)
            s.extend(p, False, 0, 0)
            s.extend(r.tokens, True, 0, 0, r.logprobs)
            s.advantages = [0.0] * len(p) + [1.0 if i % 2 else -1.0] * len(r.tokens)
            samples.append(s)
        policy_update(model, opt, samples, settings, pad_id=tok.pad_token_id)
        sync()
        t2 = time.perf_counter()
        generated = sum(len(r.tokens) for r in rows)
        seq_tokens = sum(len(s) for s in samples)
        ctx = statistics.mean(len(s) for s in samples)
        fwd = forward_flops_per_token(model, ctx / 2)
        if step == 0:
            continue  # warm-up
        gen_rates.append(generated / (t1 - t0))
        upd_rates.append(seq_tokens / (t2 - t1))
        if peak:
            gen_mfu.append(gen_rates[-1] * fwd / (peak * 1e12))
            upd_mfu.append(upd_rates[-1] * 3 * fwd / (peak * 1e12))
    print(f"precision: {'fp32' if a.fp32 else 'bf16 autocast, fp32 master weights, fp32 LM head'}")
    print(f"generation: {statistics.median(gen_rates):.2f} new tokens/s ({len(prompts)} rollouts, prefix shared)")
    print(f"update    : {statistics.median(upd_rates):.2f} tokens/s (forward + backward + AdamW)")
    if peak:
        print(
            f"MFU vs {peak:.0f} TFLOPS bf16 peak: generation {100 * statistics.median(gen_mfu):.2f}%, "
            f"update {100 * statistics.median(upd_mfu):.2f}%"
        )
    else:
        print("MFU: n/a (no known bf16 peak for this device; pass --peak-tflops)")
    if a.vllm:
        vllm_bench(a.vllm, policy, model, prompts[:group], new)


def _no_env(task: Any) -> NoReturn:
    raise RuntimeError(f"vllm_bench requests completions only; it plays no episode (asked for task {task.id!r})")


def vllm_bench(url: str, policy, model, prompts: list[list[int]], new: int) -> None:
    """Generation tokens/s through a vLLM server (server mode) and the time of one weight push."""
    import httpx

    from rubricgym.trainers.engine.vllm_backend import VLLMBackend

    served = httpx.get(url.rstrip("/") + "/models", timeout=30).json()["data"][0]["id"]
    backend = VLLMBackend(
        url, served, policy.tokenizer, _no_env, temperature=1.0, top_p=1.0, max_new_tokens=new
    )  # completions only: no episode is played

    async def run():
        return await asyncio.gather(*(backend.complete(p, 1.0, i) for i, p in enumerate(prompts)))

    t0 = time.perf_counter()
    turns = asyncio.run(run())
    t1 = time.perf_counter()
    backend.push_weights(model)
    t2 = time.perf_counter()
    print(
        f"vLLM server: {sum(len(t.completion_ids) for t in turns) / (t1 - t0):.1f} new tokens/s "
        f"({len(prompts)} concurrent), weight push {t2 - t1:.1f}s"
    )
    backend.close()


if __name__ == "__main__":
    main()
