"""Rollout backends: where a run's rollouts are generated. Each implements ``sampling.RolloutBackend``
(``collect`` groups of ``Rollout``, ``push_weights`` after an update, ``close``) and gets only what it needs: the
policy or the config pieces of generation, model and env, and ``env_of`` (which env plays a task: the run's one
env, or a suite entry's). None of them knows the trainer. ``make_backend`` is the one place a backend is built
from a run's config.

- ``LocalBackend``: the learner's own ``TrainingPolicy`` in this process (the weights it updates are the ones it
  samples from, so ``push_weights`` has nothing to do);
- ``RayBackend`` (``trainers/engine/ray_backend.py``): a pool of Ray actors, each with its own copy of the policy; under
  torchrun rank 0 holds it for every rank (``RankedPool``, ``trainers/engine/ray_ranks.py``);
- ``VLLMBackend`` (``trainers/engine/vllm_backend.py``): an OpenAI-compatible vLLM server that reloads pushed weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rubricgym.core.types import Task
from rubricgym.trainers.algo.rollouts import Group
from rubricgym.trainers.config import TrainConfig
from rubricgym.trainers.engine.distributed import rank_world
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.proxy_backend import ProxyBackend
from rubricgym.trainers.engine.ray_backend import RayBackend
from rubricgym.trainers.engine.ray_ranks import RankedPool
from rubricgym.trainers.engine.sampling import EnvOf, RolloutBackend, ToolLimits, fixed_env, play_groups
from rubricgym.trainers.engine.vllm_backend import VLLMBackend


class LocalBackend:
    """Rollouts by the in-process policy; ``env_of`` routes each task to its env (a suite's entries)."""

    def __init__(self, policy: TrainingPolicy, env_of: EnvOf, limits: ToolLimits | None = None):
        self.policy, self.env_of, self.limits = policy, env_of, limits

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
        policy = self.policy
        policy.forget_kv()  # this collection's rollouts depend on nothing an earlier one generated
        autocast = policy.bf16_autocast
        policy.bf16_autocast = autocast and not full_precision  # the episode views copy it when created
        try:
            return await play_groups(
                policy,
                self.env_of,
                tasks,
                seeds,
                group_size,
                anchor_greedy=anchor_greedy,
                temperature=temperature,
                hints=hints,
                limits=self.limits,
            )
        finally:
            policy.bf16_autocast = autocast

    @classmethod
    def of(cls, cfg: TrainConfig, policy: TrainingPolicy, env_of: EnvOf) -> LocalBackend:
        """The local backend of a run: ``policy`` playing each task in ``env_of``'s env within the run's limits."""
        return cls(policy, env_of, tool_limits(cfg))

    def push_weights(self, model: Any) -> None:
        """Nothing to do: the policy samples from the model the learner updates in place."""

    def close(self) -> None:
        """Nothing to release: the policy belongs to the trainer."""


def make_backend(cfg: TrainConfig, policy: TrainingPolicy, env_of: EnvOf | None = None) -> RolloutBackend:
    """The backend ``cfg`` asks for: vLLM (``generation.backend``), Ray (``ray``) or the local policy; each task is
    played in ``env_of``'s env (default: ``cfg.env.id`` with its kwargs for every task)."""
    env_of = env_of if env_of is not None else fixed_env(cfg.env.id, cfg.env.kwargs)
    if cfg.generation.agent_program is not None:
        return ProxyBackend(policy, env_of, cfg.generation.agent_program, tool_limits(cfg))
    if cfg.generation.backend == "vllm":
        return VLLMBackend.for_policy(policy, cfg.generation, env_of, tool_limits(cfg))
    if cfg.ray:
        rank, world = rank_world()
        if world > 1:  # a learner of several torchrun ranks: rank 0 holds the pool for all (engine/ray_ranks.py)
            return RankedPool(ray_pool(cfg, env_of) if rank == 0 else None)
        return ray_pool(cfg, env_of)
    return LocalBackend.of(cfg, policy, env_of)


def ray_pool(cfg: TrainConfig, env_of: EnvOf | None = None) -> RayBackend:
    """The Ray pool of rollout actors ``cfg`` asks for (``ray_*``), playing each task in ``env_of``'s env."""
    return RayBackend(
        cfg.model,
        cfg.generation,
        cfg.env,
        env_of=env_of,
        address=cfg.ray_address,
        workers=cfg.ray_workers,
        worker_resources=cfg.ray_worker_resources.given(),
        placement=cfg.ray_placement,
        max_restarts=cfg.ray_max_restarts,
    )


def tool_limits(cfg: TrainConfig) -> ToolLimits | None:
    """The run's ``env.tool_timeout_s`` / ``env.max_concurrent_tools`` (``None`` when neither is set)."""
    e = cfg.env
    if e.tool_timeout_s is None and e.max_concurrent_tools is None:
        return None
    return ToolLimits(e.tool_timeout_s, e.max_concurrent_tools)
