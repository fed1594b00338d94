"""Data-parallel training with ``torch.distributed`` (gloo on CPU, nccl on GPUs).

Launch with ``torchrun --nproc-per-node N -m rubricgym train ...`` (or any launcher that sets the usual
``RANK``/``WORLD_SIZE``/``MASTER_ADDR`` variables): each rank rolls out its share of the step's tasks, computes
its gradient with the loss normalised by the *global* token count, and ranks sum gradients
(``update.sync_gradients``), so the update equals one process training on the whole batch. Rank 0 writes
metrics and checkpoints.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

import torch

T = TypeVar("T")


def rank_world() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def init_from_env(backend: str = "gloo") -> bool:
    """Join the process group described by the environment (``WORLD_SIZE`` > 1); False when single-process."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or torch.distributed.is_initialized():
        return torch.distributed.is_initialized()
    torch.distributed.init_process_group(backend=backend)
    return True


def leave() -> None:
    """Wait for every rank, then leave the process group. A rank that destroys its gloo group while another rank
    still works in it (rank 0 saving a result, say) can abort with "terminate called without an active exception"
    (CI failures of the 2-rank tests); a rank that exits without leaving, too. ``rubricgym train`` and ``sft`` leave
    this way at the end of a run."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


def local_device(device: str) -> str:
    """The device this process trains on: ``cuda``/``auto`` under a multi-process launch is the GPU named by
    ``LOCAL_RANK`` (one GPU per rank, made current), ``auto`` without a GPU the CPU; anything else as given."""
    if device in ("cuda", "auto") and torch.cuda.is_available():
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            return f"cuda:{local}"
        return "cuda"
    return "cpu" if device == "auto" else device


def backend_for(device: str) -> str:
    """The collective backend for tensors on ``device``: nccl for GPUs, gloo for the CPU."""
    return "nccl" if device.startswith("cuda") else "gloo"


def max_over_ranks(value: int) -> int:
    """The largest ``value`` any rank holds (``value`` itself in one process)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return value
    t = torch.tensor([value], dtype=torch.int64)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return int(t.item())


def any_rank(flag: bool) -> bool:
    """True when ``flag`` is true on any rank (all ranks take the same decision, e.g. to stop on a time budget)."""
    return bool(max_over_ranks(int(flag)))


def shard(items: Sequence[T], rank: int | None = None, world: int | None = None) -> list[T]:
    """This rank's items: every ``world``-th one starting at ``rank`` (contiguous groups stay whole)."""
    if rank is None or world is None:
        rank, world = rank_world()
    return list(items[rank::world])


def is_main() -> bool:
    return rank_world()[0] == 0
