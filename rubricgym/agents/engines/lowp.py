"""Reduced-precision PyTorch sampling of an fp32 policy: a bf16 weight copy, or int8 weight-only linears.

Decoding a few rows at a time on a CPU is bound by streaming every weight once per token, so halving (bf16) or
quartering (int8) the bytes per weight is the obvious lever. The copy is what samples; the trainer's fp32 model
is the master and is never modified. ``sync`` refreshes the copy from the master after an update.

- ``bf16``: every parameter cast to bfloat16 (AVX512-BF16 / AMX do the GEMMs natively where the CPU has them);
  the sampler's LM head, softmax and sampling stay fp32 (``agents/decode.py``: fp32 islands).
- ``int8``: ``torch.ao.quantization.quantize_dynamic`` on the decoder layers' ``nn.Linear``s (per-output-channel
  int8 weights, activations quantised per call); the embeddings, the tied LM head and the norms stay fp32.

The sampled log-probs are those of the copy's own distribution (what the trainer's importance weight needs as
``mu``); how far they are from the fp32 policy's is what ``bench/rollouts.py`` measures (the mismatch KL).
"""

from __future__ import annotations

import copy
import time
from typing import Any, Literal

import torch

from rubricgym.agents.local import LocalAgent

Precision = Literal["bf16", "int8"]
PRECISIONS: tuple[str, ...] = ("bf16", "int8")


def cpu_supports_bf16() -> bool:
    """Whether this CPU has native bf16 arithmetic (AVX512-BF16 or AMX-BF16 in ``/proc/cpuinfo``)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _int8_copy(lm: Any) -> torch.nn.Module:
    body = getattr(lm, lm.base_model_prefix)
    targets = {
        f"{lm.base_model_prefix}.{name}"
        for name, m in body.named_modules()
        if type(m) is torch.nn.Linear and ".layers." in f".{name}"
    }
    if not targets:
        raise TypeError(f"{type(lm).__name__} has no nn.Linear inside decoder layers to quantise")
    out = copy.deepcopy(lm)
    with torch.no_grad():
        spec = dict.fromkeys(targets, torch.ao.quantization.per_channel_dynamic_qconfig)
        return torch.ao.quantization.quantize_dynamic(out, spec, dtype=torch.qint8, inplace=True)


def low_precision_copy(lm: Any, precision: Precision) -> torch.nn.Module:
    """A sampling copy of the fp32 model ``lm`` in ``precision`` (``lm`` itself is not changed)."""
    if precision == "bf16":
        out = copy.deepcopy(lm).to(torch.bfloat16)
    elif precision == "int8":
        out = _int8_copy(lm)
    else:
        raise ValueError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
    out.eval()
    out.requires_grad_(False)
    return out


class LowPrecisionSampler:
    """A ``LocalAgent`` (``agent``) sampling from a bf16 or int8 copy of ``policy``'s fp32 model.

    ``agent`` has ``policy``'s settings (temperature, stop strings, response prefix, batching, key/value reuse)
    and its own batching queue; ``sync()`` re-copies the master weights after an update."""

    def __init__(self, policy: LocalAgent, precision: Precision):
        if precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISIONS)}")
        master = policy.lm
        if next(master.parameters()).dtype != torch.float32:
            raise ValueError(
                f"the policy's weights are {next(master.parameters()).dtype}: a low-precision sampler copies fp32 "
                "master weights (load the policy with dtype='float32')"
            )
        self.policy, self.precision = policy, precision
        self.agent: LocalAgent = policy.with_model(low_precision_copy(master, precision))
        self.agent.bf16_autocast = False  # the copy's own dtype decides
        self.version = 0

    def sync(self) -> float:
        """Bring the copy up to the master's current weights; the seconds it took."""
        t0 = time.perf_counter()
        master, lm = self.policy.lm, self.agent.lm
        with self.agent._shared.lock:
            if self.precision == "bf16":
                with torch.no_grad():
                    src = dict(master.named_parameters())
                    for name, p in lm.named_parameters():
                        p.copy_(src[name])
            else:
                self.agent._shared.model = low_precision_copy(master, self.precision)
        self.agent.release_packed()  # packs and stored keys/values were made from the old weights
        self.version += 1
        return time.perf_counter() - t0

    def nbytes(self) -> int:
        """Bytes of the copy's weights (quantised linears count their packed int8 weights)."""
        total = sum(p.numel() * p.element_size() for p in self.agent.lm.parameters())
        for m in self.agent.lm.modules():
            if isinstance(m, torch.ao.nn.quantized.dynamic.Linear):
                w = m.weight()
                total += w.numel() * w.element_size()
        return total


def describe(sampler: Any) -> str:
    """A one-line name of an engine for tables."""
    return f"torch {sampler.precision}" if isinstance(sampler, LowPrecisionSampler) else type(sampler).__name__
