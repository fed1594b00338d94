"""Weight sync by collective: the learner broadcasts its new weights to rollout workers over ``torch.distributed``.

A ``WeightSync`` is one process group of its own (built directly on a ``TCPStore`` or ``FileStore``, never the
default group), so a learner that already runs DDP or FSDP2 can make one beside its data-parallel group: the
learner is rank 0, each rollout worker holding its own copy of the policy is rank 1..N. After an update the
learner calls ``send(model, version)`` and every worker ``receive(model)``:

1. **Manifest first.** The learner broadcasts what it sends (names, shapes, dtypes, the policy version, whether
   these are all tensors or only the trainable ones, e.g. LoRA adapters). Every worker checks it against its own
   model and the group agrees on the first tensor that differs (one ``all_reduce``), so a mismatch (another
   model, LoRA on one side only) raises ``WeightSyncMismatch`` on *both* sides naming that tensor, before any
   weight is written; the group stays usable.
2. **Buckets.** Tensors are flattened into buckets of at most ``bucket_mb`` per dtype (a bigger tensor is a
   bucket of its own, sent and received in place) and broadcast one bucket at a time, double-buffered: the
   learner fills the next bucket and the worker unpacks the previous one while a bucket is on the wire (two
   staging buffers per dtype, at most ``bucket_mb`` each, kept between syncs until ``close``). Workers
   write into their parameters in place (``copy_``: a worker holding another dtype, say bf16, gets the weights
   cast). Both sides derive the bucket plan from the manifest (``plan_buckets``: ``weight_buckets.py`` holds the
   manifest and the plan), so nothing else travels.
3. **Timeouts.** Every collective has a deadline (``timeout_s``; a worker's wait for the next sync to *start* is
   ``receive(wait_s=...)``); a peer that never joins, dies, or stops answering raises ``WeightSyncTimeout``
   saying which side waited for what and what to check, instead of hanging. After one, ``connect`` again; a
   worker whose sync failed midway holds partly written weights: sample from them only after a sync completes.

Sharded learner (FSDP2, ``trainers/engine/sharding.py``): parameters are DTensor shards, and ``send`` gathers each one
whole with ``full_tensor()`` (what ``sharding.grad_norm_and_clip`` and the checkpoint export do), which is a
collective of the FSDP group: every *other* learner rank must call ``gather_for_send(model, ...)`` at the same
time, in step with rank 0's ``send`` (one parameter at a time: the sender holds at most two buckets of whole
weights per dtype, the others one parameter).

Backend: gloo for CPU tensors, nccl when ``device`` is a GPU (``distributed.backend_for``). The nccl path
(``ProcessGroupNCCL`` on the same store, tensors staged on ``device``) is written to the same contract but is
untested on this project's CPU machines; a vLLM server would instead take the weights through vLLM's own weight
transfer engine (``vllm.distributed.weight_transfer``, NCCL only). The disk path (``VLLMBackend.push_weights``:
safetensors written, then reloaded) stays the fallback; ``bench/weight_sync.py`` compares the two. The Ray
rollout pool pushes through it with ``generation.ray_weight_sync: collective`` (``trainers/engine/ray_sync.py``: one
group of the learner and the actors, rebuilt when an actor is replaced; ``bench/ray_weight_sync.py``).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from rubricgym.trainers.engine.distributed import backend_for
from rubricgym.trainers.engine.weight_buckets import (
    Manifest,
    TensorMeta,
    first_difference,
    in_place_buffer,
    manifest_of,
    numel_of,
    plan_buckets,
    sync_tensors,
    unpack_bucket,
    whole_tensor,
    worker_tensors,
)

if TYPE_CHECKING:
    from rubricgym.agents.local import LocalAgent

DEFAULT_BUCKET_MB = 256.0
"""Bytes per broadcast bucket, in MiB: big enough that per-collective latency vanishes, small enough that the
staging copy of one bucket on each side stays cheap."""
_PREFIX = "rubricgym-weight-sync"


class WeightSyncError(RuntimeError):
    """A weight sync that cannot go on; the message says which side and what to do."""


class WeightSyncTimeout(WeightSyncError):
    """A peer did not join, died, or did not answer a collective within the timeout."""


class WeightSyncMismatch(WeightSyncError):
    """The learner's manifest does not fit the worker's model; raised on both sides, naming the first difference."""


@dataclass(frozen=True)
class SyncReport:
    """What one ``send`` or ``receive`` moved."""

    version: int
    tensors: int
    buckets: int
    nbytes: int


class WeightSync:
    """One side of a weight-sync group: the learner (rank 0) or a rollout worker (rank 1..world_size-1)."""

    def __init__(self, pg: Any, store: Any, rank: int, world_size: int, device: torch.device, timeout_s: float):
        self.pg, self.store, self.rank, self.world_size = pg, store, rank, world_size
        self.device, self.timeout_s = device, timeout_s
        self.syncs = 0  # completed or refused syncs: the key of the next one's start signal
        self.broken: str | None = None
        self._buffers: dict[tuple[torch.dtype, int], torch.Tensor] = {}

    @classmethod
    def connect(
        cls, address: str, rank: int, world_size: int, *, timeout_s: float = 300.0, device: str = "cpu"
    ) -> WeightSync:
        """Join the sync group at ``address`` (``host:port``, the learner's TCP store which rank 0 opens, or
        ``file:///path`` on a shared filesystem) as ``rank`` of ``world_size`` (learner + workers). Blocks until
        every peer has joined; ``WeightSyncTimeout`` after ``timeout_s``."""
        if not 0 <= rank < world_size or world_size < 2:
            raise ValueError(
                f"need 0 <= rank < world_size and world_size >= 2 (a learner and a worker); got {rank}, {world_size}"
            )
        dev = torch.device(device)
        side = "learner" if rank == 0 else f"rollout worker {rank}"
        timeout = datetime.timedelta(seconds=timeout_s)
        backend = backend_for(str(dev))
        if backend == "nccl" and not torch.distributed.is_nccl_available():
            raise ValueError(f"device {device!r} needs the nccl backend, which this torch build lacks")
        host, _, port = address.rpartition(":")
        if not address.startswith("file://") and not (host and port.isdigit() and int(port) < 2**16):
            raise ValueError(f"address {address!r} is neither host:port nor file:///path")
        try:
            if address.startswith("file://"):
                store: Any = torch.distributed.FileStore(address.removeprefix("file://"), world_size)
                store.set_timeout(timeout)
            else:
                store = torch.distributed.TCPStore(host, int(port), world_size, rank == 0, timeout=timeout)
            prefixed = torch.distributed.PrefixStore(_PREFIX, store)
            if backend == "nccl":
                from torch.distributed import ProcessGroupNCCL

                opts = ProcessGroupNCCL.Options()
                opts._timeout = timeout
                pg: Any = ProcessGroupNCCL(prefixed, rank, world_size, opts)
            else:
                from torch.distributed import ProcessGroupGloo

                pg = ProcessGroupGloo(prefixed, rank, world_size, timeout)
        except (RuntimeError, ValueError, OSError) as e:
            what = (
                f"waited {timeout_s:g} s for {world_size - 1} rollout worker(s) to join at {address}"
                if rank == 0
                else f"could not join the learner's sync group at {address} within {timeout_s:g} s"
            )
            raise WeightSyncTimeout(
                f"weight sync ({side}): {what}: {_first_line(e)}. Check that the learner and every worker were "
                f"started with the same address and world_size {world_size}, and that the address is reachable"
            ) from e
        return cls(pg, store, rank, world_size, dev, timeout_s)

    def _staging(self, dtype: torch.dtype, slot: int, numel: int) -> torch.Tensor:
        """A staging buffer of ``numel`` elements, kept between syncs (a fresh one per bucket would page-fault a
        bucket's worth of new memory each time). Two slots alternate: one on the wire while the other fills."""
        buf = self._buffers.get((dtype, slot))
        if buf is None or buf.numel() < numel:
            buf = self._buffers[(dtype, slot)] = torch.empty(numel, dtype=dtype, device=self.device)
        return buf[:numel]

    # ---- collectives ------------------------------------------------------------------------------------

    def _start(self, t: torch.Tensor, what: str, wait_s: float | None = None) -> Callable[[], Any]:
        """Start broadcasting ``t`` from the learner; returns the wait for it (which raises on timeout)."""
        opts = torch.distributed.BroadcastOptions()
        opts.rootRank, opts.rootTensor = 0, 0
        opts.timeout = datetime.timedelta(seconds=self.timeout_s if wait_s is None else wait_s)
        work = self._run(lambda: self.pg.broadcast([t], opts), what, wait_s)
        return lambda: self._run(work.wait, what, wait_s)

    def _broadcast(self, t: torch.Tensor, what: str, wait_s: float | None = None) -> None:
        self._start(t, what, wait_s)()

    def _min(self, value: int, what: str) -> int:
        t = torch.tensor([value], dtype=torch.int64, device=self.device)
        opts = torch.distributed.AllreduceOptions()
        opts.reduceOp = torch.distributed.ReduceOp(torch.distributed.ReduceOp.MIN)
        opts.timeout = datetime.timedelta(seconds=self.timeout_s)
        self._run(lambda: self.pg.allreduce([t], opts).wait(), what)
        return int(t.item())

    def _run(self, op: Callable[[], Any], what: str, wait_s: float | None = None) -> Any:
        if self.broken:
            raise WeightSyncError(f"this weight sync failed earlier ({self.broken}); connect a new one")
        try:
            return op()
        except RuntimeError as e:
            t = self.timeout_s if wait_s is None else wait_s
            if self.rank == 0:
                msg = (
                    f"weight sync (learner): {what} did not complete within {t:g} s: {_first_line(e)}. A rollout "
                    "worker died or is not calling receive(): check the workers' logs (each must call receive() "
                    "once per send())"
                )
            else:
                msg = (
                    f"weight sync (rollout worker {self.rank}): {what} did not complete within {t:g} s: "
                    f"{_first_line(e)}. The learner died, or has not called send(): check its log, or pass a "
                    "longer receive(wait_s=...) if it is still training"
                )
            self.broken = msg
            raise WeightSyncTimeout(msg) from e

    def _agree(self, manifest: Manifest, bad: int) -> None:
        """Every rank offers its first bad index (``len + 1`` when it fits); the group's minimum decides, so a
        refused sync is refused on every rank before anything is written. The learner's error names the tensor."""
        n = len(manifest.tensors)
        worst = self._min(bad, f"the manifest check of sync v{manifest.version}")
        if worst > n:
            return
        self.syncs += 1
        name = manifest.tensors[worst].name if worst < n else "(tensors the learner does not send)"
        if self.rank == 0:
            raise WeightSyncMismatch(
                f"weight sync (learner): a rollout worker's model does not fit sync v{manifest.version}: first "
                f"difference at {name!r} (the worker's error says what it holds); nothing was sent. Workers must "
                "load the same model, with the same LoRA settings, as the learner"
            )
        if bad > n:
            raise WeightSyncMismatch(
                f"weight sync (rollout worker {self.rank}): another worker's model does not fit sync "
                f"v{manifest.version} (first difference at {name!r}); nothing was written here either"
            )

    # ---- learner ----------------------------------------------------------------------------------------

    def send(
        self,
        model: torch.nn.Module | Sequence[tuple[str, torch.Tensor]],
        version: int,
        *,
        trainable_only: bool = False,
        bucket_mb: float = DEFAULT_BUCKET_MB,
    ) -> SyncReport:
        """Broadcast ``model``'s weights (``sync_tensors``; or the given ``(name, tensor)`` pairs) as policy
        ``version`` to every worker. Under FSDP2 the other learner ranks call ``gather_for_send`` meanwhile."""
        if self.rank != 0:
            raise WeightSyncError(
                f"send() is the learner's (rank 0); this is rollout worker {self.rank}: call receive()"
            )
        named = sync_tensors(model, trainable_only) if isinstance(model, torch.nn.Module) else list(model)
        manifest = manifest_of(named, version, trainable_only, bucket_mb)
        self.store.set(f"{_PREFIX}/start/{self.syncs}", str(version))
        payload = torch.frombuffer(bytearray(manifest.model_dump_json().encode()), dtype=torch.uint8)
        self._broadcast(torch.tensor([payload.numel()], dtype=torch.int64, device=self.device), "the manifest's size")
        self._broadcast(payload.to(self.device), "the manifest")
        plan = plan_buckets(manifest.tensors, manifest.bucket_bytes)
        whole: dict[int, torch.Tensor] = {}
        nbytes, done, gathered = 0, 0, 0
        in_flight: tuple[Callable[[], Any], torch.Tensor] | None = None
        try:
            self._agree(manifest, len(manifest.tensors) + 1)
            for i, (_, t) in enumerate(named):
                whole[i] = whole_tensor(t)  # in manifest order on every learner rank (a collective when sharded)
                gathered = i + 1
                while done < len(plan) and all(j in whole for j in plan[done]):
                    parts = [whole.pop(j).reshape(-1).to(self.device) for j in plan[done]]
                    if len(parts) == 1:
                        flat = parts[0]
                    else:
                        flat = self._staging(parts[0].dtype, done % 2, sum(x.numel() for x in parts))
                        torch.cat(parts, out=flat)
                    waiting = self._start(flat, f"bucket {done + 1}/{len(plan)} of sync v{version}")
                    if in_flight:  # the previous bucket: filling this one overlapped its broadcast
                        in_flight[0]()
                    in_flight = (waiting, flat)  # the buffer lives until its broadcast is done
                    nbytes += flat.numel() * flat.element_size()
                    done += 1
            if in_flight:
                in_flight[0]()
        except WeightSyncError:
            # the other FSDP ranks are gathering in step (gather_for_send): finish their collectives, then raise
            for _, t in named[gathered:]:
                if hasattr(t, "full_tensor"):
                    whole_tensor(t)
            raise
        self.syncs += 1
        return SyncReport(version, len(named), len(plan), nbytes)

    # ---- rollout worker ---------------------------------------------------------------------------------

    def ready(self) -> bool:
        """Whether the learner has started the next sync (a worker can poll this between generations and call
        ``receive`` only then). Never blocks."""
        return bool(self.store.check([f"{_PREFIX}/start/{self.syncs}"]))

    @torch.no_grad()
    def receive(self, target: torch.nn.Module | LocalAgent, *, wait_s: float | None = None) -> SyncReport:
        """Wait (up to ``wait_s``, default ``timeout_s``) for the learner's next ``send`` and write its weights
        into ``target`` in place: a model, or a ``LocalAgent`` (its ``lm``; its packed sampling weights, now
        stale, are released). Returns the received policy version with what moved."""
        if self.rank == 0:
            raise WeightSyncError("receive() is a rollout worker's; the learner (rank 0) calls send()")
        model = target if isinstance(target, torch.nn.Module) else target.lm
        size = torch.zeros(1, dtype=torch.int64, device=self.device)
        self._broadcast(size, "waiting for the learner's next send()", wait_s)
        payload = torch.empty(int(size.item()), dtype=torch.uint8, device=self.device)
        self._broadcast(payload, "the manifest")
        manifest = Manifest.model_validate_json(bytes(payload.cpu().numpy()))
        mine = worker_tensors(model)
        diff = first_difference(manifest, mine)
        n = len(manifest.tensors)
        self._agree(manifest, n + 1 if diff is None else diff[0])
        if diff is not None:
            raise WeightSyncMismatch(
                f"weight sync (rollout worker {self.rank}): this model does not fit the learner's sync "
                f"v{manifest.version}: {diff[1]}; nothing was written. Load the learner's model (and its LoRA "
                "settings) here"
            )
        nbytes = 0
        plan = plan_buckets(manifest.tensors, manifest.bucket_bytes)
        in_flight: tuple[Callable[[], Any], torch.Tensor, list[TensorMeta]] | None = None
        for k, bucket in enumerate(plan + [[]]):  # receive bucket k while unpacking bucket k - 1
            metas = [manifest.tensors[j] for j in bucket]
            started = None
            if metas:
                flat = in_place_buffer(metas, mine, self.device)
                if flat is None:
                    flat = self._staging(metas[0].torch_dtype, k % 2, sum(numel_of(m.shape) for m in metas))
                started = (self._start(flat, f"bucket {k + 1}/{len(plan)} of sync v{manifest.version}"), flat, metas)
                nbytes += flat.numel() * flat.element_size()
            if in_flight:
                wait, prev, prev_metas = in_flight
                wait()
                unpack_bucket(prev, prev_metas, mine)
            in_flight = started
        self.syncs += 1
        if not isinstance(target, torch.nn.Module):
            target.release_packed()
        return SyncReport(manifest.version, n, len(plan), nbytes)

    def close(self) -> None:
        """Leave the group and free the staging buffers (the learner's store stops serving once every rank has
        closed)."""
        if self.pg is not None:
            with contextlib.suppress(RuntimeError):
                self.pg.shutdown()
        self.pg = self.store = None
        self._buffers.clear()


def gather_for_send(model: torch.nn.Module, *, trainable_only: bool = False) -> None:
    """On every FSDP2 learner rank except the sender: gather each sharded tensor in step with rank 0's ``send``
    (``full_tensor`` is a collective of the FSDP group, so all ranks must call it in the same order)."""
    for _, t in sync_tensors(model, trainable_only):
        whole_tensor(t)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0].rstrip(".") if text else type(e).__name__
