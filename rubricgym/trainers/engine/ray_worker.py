"""The body of a Ray rollout actor (``engine/ray_backend.py`` wraps it with ``ray.remote`` when a pool starts, so
importing it needs no Ray): its own ``TrainingPolicy``, the weights the learner pushes (a state dict through the
object store, or a ``WeightSync`` receive), and whole groups played and sent back as ``WireGroup``s."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

import torch

from rubricgym.core.types import Task
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.sampling import ToolLimits, fixed_env, play_groups
from rubricgym.trainers.engine.weight_sync import WeightSync, WeightSyncError

WireGroup = list[tuple[str, list[dict[str, Any]]]]
"""A group as it crosses the wire: each rollout's trajectory JSON and its turns as dicts."""


class RolloutWorker:
    """The actor body (wrapped with ``ray.remote`` at pool creation, so importing this needs no Ray)."""

    def __init__(
        self,
        model: str,
        gen: dict[str, Any],
        env_id: str,
        env_kwargs: dict[str, Any],
        threads: int = 1,
        limits: tuple[float | None, int | None] = (None, None),
    ):
        torch.set_num_threads(threads)
        self.policy = TrainingPolicy(model, **gen)
        self.policy.load()
        self.env_of = fixed_env(env_id, env_kwargs)
        self.limits = None if limits == (None, None) else ToolLimits(*limits)  # per actor: its own tool cap
        self.sync: WeightSync | None = None

    def node_id(self) -> str:
        """The id of the Ray node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def set_weights(self, state: dict[str, Any]) -> bool:
        self.policy.lm.load_state_dict(state, strict=False)
        self.policy.release_packed()  # packs and stored keys/values of the old weights
        return True

    def join_sync(self, address: str, rank: int, world_size: int, timeout_s: float) -> int:
        """Leave this actor's weight-sync group, if any, and join the one at ``address`` as ``rank`` (blocks until
        the learner and every other actor have joined; ``WeightSyncTimeout`` after ``timeout_s``)."""
        if self.sync is not None:
            self.sync.close()
            self.sync = None
        self.sync = WeightSync.connect(address, rank, world_size, timeout_s=timeout_s)
        return rank

    def receive_weights(self, wait_s: float) -> int:
        """Take the learner's next ``WeightSync.send`` into the policy, in place; returns its policy version."""
        if self.sync is None:
            raise WeightSyncError("this rollout actor has joined no weight-sync group: call join_sync first")
        return self.sync.receive(self.policy, wait_s=wait_s).version

    def weights(self) -> dict[str, torch.Tensor]:
        """A copy of the weights this actor samples from (to check a push)."""
        return {k: v.detach().clone() for k, v in self.policy.lm.state_dict().items()}

    def rollout(
        self,
        tasks: list[dict[str, Any]],
        seeds: list[int],
        group_size: int,
        anchor_greedy: bool,
        temperature: float | None,
        hints: list[str | None] | None = None,
        envs: list[tuple[str, dict[str, Any]]] | None = None,
    ) -> list[WireGroup]:
        """Play a group per task; ``envs[j]`` (env id, kwargs) is where task j is played (a suite's entries),
        else every task in the actor's own env."""
        self.policy.forget_kv()  # as LocalBackend.collect: nothing carries over from an earlier call
        parsed = [Task.model_validate(t) for t in tasks]
        env_of = self.env_of
        if envs is not None:
            if len(envs) != len(parsed):
                raise ValueError(f"{len(envs)} envs for {len(parsed)} tasks: give one (env id, kwargs) per task")
            routes = {t.id: (env_id, kwargs) for t, (env_id, kwargs) in zip(parsed, envs, strict=True)}

            def env_of(task: Task) -> tuple[str, dict[str, Any]]:
                return routes[task.id]

        groups = asyncio.run(
            play_groups(
                self.policy,
                env_of,
                parsed,
                seeds,
                group_size,
                anchor_greedy=anchor_greedy,
                temperature=temperature,
                hints=hints,
                limits=self.limits,
            )
        )
        return [[(r.trajectory.model_dump_json(), [asdict(x) for x in r.turns]) for r in g] for g in groups]
