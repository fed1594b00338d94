"""Rollouts on a pool of Ray actors (``--ray`` for a local Ray, ``--ray-address`` for a cluster).

Each actor holds its own copy of the policy (a ``TrainingPolicy``) and plays whole groups; the learner sends
the new weights after every update (one ``ray.put``, shared by all actors) and gets back trajectories plus the
exact tokens and sampling log-probs behind them, as ``Rollout`` records. Tasks are dealt to actors round-robin per
step, and every group's seeds are fixed by the trainer, so the result does not depend on which actor played which
group. ``ray`` is an optional dependency: it is imported only when a pool is created.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import torch

from rubricgym.agents.local import Turn
from rubricgym.core.types import Task, Trajectory
from rubricgym.trainers.config import EnvConfig, GenerationConfig, ModelConfig
from rubricgym.trainers.policy import TrainingPolicy
from rubricgym.trainers.rollouts import Group, Rollout, fixed_env, play_groups

WireGroup = list[tuple[str, list[dict[str, Any]]]]
"""A group as it crosses the wire: each rollout's trajectory JSON and its turns as dicts."""


class RolloutWorker:
    """The actor body (wrapped with ``ray.remote`` at pool creation, so importing this needs no Ray)."""

    def __init__(self, model: str, gen: dict[str, Any], env_id: str, env_kwargs: dict[str, Any], threads: int = 1):
        torch.set_num_threads(threads)
        self.policy = TrainingPolicy(model, **gen)
        self.policy.load()
        self.env_of = fixed_env(env_id, env_kwargs)

    def set_weights(self, state: dict[str, Any]) -> bool:
        self.policy.lm.load_state_dict(state, strict=False)
        return True

    def rollout(
        self,
        tasks: list[dict[str, Any]],
        seeds: list[int],
        group_size: int,
        anchor_greedy: bool,
        temperature: float | None,
        hints: list[str | None] | None = None,
    ) -> list[WireGroup]:
        groups = asyncio.run(
            play_groups(
                self.policy,
                self.env_of,
                [Task.model_validate(t) for t in tasks],
                seeds,
                group_size,
                anchor_greedy=anchor_greedy,
                temperature=temperature,
                hints=hints,
            )
        )
        return [[(r.trajectory.model_dump_json(), [asdict(x) for x in r.turns]) for r in g] for g in groups]


def _from_wire(group: WireGroup) -> Group:
    return [Rollout(Trajectory.model_validate_json(t), [Turn(**x) for x in turns]) for t, turns in group]


class RayBackend:
    """A pool of ``RolloutWorker`` actors: a ``RolloutBackend``."""

    def __init__(
        self,
        model: ModelConfig,
        generation: GenerationConfig,
        env: EnvConfig,
        *,
        address: str | None = None,
        workers: int = 2,
    ):
        import ray

        if not ray.is_initialized():
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
            self._owns_ray = True
        else:
            self._owns_ray = False
        g = generation
        gen = {
            "temperature": g.temperature,
            "top_p": g.top_p,
            "max_new_tokens": g.max_new_tokens,
            "dtype": model.dtype,
            "max_batch": g.max_batch,
            "response_prefix": g.response_prefix,
        }
        actor = ray.remote(num_cpus=1)(RolloutWorker)
        self.workers: list[Any] = [
            actor.remote(model.name, gen, env.id, env.kwargs, model.threads or 1) for _ in range(workers)
        ]

    def push_weights(self, model: Any) -> None:
        import ray

        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        ref = ray.put(state)
        ray.get([w.set_weights.remote(ref) for w in self.workers])

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
        """See ``RolloutBackend.collect``; actors generate in the configured dtype (``full_precision`` is ignored)."""
        n = len(self.workers)
        jobs = []
        for w, worker in enumerate(self.workers):
            idx = list(range(w, len(tasks), n))
            if idx:
                ref = worker.rollout.remote(
                    [tasks[i].model_dump(mode="json") for i in idx],
                    [seeds[i] for i in idx],
                    group_size,
                    anchor_greedy,
                    temperature,
                    None if hints is None else [hints[i] for i in idx],
                )
                jobs.append((idx, ref))
        results = await asyncio.gather(*(asyncio.wrap_future(ref.future()) for _, ref in jobs))
        groups: list[Group] = [[] for _ in tasks]
        for (idx, _), result in zip(jobs, results, strict=True):
            for i, group in zip(idx, result, strict=True):
                groups[i] = _from_wire(group)
        return groups

    def close(self) -> None:
        import ray

        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._owns_ray:
            ray.shutdown()
