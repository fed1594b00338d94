"""The ``bf16-lean`` engine: today's sampler (lean forward, key/value reuse) with the decoder's GEMMs in bf16.

A CPU decode step of SmolLM2-135M is bound by streaming the 106M decoder projection weights once per token. On a
CPU with AVX512-BF16 oneDNN multiplies bf16 packs natively, streaming half the bytes of fp32: one decode step's
projections measured 1.5-2.6x faster at batch 1-16 on this repo's 2-core EPYC (``docs/guides/rollout-speed.md``).
The earlier ``bf16`` engine (``engines/lowp.py``) got none of that: its bf16 model copy ran the Hugging Face
forward, which the lean path's savings outweighed.

This engine samples from the trainer's fp32 model itself with a ``PackedLinears(dtype=torch.bfloat16)``: the packs
*are* the bf16 copy (the master weights are read, never written), so ``agents/lean.py`` computes every projection
in bf16 while the residual stream, the norms, the rotary embedding, the attention (with the default fp32
keys/values) and the LM head, hence the logits sampled from, stay fp32. The packs are keyed on each weight's
version counter, so a pack an update made stale is never used; ``sync()`` rebuilds them all at once after an update
(and drops the stored keys and values), which is the per-update weight-sync cost.

The recorded log-probs are this engine's own distribution (what the trainer's importance weight needs as ``mu``);
how far they are from the fp32 policy's is what ``bench/rollouts.py`` and ``tests/agents/test_engines.py`` check.
"""

from __future__ import annotations

import time

import torch

from rubricgym.agents.lean import LeanLlama, lean_supported
from rubricgym.agents.local import LocalAgent
from rubricgym.agents.packed import PackedLinears, packing_supported

KV_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}


class LeanBf16Sampler:
    """A ``LocalAgent`` (``agent``) sampling ``policy``'s fp32 model through bf16 packs (see the module docstring).

    ``agent`` has ``policy``'s settings (temperature, stop strings, response prefix, batching, key/value reuse)
    and its own batching queue, packs and key/value store. ``kv``: the dtype the sampler's keys and values are
    stored (and attended) in, ``"fp32"`` (default) or ``"bf16"``."""

    def __init__(self, policy: LocalAgent, kv: str = "fp32"):
        if kv not in KV_DTYPES:
            raise ValueError(f"unknown key/value dtype {kv!r}: choose one of {', '.join(KV_DTYPES)}")
        master = policy.lm
        dtype = next(master.parameters()).dtype
        if dtype != torch.float32:
            raise ValueError(
                f"the policy's weights are {dtype}: the bf16-lean engine packs bf16 copies of fp32 master weights "
                "(load the policy with dtype='float32')"
            )
        if not packing_supported(master) or not lean_supported(master):
            raise ValueError(
                f"the bf16-lean engine needs a plain Llama-architecture model on CPU with oneDNN (got "
                f"{type(master).__name__} on {next(master.parameters()).device}; LoRA-wrapped or hooked projections "
                "are not supported): use the 'fp32' sampler or the 'bf16' copy engine (engines/lowp.py)"
            )
        self.policy, self.kv = policy, kv
        self.agent: LocalAgent = policy.with_model(master)
        self.agent.bf16_autocast = False  # the packs' dtype decides, not autocast
        self.agent.packed_weights = True
        self.agent._shared.packed = PackedLinears(dtype=torch.bfloat16, kv_dtype=KV_DTYPES[kv])
        self.precision = f"bf16-lean (kv {kv})"
        self.version = 0

    @property
    def packs(self) -> PackedLinears:
        """The bf16 packs the engine samples from."""
        packs: PackedLinears = self.agent._shared.packed
        return packs

    def sync(self) -> float:
        """Re-pack the master's current weights in bf16 and drop stored keys and values; the seconds it took."""
        t0 = time.perf_counter()
        with self.agent._shared.lock:
            self.agent.release_packed()  # frees the stale packs first, so old and new never coexist
            LeanLlama(self.agent.lm, self.packs, dtype=torch.bfloat16, kv_dtype=KV_DTYPES[self.kv])  # packs them
            self.packs.pack(self.agent.lm.get_output_embeddings().weight)  # the LM head's fp32 pack
        self.version += 1
        return time.perf_counter() - t0

    def nbytes(self) -> int:
        """Bytes of the packs (the engine's only copy of the weights)."""
        return self.packs.nbytes
