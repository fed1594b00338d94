"""Training memory of full fine-tuning vs LoRA, counted from the tensors that exist after one update.

Loads the model (default: the embedded SmolLM2-135M-Instruct) twice, once for full fine-tuning and once with LoRA
adapters (``engine/lora.py``; default r=16 on the 7 attention and MLP projections), runs one forward/backward on
a short sequence and one AdamW step over the parameters the trainer optimizes (``trainable_parameters``), then sums
the bytes of the parameters (trainable and frozen), the gradients and the optimizer state tensors. These are the
tensor bytes a process holds, not its RSS (glibc keeps freed pages; see FACTS.md "Scale on CPU"). Activations are
left out: they depend on batch and length, not on the training mode.

With ``--fsdp`` it then launches ``torchrun --nproc-per-node 2`` (gloo) twice, replicated (``ddp``) and sharded
(``fsdp2``, ``trainers/engine/sharding.py``), each for full fine-tuning and LoRA, and compares them with one unsharded
process on the same synthetic batch: per-rank tensor bytes of parameters + gradients + AdamW state (each rank's
own shards), the gradient of the first update (``||difference|| / ||gradient||`` to one process), the mean
log-prob of the batch's generated tokens after each of 3 updates (the curve the updates move), and the time per
update (CPU, not a target).

    .venv/bin/python bench/scale.py [--model smollm2-135m-instruct] [--r 16] [--alpha 32] [--targets q_proj,...]
    .venv/bin/python bench/scale.py --fsdp [--steps 3]
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from rubricgym.agents.models import model_path
from rubricgym.trainers.config import LORA_PROJECTIONS, LoraConfig
from rubricgym.trainers.engine.lora import add_adapters, trainable_parameters

MIB = 2**20


def nbytes(tensors: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def measure(name: str, lora: LoraConfig | None) -> dict[str, float]:
    """Tensor bytes of one training process after one update (see the module docstring)."""
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    lm = AutoModelForCausalLM.from_pretrained(model_path(name), dtype=torch.float32)
    if lora is not None:
        add_adapters(lm, lora, seed=0)
    params = trainable_parameters(lm)
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    ids = torch.arange(16).unsqueeze(0) + 100
    lm.train()
    lm(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    unique = {p.data_ptr(): p for p in lm.parameters()}.values()  # a tied head is counted once
    out = {
        "params": float(sum(p.numel() for p in unique)),
        "trainable": float(sum(p.numel() for p in params)),
        "param_bytes": float(nbytes(unique)),
        "grad_bytes": float(nbytes(p.grad for p in params if p.grad is not None)),
        "optim_bytes": float(nbytes(state)),
    }
    out["total_bytes"] = out["param_bytes"] + out["grad_bytes"] + out["optim_bytes"]
    out["train_bytes"] = out["grad_bytes"] + out["optim_bytes"] + nbytes(params)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--r", type=int, default=16)
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--targets", default=",".join(LORA_PROJECTIONS), help="comma-separated module names")
    ap.add_argument(
        "--fsdp", nargs="?", const="all", choices=["all", "lora"], help="also compare ddp and fsdp2 on 2 gloo ranks"
    )
    ap.add_argument("--steps", type=int, default=3, help="updates per run with --fsdp")
    args = ap.parse_args()
    torch.manual_seed(0)
    lora = LoraConfig(r=args.r, alpha=args.alpha, target_modules=args.targets.split(","))
    full, low = measure(args.model, None), measure(args.model, lora)
    print(f"{args.model}: full fine-tuning vs LoRA r={args.r} on {args.targets} (fp32, AdamW, tensor bytes)")
    print(f"{'':28}{'full':>12}{'LoRA':>12}{'LoRA/full':>11}")
    rows = [
        ("parameters (M)", "params", 1e6),
        ("trainable parameters (M)", "trainable", 1e6),
        ("parameter bytes (MiB)", "param_bytes", MIB),
        ("gradient bytes (MiB)", "grad_bytes", MIB),
        ("optimizer state bytes (MiB)", "optim_bytes", MIB),
        ("trainable+grad+optim (MiB)", "train_bytes", MIB),
        ("total (MiB)", "total_bytes", MIB),
    ]
    for label, key, unit in rows:
        ratio = low[key] / full[key] if full[key] else float("nan")
        print(f"{label:28}{full[key] / unit:12.2f}{low[key] / unit:12.2f}{ratio:10.1%}")
    share = low["trainable"] / full["params"]
    budget = (low["trainable"] * 4 + low["optim_bytes"]) / (full["trainable"] * 4 + full["optim_bytes"])
    print(f"trainable: {share:.2%} of the base's parameters")
    print(f"LoRA trainable + optimizer state: {budget:.2%} of full fine-tuning's (target <= 5%)")
    if args.fsdp:
        fsdp_report(args.model, lora, args.steps, lora_only=args.fsdp == "lora")


# ---- FSDP2 vs replicated on 2 gloo ranks ----------------------------------------------------------------------


def local_bytes(tensors: Any) -> int:
    """Bytes this rank holds: a DTensor's local shard, else the tensor."""
    out = 0
    for t in tensors:
        t = t.to_local() if hasattr(t, "to_local") else t
        out += t.numel() * t.element_size()
    return out


def batch(vocab: int, n: int = 4, length: int = 64, seed: int = 0) -> list[Any]:
    """``n`` synthetic sequences of ``length`` tokens, the second half generated, with fixed advantages."""
    from rubricgym.trainers.algo.samples import Sample

    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        s = Sample(rollout=i)
        s.input_ids = torch.randint(0, vocab, (length,), generator=g).tolist()
        half = length // 2
        s.loss_mask = [0] * half + [1] * (length - half)
        s.step_ids = [-1] * half + [0] * (length - half)
        s.stage_ids = list(s.step_ids)
        s.sampled_logprobs = [float("nan")] * length
        s.advantages = [0.0] * half + [(0.9, -0.4, 0.6, -0.2)[i % 4]] * (length - half)
        out.append(s)
    return out


def run_updates(name: str, lora: LoraConfig | None, strategy: str | None, steps: int) -> dict[str, Any]:
    """One process's (or rank's) view: first-update gradients, per-update loss and seconds, tensor bytes."""
    import time

    import transformers
    from transformers import AutoModelForCausalLM

    from rubricgym.trainers.config import LossConfig, OptimConfig, ParallelConfig
    from rubricgym.trainers.engine.distributed import shard
    from rubricgym.trainers.engine.sharding import shard as fsdp_shard
    from rubricgym.trainers.engine.update import UpdateSettings, compute_gradients, policy_update, sync_gradients

    transformers.utils.logging.disable_progress_bar()
    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_pretrained(model_path(name), dtype=torch.float32)
    if lora is not None:
        add_adapters(lm, lora, seed=0)
    samples = batch(lm.config.vocab_size)
    if strategy is not None:
        samples = shard(samples)
    if strategy == "fsdp2":
        fsdp_shard(lm, ParallelConfig(strategy="fsdp2"))
    params = trainable_parameters(lm)
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    settings = UpdateSettings(LossConfig(beta=0.0, off_policy="none"), OptimConfig(micro_batch=2, max_grad_norm=None))
    compute_gradients(lm, samples, settings, pad_id=0)
    sync_gradients(lm)
    grads = {n: p.grad for n, p in lm.named_parameters() if p.grad is not None}
    first = {n: (g.full_tensor() if hasattr(g, "full_tensor") else g).clone() for n, g in grads.items()}
    losses, seconds = [], []
    for _ in range(steps):
        start = time.perf_counter()
        policy_update(lm, optimizer, samples, settings, pad_id=0)
        seconds.append(time.perf_counter() - start)
        losses.append(batch_logprob(lm, samples))
    compute_gradients(lm, samples, settings, pad_id=0)  # gradients exist when the bytes are counted
    state = [t for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor) and t.dim()]
    unique = {id(p): p for p in lm.parameters()}.values()
    return {
        "grads": first,
        "losses": losses,
        "seconds": seconds,
        "param_bytes": local_bytes(unique),
        "grad_bytes": local_bytes(p.grad for p in params if p.grad is not None),
        "optim_bytes": local_bytes(state),
    }


@torch.no_grad()
def batch_logprob(lm: torch.nn.Module, samples: list[Any]) -> list[float]:
    """[sum, count] of the generated tokens' log-probs under ``lm`` (this rank's samples; one forward, so every
    rank runs the same collectives): after each update, the curve the updates move."""
    from rubricgym.trainers.algo.samples import collate
    from rubricgym.trainers.engine.update import logprobs_of

    b = collate(samples, 0)
    logp, _ = logprobs_of(lm)(b.input_ids, b.attention_mask, b.loss_mask)
    return [float((logp * b.loss_mask).sum()), float(b.loss_mask[:, 1:].sum())]


def relative_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """``||a - b|| / ||b||`` over every gradient tensor together (the same names in both)."""
    assert set(a) == set(b), "the runs trained different parameters"
    diff = sum(float((a[n].double() - b[n].double()).pow(2).sum()) for n in b)
    norm = sum(float(b[n].double().pow(2).sum()) for n in b)
    return (diff / norm) ** 0.5 if norm else float("nan")


def worker(out: str, name: str, lora: LoraConfig | None, strategy: str, steps: int) -> None:
    """Under torchrun: one rank's ``run_updates``; rank 0 saves its numbers and the loss summed over ranks."""
    from rubricgym.trainers.engine.distributed import init_from_env, rank_world

    init_from_env("gloo")
    got = run_updates(name, lora, strategy, steps)
    sums = torch.tensor(got["losses"], dtype=torch.float64)
    torch.distributed.all_reduce(sums)  # each rank's log-prob sum and token count over its share of the batch
    got["losses"] = [total / count for total, count in sums.tolist()]
    if rank_world()[0] == 0:
        torch.save(got, out)
    torch.distributed.destroy_process_group()


def fsdp_report(name: str, lora: LoraConfig, steps: int, lora_only: bool = False) -> None:
    import os
    import socket
    import subprocess
    import sys
    import tempfile

    print(f"\n{name}: replicated (ddp) vs sharded (fsdp2) on 2 gloo ranks, against one process ({steps} updates)")
    print(f"{'':34}{'1 process':>12}{'ddp x2':>12}{'fsdp2 x2':>12}{'fsdp2/ddp':>11}")
    for label, cfg in [("full", None), (f"LoRA r={lora.r}", lora)][1 if lora_only else 0 :]:
        single = run_updates(name, cfg, None, steps)
        single["losses"] = [total / count for total, count in single["losses"]]
        runs: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for strategy in ("ddp", "fsdp2"):
                out = os.path.join(tmp, f"{strategy}.pt")
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", 0))
                    port = sock.getsockname()[1]
                cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr"]
                cmd += ["127.0.0.1", "--master-port", str(port), __file__, "--worker", out, "--strategy", strategy]
                cmd += ["--model", name, "--steps", str(steps)] + (
                    ["--lora-rank", str(lora.r), "--lora-alpha", str(lora.alpha)] if cfg is not None else []
                )
                env = {**os.environ, "OMP_NUM_THREADS": "1"}
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if proc.returncode:
                    raise SystemExit(f"torchrun {strategy} failed:\n{proc.stderr[-3000:]}")
                runs[strategy] = torch.load(out, weights_only=False)
        total = {k: v["param_bytes"] + v["grad_bytes"] + v["optim_bytes"] for k, v in [("1", single), *runs.items()]}
        print(f"{label}:")
        for row, key in (
            ("  params/rank (MiB)", "param_bytes"),
            ("  grads/rank (MiB)", "grad_bytes"),
            ("  AdamW/rank (MiB)", "optim_bytes"),
        ):
            d, f = runs["ddp"][key], runs["fsdp2"][key]
            print(
                f"{row:34}{single[key] / MIB:12.1f}{d / MIB:12.1f}{f / MIB:12.1f}{f / d if d else float('nan'):10.2f}x"
            )
        d, f = total["ddp"], total["fsdp2"]
        print(
            f"{'  params+grads+AdamW/rank (MiB)':34}{total['1'] / MIB:12.1f}{d / MIB:12.1f}{f / MIB:12.1f}"
            f"{f / d:10.2f}x   (target <= 0.55x)"
        )
        for a, b in (("fsdp2", "1 process"), ("ddp", "1 process"), ("fsdp2", "ddp")):
            mine, theirs = runs[a]["grads"], (single if b == "1 process" else runs[b])["grads"]
            rel = relative_difference(mine, theirs)
            target = " (target <= 1e-5)" if b == "1 process" and a == "fsdp2" else ""
            print(f"  first-update gradient, {a} vs {b}: ||difference|| / ||gradient|| = {rel:.1e}{target}")
        for key, what, fmt in (
            ("losses", "mean log-prob of the batch after each update", ".7f"),
            ("seconds", "seconds per update", ".2f"),
        ):
            cells = "; ".join(
                f"{k}: " + ", ".join(format(x, fmt) for x in v[key]) for k, v in [("1 process", single), *runs.items()]
            )
            print(f"  {what}: {cells}")
        ratio = sum(runs["fsdp2"]["seconds"]) / sum(runs["ddp"]["seconds"])
        print(f"  fsdp2 step time over ddp: {ratio:.2f}x (CPU gloo; not a target)")


if __name__ == "__main__":
    import sys

    if "--worker" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--worker")
        ap.add_argument("--strategy")
        ap.add_argument("--model")
        ap.add_argument("--steps", type=int)
        ap.add_argument("--lora-rank", type=int)
        ap.add_argument("--lora-alpha", type=int)
        a = ap.parse_args()
        worker(
            a.worker,
            a.model,
            LoraConfig(r=a.lora_rank, alpha=a.lora_alpha) if a.lora_rank else None,
            a.strategy,
            a.steps,
        )
    else:
        main()
