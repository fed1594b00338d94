"""FSDP2 sharding of the trained policy (``model.parallel.strategy: fsdp2``): PyTorch's own ``fully_shard``.

Each decoder layer is its own FSDP2 unit and the causal LM is the root (embedding, final norm and the tied head),
so every rank holds ``1/world`` of the parameters, their gradients and their AdamW state (``bench/scale.py``
counts the bytes). What the rest of the trainer relies on:

- **Sum, not mean.** The loss of every rank is already normalised by the *global* token (or sequence) count
  (``update.normalizer``), so ranks must *sum* their gradients. FSDP2 averages by default, which would silently
  make every gradient ``1/world`` of its value (AdamW hides it; clipping and the logged norm do not):
  ``set_gradient_divide_factor(1.0)`` plus, on gloo (no ``PREMUL_SUM``), ``set_force_sum_reduction_for_comms``.
- **The update runs through the root.** The log-prob forward (``algo.logprobs.generated_logprobs``: body, then the LM
  head on the generated positions only) is registered as an FSDP forward method of the root
  (``register_fsdp_forward_method``), so the root's parameters are gathered for it and its gradients
  reduce-scattered after it; ``update.logprobs_of`` routes to it.
- **Lockstep.** Every forward and backward of a sharded module is a collective, so every rank runs the same
  number of micro-batches: a rank with fewer runs ``filler`` micro-batches whose loss is multiplied by zero
  (``update.compute_gradients``).
- **Generation unsharded.** Sampling through sharded layers gathers every layer for every token (~5x slower,
  FACTS.md); ``gathered`` unshards every unit once for the rollout phase and reshards for the update.
- **Checkpoints** are ``torch.distributed.checkpoint`` directories every rank writes its shard of
  (``trainers/engine/checkpoint.py``): they load into any world size, sharded or not.
"""

from __future__ import annotations

import contextlib
import datetime
import types
from collections.abc import Iterator
from typing import Any

import torch

from rubricgym.trainers.algo.logprobs import generated_logprobs
from rubricgym.trainers.config import ConfigError, ParallelConfig
from rubricgym.trainers.engine.lora import trainable_parameters

LOGPROBS_METHOD = "rubricgym_logprobs"
"""The root's registered FSDP forward method that runs ``algo.logprobs.generated_logprobs``."""


def init_single_rank() -> None:
    """A gloo process group of one (FSDP2 needs a group; ``torchrun`` is not needed for world 1)."""
    if torch.distributed.is_initialized():
        return
    store = torch.distributed.HashStore()
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=datetime.timedelta(60))


def decoder_layers(lm: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a causal LM (``model.layers`` in Llama-style models), each one FSDP2 unit."""
    body = getattr(lm, getattr(lm, "base_model_prefix", "model"), None)
    layers = getattr(body, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList) or not len(layers):
        raise TypeError(f"{type(lm).__name__} has no decoder layers at .{lm.base_model_prefix}.layers to shard")
    return list(layers)


def select_layers(lm: torch.nn.Module, k: int, field: str = "train_layers") -> list[torch.nn.Parameter]:
    """Freeze every weight but the top ``k`` decoder layers and the final norm; returns those trained. ``field``
    names the setting in the error when the model has fewer layers."""
    layers = decoder_layers(lm)
    if k > len(layers):
        raise ConfigError(f"{field}: {k}, but the model has {len(layers)} decoder layers")
    lm.requires_grad_(False)
    body = getattr(lm, getattr(lm, "base_model_prefix", "model"))
    for m in [*layers[-k:], getattr(body, "norm", None)]:
        if m is not None:
            m.requires_grad_(True)
    return trainable_parameters(lm)


def _logprobs(self: torch.nn.Module, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    # one body call per micro-batch: the shared-prefix path would run every unit twice in one forward
    kwargs["share_prefix"] = False
    return generated_logprobs(self, *args, **kwargs)


def shard(lm: torch.nn.Module, cfg: ParallelConfig) -> torch.nn.Module:
    """Apply FSDP2 to ``lm`` in place (each decoder layer, then the root) with sum reduction; returns ``lm``.

    Every rank must hold the same weights when it calls this (all load the same checkpoint, and LoRA adapters
    are seeded alike); each then keeps its own shard. The root is lazily initialised by one tiny forward on
    every rank, so the units can later be unsharded and called directly (generation)."""
    from torch.distributed.fsdp import (
        CPUOffloadPolicy,
        MixedPrecisionPolicy,
        OffloadPolicy,
        fully_shard,
        register_fsdp_forward_method,
    )

    if cfg.cpu_offload and next(lm.parameters()).device.type == "cpu":  # FSDP2 pins the host copies: a GPU's job
        raise ValueError("model.parallel.cpu_offload is for a model on a GPU; this one is on the CPU already")
    if not torch.distributed.is_initialized():
        init_single_rank()
    kw: dict[str, Any] = {
        "reshard_after_forward": cfg.reshard_after_forward,
        "offload_policy": CPUOffloadPolicy() if cfg.cpu_offload else OffloadPolicy(),
    }
    if cfg.mixed_precision == "bf16":
        kw["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in decoder_layers(lm):
        fully_shard(layer, **kw)
    fully_shard(lm, **kw)
    lm.rubricgym_logprobs = types.MethodType(_logprobs, lm)  # type: ignore[assignment]
    register_fsdp_forward_method(lm, LOGPROBS_METHOD)
    gloo = torch.distributed.get_backend() == "gloo"
    for unit in units(lm):
        unit.set_gradient_divide_factor(1.0)
        if gloo:  # gloo has no PREMUL_SUM: reduce with a plain SUM
            unit.set_force_sum_reduction_for_comms(True)
    with torch.no_grad():  # the root's lazy init (it must run forward before any unit is called alone)
        device = next(lm.parameters()).device
        lm(input_ids=torch.zeros((1, 1), dtype=torch.long, device=device))
    return lm


def units(model: torch.nn.Module) -> list[Any]:
    """The FSDP2 units inside ``model`` (root last), empty when it is not sharded."""
    from torch.distributed.fsdp import FSDPModule

    found = [m for m in model.modules() if isinstance(m, FSDPModule)]
    return found[1:] + found[:1]


def is_sharded(model: torch.nn.Module) -> bool:
    """Whether ``model`` (or the network inside a ``PeftModel``) holds FSDP2 units."""
    return bool(units(model))


def sharded_root(model: torch.nn.Module) -> torch.nn.Module | None:
    """The FSDP2 root inside ``model`` (itself, or the network inside a ``PeftModel``), or None."""
    found = units(model)
    return found[-1] if found else None


@contextlib.contextmanager
def gathered(model: torch.nn.Module, reshard_after_forward: bool = True) -> Iterator[None]:
    """Every unit unsharded for the duration (one all-gather per unit, on every rank alike), so generation
    runs on whole weights with no collective per token; resharded after. A no-op when ``model`` is not sharded."""
    found = units(model)
    if not found:
        yield
        return
    for u in found:
        u.unshard()
        u.set_reshard_after_forward(False)
    try:
        yield
    finally:
        for u in found:
            u.reshard()
            u.set_reshard_after_forward(reshard_after_forward)


def grad_norm_and_clip(params: list[torch.nn.Parameter], max_norm: float | None) -> float:
    """The global gradient norm over every rank's shards (``clip_grad_norm_`` on DTensor gradients reduces it
    across the mesh), clipped to ``max_norm`` when given; a plain float."""
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm is not None else float("inf"))
    full = getattr(norm, "full_tensor", None)
    return float(full() if full is not None else norm)


def full_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Whole (unsharded) CPU tensors of ``model``'s state dict. Sharded: a collective every rank must call, and
    only rank 0 gets the tensors (the others an empty dict)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    if not is_sharded(model):
        return {k: v.detach() for k, v in model.state_dict().items()}
    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return dict(get_model_state_dict(model, options=opts))  # type: ignore[arg-type]
