"""A rollout backend whose episodes are played by the user's agent program through the recording proxy
(``proxy/episodes.py`` says how a model call becomes an env step). Set by ``generation.agent_program``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from rubricgym.core.registry import make
from rubricgym.core.rollout import rollout_fresh
from rubricgym.core.types import Task
from rubricgym.proxy.episodes import (
    AgentProgram,
    EpisodeRouter,
    ProgramAgent,
    ProxyEpisode,
    ProxyServer,
    load_agent_program,
)
from rubricgym.proxy.sessions import KEY_PREFIX
from rubricgym.trainers.algo.rollouts import Group, Rollout
from rubricgym.trainers.engine.policy import TrainingPolicy
from rubricgym.trainers.engine.sampling import EnvOf, ToolLimits


class ProxyBackend:
    """A ``RolloutBackend`` whose episodes are played by the user's agent program through the recording proxy
    (see the module docstring); the policy and envs are the run's own."""

    def __init__(
        self, policy: TrainingPolicy, env_of: EnvOf, program: AgentProgram | str, limits: ToolLimits | None = None
    ):
        self.policy, self.env_of, self.limits = policy, env_of, limits
        self.program = load_agent_program(program) if isinstance(program, str) else program
        self.name = getattr(self.program, "__name__", "agent")
        self.model = policy.model or "policy"
        self.router = EpisodeRouter(self.model, policy.params.temperature)
        self.server = ProxyServer(self.router)

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
        if hints is not None and any(h is not None for h in hints):
            raise ValueError("guidance hints cannot be shown to an agent program through the proxy: turn guidance off")
        policy = self.policy
        policy.forget_kv()
        autocast = policy.bf16_autocast
        policy.bf16_autocast = autocast and not full_precision
        temps = [0.0 if anchor_greedy and i == 0 else temperature for i in range(group_size)]

        async def one(task: Task, seed: int, temp: float | None, group_id: str) -> Rollout:
            env_id, env_kwargs = self.env_of(task)
            key = KEY_PREFIX + uuid.uuid4().hex
            ep = ProxyEpisode(self.server.base_url, key, self.model, task.id)
            self.router.episodes[key] = ep
            view = policy.recording(task, seed, temp)
            driven = ProgramAgent(ep, view, self.program, self.name, policy.model)

            def factory() -> Any:
                env = make(env_id, **env_kwargs)
                return self.limits.apply(env) if self.limits is not None else env

            try:
                traj = await rollout_fresh(factory, driven, task, seed=seed, group_id=group_id)
                last = traj.steps[-1].observation.messages if traj.steps else []
                await driven.finish("\n".join(m.content or "" for m in last))
            finally:
                ep.close()
                self.router.episodes.pop(key, None)
                self.router.log.forget(key)
            traj.metrics["proxy_calls"] = float(len(driven.turns))
            return Rollout(traj, driven.turns)

        try:
            episodes = []
            for j, task in enumerate(tasks):
                gid = uuid.uuid4().hex
                episodes += [one(task, seeds[j] + i, temps[i], gid) for i in range(group_size)]
            flat = await asyncio.gather(*episodes)
        finally:
            policy.bf16_autocast = autocast
        return [list(flat[j * group_size : (j + 1) * group_size]) for j in range(len(tasks))]

    def push_weights(self, model: Any) -> None:
        """Nothing to do: the proxy samples from the model the learner updates in place."""

    def close(self) -> None:
        self.server.close()
