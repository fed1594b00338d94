"""What a weight sync moves and in which order: the manifest and the bucket plan (``trainers/engine/weight_sync.py``).

The learner announces a ``Manifest`` (each tensor's name, whole shape and dtype, the policy version) before any
weight; a worker checks it against its own model (``first_difference``) and both sides derive the same broadcast
order from it (``plan_buckets``), so nothing but the manifest and the buckets travels. The helpers here are plain
tensor bookkeeping: which tensors a model syncs (``sync_tensors``), a shard made whole, a bucket received in place
or unpacked into the worker's parameters. The collectives themselves are ``WeightSync``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict


class TensorMeta(BaseModel):
    """One tensor of a sync, as the learner holds it (the whole shape, also when sharded)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def torch_dtype(self) -> torch.dtype:
        dtype: torch.dtype = getattr(torch, self.dtype)
        return dtype

    @property
    def nbytes(self) -> int:
        return numel_of(self.shape) * self.torch_dtype.itemsize


class Manifest(BaseModel):
    """What one ``send`` broadcasts, in order; the first thing on the wire."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    version: int
    trainable_only: bool
    bucket_bytes: int
    tensors: tuple[TensorMeta, ...]


def numel_of(shape: Sequence[int]) -> int:
    """The number of elements of a tensor of ``shape``."""
    n = 1
    for d in shape:
        n *= d
    return n


def sync_tensors(model: torch.nn.Module, trainable_only: bool) -> list[tuple[str, torch.Tensor]]:
    """The tensors a learner sends, in a fixed order: its trainable parameters (what an update changes: all of
    them in full fine-tuning, the adapters under LoRA), or every parameter and persistent buffer. Tied weights
    appear once, under their first name. Sharded parameters are returned as they are (DTensor shards)."""
    out: list[tuple[str, torch.Tensor]] = [
        (n, p) for n, p in model.named_parameters() if p.requires_grad or not trainable_only
    ]
    if not trainable_only:
        seen = {id(p) for p in model.parameters()}
        for mod_name, mod in model.named_modules():
            for b_name, b in mod.named_buffers(recurse=False):
                if b is not None and b_name not in mod._non_persistent_buffers_set and id(b) not in seen:
                    seen.add(id(b))
                    out.append((f"{mod_name}.{b_name}" if mod_name else b_name, b))
    return out


def worker_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor a worker could receive, by name (trainable or not: a sampler's copy is usually frozen)."""
    return dict(sync_tensors(model, trainable_only=False))


def whole_tensor(t: torch.Tensor) -> torch.Tensor:
    """``t`` whole: a DTensor shard gathered (a collective of its mesh), anything else as it is."""
    full = getattr(t, "full_tensor", None)
    return (full() if callable(full) else t).detach()


def plan_buckets(metas: Sequence[TensorMeta], bucket_bytes: int) -> list[list[int]]:
    """The broadcast order: buckets of tensor indices, one dtype each, at most ``bucket_bytes`` (a larger tensor
    alone). Scanning ``metas`` in order, a dtype's open bucket is emitted when the next tensor of that dtype would
    overflow it; the open buckets left at the end follow in order of their first tensor. The sender can thus
    emit every bucket as soon as it is full while gathering tensors one at a time in manifest order."""
    plan: list[list[int]] = []
    open_: dict[str, tuple[list[int], int]] = {}
    for i, m in enumerate(metas):
        idx, size = open_.get(m.dtype, ([], 0))
        if idx and size + m.nbytes > bucket_bytes:
            plan.append(idx)
            idx, size = [], 0
        open_[m.dtype] = (idx + [i], size + m.nbytes)
    plan.extend(idx for idx, _ in sorted(open_.values(), key=lambda v: v[0][0]) if idx)
    return plan


def manifest_of(
    named: Sequence[tuple[str, torch.Tensor]], version: int, trainable_only: bool, bucket_mb: float
) -> Manifest:
    """What a ``send`` of ``named`` announces (whole shapes: a DTensor's ``shape`` is its global one)."""
    metas = tuple(TensorMeta(name=n, shape=tuple(t.shape), dtype=str(t.dtype).removeprefix("torch.")) for n, t in named)
    return Manifest(version=version, trainable_only=trainable_only, bucket_bytes=int(bucket_mb * 2**20), tensors=metas)


def first_difference(manifest: Manifest, mine: dict[str, torch.Tensor]) -> tuple[int, str] | None:
    """Where ``mine`` (a worker's tensors by name) does not fit ``manifest``: (index, what differs), index
    ``len(manifest.tensors)`` for tensors the worker has and a full sync would not write; None when it fits."""
    for i, m in enumerate(manifest.tensors):
        t = mine.get(m.name)
        if t is None:
            return i, f"the worker has no tensor {m.name!r}{_lora_hint(m.name, mine)}"
        if tuple(t.shape) != m.shape:
            return i, f"{m.name!r} is {tuple(t.shape)} on the worker, {m.shape} on the learner"
    if not manifest.trainable_only:
        extra = [n for n in mine if n not in {m.name for m in manifest.tensors}]
        if extra:
            hint = _lora_hint(extra[0], {m.name: None for m in manifest.tensors})
            what = f"the worker has {len(extra)} tensors the learner does not send, first {extra[0]!r}{hint}"
            return len(manifest.tensors), what
    return None


def _lora_hint(name: str, other: dict[str, Any]) -> str:
    lora_here = "lora_" in name or ".base_layer." in name
    lora_there = any("lora_" in n or ".base_layer." in n for n in other)
    if lora_here != lora_there:
        return " (LoRA adapters on one side only: call lora.add_adapters with the run's model.lora on both)"
    return ""


def in_place_buffer(
    metas: list[TensorMeta], mine: dict[str, torch.Tensor], device: torch.device
) -> torch.Tensor | None:
    """A tensor alone in its bucket is received straight into the worker's own (when contiguous, of the wire
    dtype, on ``device``); None otherwise."""
    if len(metas) == 1:
        t = mine[metas[0].name]
        if t.is_contiguous() and t.dtype == metas[0].torch_dtype and t.device == device:
            return t.detach().view(-1)
    return None


def unpack_bucket(flat: torch.Tensor, metas: list[TensorMeta], mine: dict[str, torch.Tensor]) -> None:
    """Copy a received bucket into the worker's tensors, slice by slice (a tensor received in place is there)."""
    offset = 0
    for m in metas:
        numel, t = numel_of(m.shape), mine[m.name]
        if t.data_ptr() != flat.data_ptr():  # not received in place
            t.detach().copy_(flat[offset : offset + numel].view(m.shape))
        offset += numel
