"""Rollouts on a pool of Ray actors (``--ray`` for a local Ray, ``--ray-address`` for a cluster).

Each actor holds its own copy of the policy (a ``TrainingPolicy``) and plays whole groups; the learner sends
the new weights after every update (one ``ray.put``, shared by all actors) and gets back trajectories plus the
exact tokens and sampling log-probs behind them, as ``Rollout`` records. Tasks are dealt to actors round-robin per
step, and every group's seeds are fixed by the trainer, so the result does not depend on which actor played which
group. ``ray`` is an optional dependency: it is imported only when a pool is created.

Placement: each actor asks for ``worker_resources`` (CPUs, GPUs, memory, custom resources such as a ``rollout``
label that only some nodes carry); with ``placement`` the pool reserves one bundle per actor in a placement group
(``pack``: as few nodes as possible, ``spread``: as many as possible, ``strict_*``: or fail). ``placement()`` says
which node each actor landed on.

Fault tolerance: an actor that dies (its process or node is lost, or Ray's memory monitor kills it) is replaced by
a fresh one with the same resources and bundle, which is given the latest pushed weights, and replays exactly the
groups the dead one had not returned, as one call with the same seeds: the result holds every (task, seed) once,
in order, as if nothing had failed. Ray's own actor restart is not used because a restarted actor would come back
with the weights it was created with, not the learner's latest.

Weight transport (``generation.ray_weight_sync``): ``object_store`` puts the state dict once and every actor
loads it. ``collective`` broadcasts it over a ``WeightSync`` group of the learner and the actors, built when the
pool starts and rebuilt at the next push after an actor is replaced (``CollectivePush``, ``engine/ray_sync.py``);
a replacement that must replay groups before then loads, through the object store once, the current weights of the
model last pushed (the pushed ones: the trainer collects only between a push and the next update).
"""

from __future__ import annotations

import asyncio
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rubricgym.agents.local import Turn
from rubricgym.core.types import Task, Trajectory
from rubricgym.trainers.algo.rollouts import Group, Rollout
from rubricgym.trainers.config import EnvConfig, GenerationConfig, ModelConfig
from rubricgym.trainers.engine.ray_placement import Placement, actor_options, bundle_of, check_resources, reserve
from rubricgym.trainers.engine.ray_sync import CollectivePush, _lost
from rubricgym.trainers.engine.ray_worker import RolloutWorker, WireGroup
from rubricgym.trainers.engine.sampling import EnvOf


class RolloutWorkerError(RuntimeError):
    """A rollout actor kept dying: more than ``max_restarts`` replacements in one call."""


def _state_of(model: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def _from_wire(group: WireGroup) -> Group:
    return [Rollout(Trajectory.model_validate_json(t), [Turn(**x) for x in turns]) for t, turns in group]


class RayBackend:
    """A pool of ``RolloutWorker`` actors: a ``RolloutBackend``.

    ``address``: the cluster to join (``ray start --head`` prints it; ``"auto"`` finds a local one); without it and
    with no Ray running, the pool starts a local Ray of its own with exactly the resources it asks for.
    ``worker_resources``: what each actor reserves (default one CPU; see ``ray_placement.WorkerResources``).
    ``placement``: reserve all actors' resources at once in a placement group of that strategy, failing after
    ``placement_timeout_s`` if the cluster cannot hold it (None: Ray's default scheduler places each actor on its
    own). ``start_timeout_s`` bounds every wait for an actor to be scheduled and load the model (``placement()``,
    ``push_weights``, a replacement's start): past it the call raises ``RolloutWorkerError`` with the resources
    asked for and those free, instead of hanging.
    ``max_restarts``: how many times one actor may be replaced within one ``collect`` or ``push_weights`` before
    that call raises ``RolloutWorkerError`` naming the worker and the cause; ``restarts`` counts the replacements
    over the pool's life.
    ``generation.ray_weight_sync``: how ``push_weights`` moves the weights (see the module docstring);
    ``sync_timeout_s`` bounds the collective's rendezvous and every bucket's broadcast, past which a push raises
    ``WeightSyncTimeout`` naming the side that waited; an actor lost *during* a broadcast costs that long (gloo's
    send to a dead peer ends only by its timeout), then the push is resent over a rebuilt group (one lost before
    the push is seen at once). ``push_s``: seconds the last ``push_weights`` took.
    """

    def __init__(
        self,
        model: ModelConfig,
        generation: GenerationConfig,
        env: EnvConfig,
        *,
        env_of: EnvOf | None = None,
        address: str | None = None,
        workers: int = 2,
        worker_resources: Mapping[str, Any] | None = None,
        placement: Placement | None = None,
        placement_timeout_s: float = 120.0,
        start_timeout_s: float = 600.0,
        max_restarts: int = 3,
        sync_timeout_s: float = 60.0,
    ):
        import ray

        if workers < 1:
            raise ValueError(f"workers={workers}: a pool needs at least one actor")
        if max_restarts < 0:
            raise ValueError(f"max_restarts={max_restarts}: use 0 to fail on the first lost actor")
        if placement is not None and placement not in ("pack", "spread", "strict_pack", "strict_spread"):
            raise ValueError(f"placement={placement!r}: use 'pack', 'spread', 'strict_pack' or 'strict_spread'")
        self.resources = check_resources(worker_resources or {})
        self.max_restarts = max_restarts
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        """Actors replaced so far (each after its actor died)."""
        self.transport = generation.ray_weight_sync
        self.push_s = 0.0
        self._collective = CollectivePush(lambda: self.workers, self._node_of, self._respawn, sync_timeout_s)
        if not ray.is_initialized():
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
            else:
                custom = {k: v * workers for k, v in self.resources.get("resources", {}).items()}
                ray.init(
                    address="local",  # never the cluster another `ray start` on this machine advertises
                    num_cpus=max(1, math.ceil(self.resources.get("num_cpus", 1) * workers)),
                    resources=custom or None,
                    include_dashboard=False,
                    ignore_reinit_error=True,
                    log_to_driver=False,
                )
            self._owns_ray = True
        else:
            self._owns_ray = False
        g = generation
        self._init_args = (
            model.name,
            {
                "temperature": g.temperature,
                "top_p": g.top_p,
                "max_new_tokens": g.max_new_tokens,
                "dtype": model.dtype,
                "max_batch": g.max_batch,
                "response_prefix": g.response_prefix,
                "kv_reuse_tokens": g.kv_reuse_tokens,
            },
            env.id,
            env.kwargs,
            model.threads or 1,
            (env.tool_timeout_s, env.max_concurrent_tools),
        )
        self.env_of = env_of
        """Which env plays a task (a suite's entries); ``None``: every task in ``env.id`` with ``env.kwargs``."""
        self._actor = ray.remote(RolloutWorker)
        self._weights: Any = None  # the ObjectRef of the last pushed state dict: a replacement actor loads it
        self._group: Any = None
        self.workers: list[Any] = []
        try:
            if placement is not None:
                self._group = self._reserve(workers, placement, placement_timeout_s)
            self.workers = [self._spawn(i) for i in range(workers)]
            if self.transport == "collective":
                self._collective.join()
        except BaseException:
            self.close()
            raise

    @property
    def sync_timeout_s(self) -> float:
        """Bounds the collective's rendezvous and every bucket's broadcast (see the class docstring)."""
        return self._collective.timeout_s

    @sync_timeout_s.setter
    def sync_timeout_s(self, value: float) -> None:
        self._collective.timeout_s = value

    def _bundle(self) -> dict[str, float]:
        return bundle_of(self.resources)

    def _reserve(self, workers: int, placement: Placement, timeout_s: float) -> Any:
        bundle = self._bundle()
        if not bundle:
            raise ValueError("placement needs each worker to reserve something: set worker_resources")
        advice = "add nodes, lower worker_resources or workers, or use a non-strict placement"
        return reserve(bundle, workers, placement, timeout_s, "rollout workers", advice)

    def _spawn(self, index: int) -> Any:
        return self._actor.options(**actor_options(self.resources, self._group, index)).remote(*self._init_args)

    def _not_started(self, index: int) -> RolloutWorkerError:
        import ray

        return RolloutWorkerError(
            f"rollout worker {index} did not start in {self.start_timeout_s:.0f} s (start_timeout_s): Ray could not "
            f"schedule {self._bundle()} (free now: {ray.available_resources()}) or the model is still loading"
        )

    def _replace(self, index: int, cause: BaseException, failures: int) -> Any:
        """Replace actor ``index`` after it died (its ``failures``-th death in this call); returns a call on the new
        actor that completes once it is ready: it takes the latest pushed weights, if any."""
        import ray

        new = self._respawn(index, cause, failures)
        if self.transport == "collective":
            return (
                new.node_id.remote()
                if self._collective.pushed is None
                else new.set_weights.remote(ray.put(_state_of(self._collective.pushed)))
            )
        return new.node_id.remote() if self._weights is None else new.set_weights.remote(self._weights)

    def _respawn(self, index: int, cause: BaseException, failures: int) -> Any:
        """Kill and respawn actor ``index`` (its ``failures``-th death in this call); drops the sync group, whose
        membership just changed."""
        import ray

        if failures > self.max_restarts:
            raise RolloutWorkerError(
                f"rollout worker {index} died {failures} times in one call (max_restarts={self.max_restarts}); "
                f"last cause: {type(cause).__name__}: {cause}"
            ) from cause
        ray.kill(self.workers[index], no_restart=True)  # a no-op for a dead actor; stops one only unreachable
        self.workers[index] = self._spawn(index)
        self.restarts += 1
        warnings.warn(
            f"rollout worker {index} died ({type(cause).__name__}); replaced it ({self.restarts} replacement(s) so "
            "far) and replaying its groups",
            RuntimeWarning,
            stacklevel=4,
        )
        self._collective.close()
        return self.workers[index]

    def placement(self) -> dict[int, str]:
        """The Ray node id each actor runs on (waits up to ``start_timeout_s`` for the actors to start)."""
        return {i: self._node_of(i) for i in range(len(self.workers))}

    def _node_of(self, index: int) -> str:
        """The node id of actor ``index``, once it has started (``RolloutWorkerError`` past ``start_timeout_s``)."""
        import ray

        try:
            node: str = ray.get(self.workers[index].node_id.remote(), timeout=self.start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise self._not_started(index) from None
        return node

    def push_weights(self, model: Any) -> None:
        """Send ``model``'s weights to every actor (replacing any that died since) by the configured transport."""
        start = time.perf_counter()
        if self.transport == "collective":
            self._collective.push(model)
        else:
            self._push_object_store(model)
        self.push_s = time.perf_counter() - start

    def _push_object_store(self, model: Any) -> None:
        import ray

        self._weights = ray.put(_state_of(model))
        for i, ref in enumerate([w.set_weights.remote(self._weights) for w in self.workers]):
            failures = 0
            while True:
                try:
                    ray.get(ref, timeout=self.start_timeout_s)
                    break
                except ray.exceptions.GetTimeoutError:
                    raise self._not_started(i) from None
                except _lost() as e:
                    failures += 1
                    ref = self._replace(i, e, failures)

    async def collect(
        self,
        tasks: Sequence[Task],
        seeds: Sequence[int],
        group_size: int,
        *,
        anchor_greedy: bool = False,
        temperature: float | None = None,
        full_precision: bool = False,
        hints: Sequence[str | None] | None = None,
    ) -> list[Group]:
        """See ``RolloutBackend.collect``; actors generate in the configured dtype (``full_precision`` is ignored).
        A worker that dies is replaced and its groups replayed (see the module docstring)."""
        if not self.workers:
            raise RolloutWorkerError("the Ray rollout pool is closed: no actor can play these groups")

        async def play(w: int, idx: list[int]) -> list[WireGroup]:
            args = (
                [tasks[i].model_dump(mode="json") for i in idx],
                [seeds[i] for i in idx],
                group_size,
                anchor_greedy,
                temperature,
                None if hints is None else [hints[i] for i in idx],
                None if self.env_of is None else [self.env_of(tasks[i]) for i in idx],
            )
            failures, ready = 0, None
            while True:
                try:
                    if ready is not None:  # a replacement has started and taken the latest weights
                        try:
                            await asyncio.wait_for(asyncio.wrap_future(ready.future()), self.start_timeout_s)
                        except TimeoutError:
                            raise self._not_started(w) from None
                    result: list[WireGroup] = await asyncio.wrap_future(self.workers[w].rollout.remote(*args).future())
                    return result
                except _lost() as e:
                    failures += 1
                    ready = self._replace(w, e, failures)

        n = len(self.workers)
        chunks = [(w, list(range(w, len(tasks), n))) for w in range(n)]
        chunks = [(w, idx) for w, idx in chunks if idx]
        results = await asyncio.gather(*(play(w, idx) for w, idx in chunks))
        groups: list[Group] = [[] for _ in tasks]
        for (_, idx), result in zip(chunks, results, strict=True):
            for i, group in zip(idx, result, strict=True):
                groups[i] = _from_wire(group)
        return groups

    def close(self) -> None:
        import ray

        self._collective.close()
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self._group)
            self._group = None
        if self._owns_ray:
            ray.shutdown()
