"""Training memory of full fine-tuning vs LoRA, counted from the tensors that exist after one update.

Loads the model (default: the embedded SmolLM2-135M-Instruct) twice, once for full fine-tuning and once with LoRA
adapters (``trainers/lora.py``; default r=16 on the 7 attention and MLP projections), runs one forward/backward on
a short sequence and one AdamW step over the parameters the trainer optimizes (``trainable_parameters``), then sums
the bytes of the parameters (trainable and frozen), the gradients and the optimizer state tensors. These are the
tensor bytes a process holds, not its RSS (glibc keeps freed pages; see FACTS.md "Scale on CPU"). Activations are
left out: they depend on batch and length, not on the training mode.

    .venv/bin/python bench/scale.py [--model smollm2-135m-instruct] [--r 16] [--alpha 32] [--targets q_proj,...]
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from rubricgym.agents.models import model_path
from rubricgym.trainers.config import LORA_PROJECTIONS, LoraConfig
from rubricgym.trainers.lora import add_adapters, trainable_parameters

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


if __name__ == "__main__":
    main()
