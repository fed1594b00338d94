"""oneDNN-prepacked copies of a CPU model's ``nn.Linear`` weights, used while sampling.

Decoding a few rows at a time multiplies skinny activations (rows x hidden) by every weight of the model once per
token, so a CPU decode step is bound by how fast the GEMM streams the weights. PyTorch's ``F.linear`` on fp32 goes
to MKL's ``sgemm``, which on this class of machine (AMD EPYC, AVX-512) reaches ~6 GB/s on these shapes; oneDNN's
GEMM on a weight reordered once into its blocked layout (the op Inductor uses under ``freezing``) reaches ~15 GB/s
on the layer shapes and 4x on the 49k-row LM head (``bench/trainer_vs_trl.py``). The arithmetic is the same
precision (fp32 weights stay fp32; results differ from ``F.linear`` only in summation order, ~1e-5), so the
sampled policy is the policy.

A pack is a copy of the weight (the model's weight memory once more while it lives); it is keyed on the
weight's storage and version counter, so an optimizer step makes it stale and the next ``applied`` repacks.
``clear`` frees the packs (the trainer calls it before an update, whose weights will change anyway).

The packed forward is installed only for the duration of ``applied`` and only answers calls from the thread
that installed it with autograd off; any other call (a concurrent training forward, a backward) takes the
module's ordinary ``F.linear`` path.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

_PACKABLE = (torch.float32, torch.bfloat16)


def packing_supported(lm: torch.nn.Module) -> bool:
    """Whether ``lm`` can use packed weights: on CPU, with oneDNN and the prepacking ops in this torch build."""
    try:
        device = next(lm.parameters()).device
    except StopIteration:
        return False
    return (
        device.type == "cpu"
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


class PackedLinears:
    """The packed weights of one model's plain ``nn.Linear`` modules (see the module docstring)."""

    def __init__(self) -> None:
        self._packs: dict[
            tuple[int, torch.dtype], tuple[tuple[int, int, torch.dtype], torch.Tensor, torch.Tensor | None]
        ] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._packs)

    def clear(self) -> None:
        """Free every pack (they are rebuilt on the next ``applied``)."""
        with self._lock:
            self._packs.clear()

    def _pack(self, m: torch.nn.Linear, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = m.weight
        key = (w.data_ptr(), w._version, dtype)
        hit = self._packs.get((id(m), dtype))
        if hit is None or hit[0] != key:
            with torch.no_grad():
                packed = torch.ops.mkldnn._reorder_linear_weight(w.detach().to(dtype).contiguous(), 8)
                bias = None if m.bias is None else m.bias.detach().to(dtype)
            hit = (key, packed, bias)
            self._packs[(id(m), dtype)] = hit
        return hit[1], hit[2]

    def linear(self, m: torch.nn.Linear, x: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``m(x)`` computed in ``dtype`` on its packed weight (packing it first if needed)."""
        with self._lock:
            packed, bias = self._pack(m, dtype)
        return torch.ops.mkldnn._linear_pointwise(x.to(dtype), packed, bias, "none", [], "")

    @contextlib.contextmanager
    def applied(self, lm: torch.nn.Module, skip: tuple[torch.nn.Module, ...] = ()) -> Iterator[PackedLinears]:
        """Route ``lm``'s plain ``nn.Linear`` forwards through packed weights in this thread while inside.

        The pack dtype is what the forward would compute in: bf16 under CPU bf16 autocast, else the weight's own
        dtype. ``skip`` (the LM head the sampler calls itself, in fp32) and modules whose ``forward`` is already
        overridden on the instance (accelerate hooks) are left alone.
        """
        if not packing_supported(lm):
            yield self
            return
        body = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
        owner = threading.get_ident()
        installed: list[torch.nn.Linear] = []
        try:
            with self._lock:
                for m in lm.modules():
                    if type(m) is not torch.nn.Linear or "forward" in m.__dict__ or any(m is k for k in skip):
                        continue
                    dtype = body or m.weight.dtype
                    if dtype not in _PACKABLE:
                        continue
                    packed, bias = self._pack(m, dtype)
                    m.forward = _packed_forward(m, packed, bias, owner)  # type: ignore[method-assign]
                    installed.append(m)
            yield self
        finally:
            for m in installed:
                m.__dict__.pop("forward", None)


def _packed_forward(m: torch.nn.Linear, packed: torch.Tensor, bias: torch.Tensor | None, owner: int) -> Any:
    def forward(x: torch.Tensor) -> torch.Tensor:
        if threading.get_ident() != owner or torch.is_grad_enabled():
            return F.linear(x, m.weight, m.bias)
        return torch.ops.mkldnn._linear_pointwise(x.to(packed.dtype), packed, bias, "none", [], "")

    return forward
