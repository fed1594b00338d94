"""oneDNN-prepacked copies of a CPU model's ``nn.Linear`` weights, used while sampling.

Decoding a few rows at a time multiplies skinny activations (rows x hidden) by every weight of the model once per
token, so a CPU decode step is bound by how fast the GEMM streams the weights. PyTorch's ``F.linear`` on fp32 goes
to MKL's ``sgemm``, which on this class of machine (AMD EPYC, AVX-512) streams ~6 GB/s on these shapes; oneDNN's
GEMM on a weight reordered once into its blocked layout (the op Inductor uses under ``freezing``) streams ~15
GB/s on the layer shapes and is 4x faster on the 49k-row LM head. The arithmetic keeps the weight's precision:
fp32 stays fp32 and results differ from ``F.linear`` only in summation order (~1e-6 relative), so the sampled
policy is the policy.

A pack is a copy of a weight, keyed on the weight's storage and version counter: an optimizer step makes it
stale and the next use repacks. ``clear`` frees them (the trainer does before each update: they would be stale
after it, and the update needs the memory).

The packed forwards are installed only inside ``applied`` and answer only calls from the thread that installed
them with autograd off; any other call (a concurrent training forward, a backward) takes the module's ordinary
``F.linear``. (Running the update's GEMMs on packs too was measured and dropped: ~1.4x on the forward and
input-gradient GEMMs, but repacking ``W^T`` after every optimizer step and oneDNN's per-shape kernel creation ate
the gain on this bench's updates.)
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

_PACKABLE = (torch.float32, torch.bfloat16)
MEMINFO = "/proc/meminfo"


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


def _trim_heap() -> None:
    """``malloc_trim(0)``: glibc keeps freed heap pages (most packs are heap-allocated) resident otherwise, so
    the packs freed before an update would still count in the update's peak RSS. A no-op without glibc."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: its allocator may return pages itself; nothing to do
        return


def _fits(linears: list[torch.nn.Linear], held: int) -> bool:
    """Whether packing ``linears`` (beyond the ``held`` bytes already packed) fits in half the available memory."""
    need = sum(m.weight.numel() * m.weight.element_size() for m in linears) - held
    try:  # Linux: MemAvailable counts reclaimable page cache, which free-page counts miss
        with open(MEMINFO) as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):  # elsewhere: do not guess
        return True
    return need <= kb * 1024 // 2


class PackedLinears:
    """Packed weights of one model (see the module docstring); safe to share between threads.

    ``dtype`` (default None: each weight's own dtype, the exact path) makes the decoder's projections compute in
    that precision instead, on packs cast from the (fp32 master) weights: ``torch.bfloat16`` is the ``bf16-lean``
    engine (``agents/engines/lean_bf16.py``; the LM head the sampler packs itself stays fp32). ``kv_dtype``: what
    the lean forward stores keys and values in (None: fp32; ``agents/lean.py``)."""

    def __init__(self, dtype: torch.dtype | None = None, kv_dtype: torch.dtype | None = None) -> None:
        for name, d in (("dtype", dtype), ("kv_dtype", kv_dtype)):
            if d is not None and d not in _PACKABLE:
                raise ValueError(f"PackedLinears {name}={d} is not packable: choose one of {_PACKABLE} or None")
        self.dtype, self.kv_dtype = dtype, kv_dtype
        self._packs: dict[tuple[Any, torch.dtype], tuple[Any, torch.Tensor]] = {}
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Memory the packs hold."""
        with self._lock:
            return sum(p.numel() * p.element_size() for _, p in self._packs.values())

    def clear(self) -> None:
        """Free every pack (they are rebuilt on next use) and hand the freed pages back to the OS."""
        with self._lock:
            had = bool(self._packs)
            self._packs.clear()
        if had:
            _trim_heap()

    def pack(self, w: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The oneDNN pack of ``w`` in ``dtype``, built if missing or stale."""
        return self.pack_fused([w], dtype)

    def pack_fused(self, ws: list[torch.Tensor], dtype: torch.dtype | None = None) -> torch.Tensor:
        """One pack of ``ws`` stacked along their output rows (``torch.cat(ws)``: a layer's query, key and value
        projections as one GEMM), rebuilt when any of them changed."""
        dtype = dtype or ws[0].dtype
        key = (tuple(w.data_ptr() for w in ws), dtype)
        versions = tuple(w._version for w in ws)
        with self._lock:
            hit = self._packs.get(key)
            if hit is None or hit[0] != versions:
                with torch.no_grad():
                    parts = [w.detach().to(dtype) for w in ws]
                    fused = (parts[0] if len(parts) == 1 else torch.cat(parts)).contiguous()
                    hit = (versions, torch.ops.mkldnn._reorder_linear_weight(fused, 8))
                self._packs[key] = hit
            return hit[1]

    def linear(self, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """``x @ w.T + bias`` in ``x``'s dtype on the pack of ``w``; no autograd."""
        b = None if bias is None else bias.detach().to(x.dtype)
        return torch.ops.mkldnn._linear_pointwise(x, self.pack(w, x.dtype), b, "none", [], "")

    @contextlib.contextmanager
    def applied(self, lm: torch.nn.Module, skip: tuple[torch.nn.Module, ...] = ()) -> Iterator[PackedLinears | None]:
        """Route ``lm``'s plain ``nn.Linear`` forwards through packs in this thread while inside; yields ``self``,
        or None where nothing is packed (no oneDNN, not on CPU, or the copies would take more than half of the
        memory the machine has available: the speed-up is not worth an out-of-memory kill).

        The pack dtype is what the forward computes in: bf16 under CPU bf16 autocast, else the weight's dtype.
        ``skip`` (the LM head the sampler packs itself, in fp32: counted in the memory check) and modules whose
        ``forward`` is already overridden on the instance (accelerate hooks) are left alone.
        """
        linears = [
            m
            for m in lm.modules()
            if type(m) is torch.nn.Linear and "forward" not in m.__dict__ and m.weight.dtype in _PACKABLE
        ]
        if not packing_supported(lm) or not _fits(linears, self.nbytes):
            yield None
            return
        owner = threading.get_ident()
        installed: list[torch.nn.Linear] = []
        try:
            for m in (m for m in linears if not any(m is k for k in skip)):
                m.forward = self._forward(m, owner)  # type: ignore[method-assign]
                installed.append(m)
            yield self
        finally:
            for m in installed:
                m.__dict__.pop("forward", None)

    def _forward(self, m: torch.nn.Linear, owner: int) -> Any:
        def forward(x: torch.Tensor) -> torch.Tensor:
            if threading.get_ident() == owner and not torch.is_grad_enabled():
                if self.dtype is not None and not torch.is_autocast_enabled("cpu"):  # reduced precision inside
                    return self.linear(x.to(self.dtype), m.weight, m.bias).to(x.dtype)
                dtype = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else m.weight.dtype
                if dtype in _PACKABLE:
                    return self.linear(x.to(dtype), m.weight, m.bias)
            return F.linear(x, m.weight, m.bias)

        forward.packed = True  # type: ignore[attr-defined]  # a route to the module's own weights, not a hook
        return forward
