"""oneDNN-prepacked copies of a CPU model's ``nn.Linear`` weights, for sampling and for the update's GEMMs.

PyTorch's ``F.linear`` on fp32 goes to MKL's ``sgemm``. On this class of machine (AMD EPYC, AVX-512) MKL reaches
~6 GB/s on the skinny GEMMs of decoding (a few rows times every weight, once per token), and ~120 GFLOP/s on the
update's (tokens x hidden) GEMMs. oneDNN's GEMM on a weight reordered once into its blocked layout (the op
Inductor uses under ``freezing``) reaches ~15 GB/s on the layer shapes, 4x MKL on the 49k-row LM head, and ~1.4x
MKL on the update's forward and input-gradient GEMMs (numbers: ``bench/trainer_vs_trl.py`` and the README). The
arithmetic keeps the weight's precision: fp32 stays fp32 and results differ from ``F.linear`` only in summation
order (~1e-6 relative), so the sampled policy is the policy and the gradient is the gradient.

A pack is a copy of a weight (``W`` for forwards, ``W^T`` for input gradients), keyed on the weight's storage and
version counter: an optimizer step makes it stale and the next use repacks. ``clear`` frees them (the trainer
does after each update, when they are stale anyway).

The packed forwards are installed only inside ``applied`` and answer only calls from the thread that installed
them (a concurrent forward elsewhere takes the module's ordinary ``F.linear``); with ``train=False`` calls with
autograd on take ``F.linear`` too, with ``train=True`` they go through an autograd function whose weight
gradient is the ordinary ``dY^T X``.
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


def _mm(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinears:
    """Packed weights of one model (see the module docstring); safe to share between threads."""

    def __init__(self) -> None:
        self._packs: dict[tuple[int, torch.dtype, bool], tuple[int, torch.Tensor]] = {}
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Memory the packs hold."""
        with self._lock:
            return sum(p.numel() * p.element_size() for _, p in self._packs.values())

    def clear(self) -> None:
        """Free every pack (they are rebuilt on next use)."""
        with self._lock:
            self._packs.clear()

    def pack(self, w: torch.Tensor, dtype: torch.dtype | None = None, transposed: bool = False) -> torch.Tensor:
        """The oneDNN pack of ``w`` (``w.T`` with ``transposed``) in ``dtype``, built if missing or stale."""
        dtype = dtype or w.dtype
        key = (w.data_ptr(), dtype, transposed)
        with self._lock:
            hit = self._packs.get(key)
            if hit is None or hit[0] != w._version:
                with torch.no_grad():
                    src = w.detach().to(dtype)
                    src = src.t() if transposed else src
                    hit = (w._version, torch.ops.mkldnn._reorder_linear_weight(src.contiguous(), 8))
                self._packs[key] = hit
            return hit[1]

    def linear(
        self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, transposed: bool = False
    ) -> torch.Tensor:
        """``x @ w.T + bias`` (``x @ w`` with ``transposed``) in ``x``'s dtype on the pack; no autograd."""
        b = None if bias is None else bias.detach().to(x.dtype)
        return _mm(x, self.pack(w, x.dtype, transposed), b)

    @contextlib.contextmanager
    def applied(
        self, lm: torch.nn.Module, skip: tuple[torch.nn.Module, ...] = (), train: bool = False
    ) -> Iterator[PackedLinears]:
        """Route ``lm``'s plain ``nn.Linear`` forwards through packs in this thread while inside.

        Without autograd the pack dtype is what the forward computes in (bf16 under CPU bf16 autocast, else the
        weight's dtype). With autograd (``train=True`` only) an fp32 forward outside autocast runs
        ``_PackedLinear``; anything else takes ``F.linear``. ``skip`` (the LM head the sampler runs itself) and
        modules whose ``forward`` is already overridden on the instance (accelerate hooks) are left alone.
        """
        if not packing_supported(lm):
            yield self
            return
        owner = threading.get_ident()
        installed: list[torch.nn.Linear] = []
        try:
            for m in lm.modules():
                if type(m) is not torch.nn.Linear or "forward" in m.__dict__ or any(m is k for k in skip):
                    continue
                if m.weight.dtype in _PACKABLE:
                    m.forward = self._forward(m, owner, train)  # type: ignore[method-assign]
                    installed.append(m)
            yield self
        finally:
            for m in installed:
                m.__dict__.pop("forward", None)

    def _forward(self, m: torch.nn.Linear, owner: int, train: bool) -> Any:
        def forward(x: torch.Tensor) -> torch.Tensor:
            if threading.get_ident() == owner:
                autocast = torch.is_autocast_enabled("cpu")
                if not torch.is_grad_enabled():
                    dtype = torch.get_autocast_dtype("cpu") if autocast else m.weight.dtype
                    if dtype in _PACKABLE:
                        return self.linear(x.to(dtype), m.weight, m.bias)
                elif train and not autocast and x.dtype == m.weight.dtype == torch.float32:
                    out: torch.Tensor = _PackedLinear.apply(x, m.weight, m.bias, self)
                    return out
            return F.linear(x, m.weight, m.bias)

        return forward


class _PackedLinear(torch.autograd.Function):
    """``x @ W^T + b`` with the forward and the input gradient on packs of ``W`` and ``W^T``."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: Any, packs: PackedLinears) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.packs, ctx.has_bias = packs, bias is not None
        return _mm(x, packs.pack(weight), None if bias is None else bias.detach())

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _mm(grad, ctx.packs.pack(weight, transposed=True))
        flat = grad.reshape(-1, grad.shape[-1])
        if ctx.needs_input_grad[1]:
            grad_w = flat.t() @ x.reshape(-1, x.shape[-1])
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = flat.sum(0)
        return grad_x, grad_w, grad_b, None
