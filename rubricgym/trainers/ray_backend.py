"""Rollouts on a pool of Ray actors (``--ray`` for a local Ray, ``--ray-address`` for a cluster).

Each actor holds its own copy of the policy (a ``TrainingPolicy``) and plays whole groups; the learner sends
the new weights after every update (one ``ray.put``, shared by all actors) and gets back trajectories plus the
exact tokens and sampling log-probs behind them. Tasks are dealt to actors round-robin per step, and every
group's seeds are fixed by the trainer, so the result does not depend on which actor played which group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rubricgym.agents.local import Turn
from rubricgym.core.types import Task, Trajectory

if TYPE_CHECKING:
    from rubricgym.trainers.trainer import Trainer


@dataclass
class Recorded:
    """Stands in for an episode view: the turns an actor generated for one (task, seed)."""

    turns: list[Turn]


class RolloutWorker:
    """The actor body (wrapped with ``ray.remote`` at pool creation, so importing this needs no Ray)."""

    def __init__(self, model: str, gen: dict[str, Any], env_id: str, env_kwargs: dict[str, Any], threads: int = 1):
        import torch

        from rubricgym.trainers.policy import TrainingPolicy

        torch.set_num_threads(threads)
        self.policy = TrainingPolicy(model, **gen)
        self.policy.load()
        self.env_id, self.env_kwargs = env_id, env_kwargs

    def set_weights(self, state: dict[str, Any]) -> bool:
        self.policy.model_obj.load_state_dict(state, strict=False)
        return True

    def rollout(
        self,
        tasks: list[dict[str, Any]],
        seeds: list[int],
        group_size: int,
        greedy_anchor: bool,
        temperature: float | None,
    ) -> list[tuple[list[str], list[list[dict[str, Any]]]]]:
        import asyncio
        from dataclasses import asdict, replace

        from rubricgym.trainers.policy import collect_groups

        policy = self.policy
        policy.forget()
        saved = policy.params
        if temperature is not None:
            policy.params = replace(saved, temperature=temperature)
        try:
            groups = asyncio.run(
                collect_groups(
                    self.env_id,
                    policy,
                    [Task.model_validate(t) for t in tasks],
                    group_size,
                    seeds,
                    env_kwargs=self.env_kwargs,
                    anchor_greedy=greedy_anchor,
                )
            )
        finally:
            policy.params = saved
        return [
            ([t.model_dump_json() for t in g], [[asdict(x) for x in policy.turns_for(t)] for t in g]) for g in groups
        ]


class RayBackend:
    """A pool of ``RolloutWorker`` actors; implements the trainer's ``collect``/``push_weights``/``close``."""

    def __init__(self, cfg: Any, *, address: str | None = None, workers: int = 2):
        import ray

        if not ray.is_initialized():
            if address:
                ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
            self._owns_ray = True
        else:
            self._owns_ray = False
        g = cfg.generation
        gen = {
            "temperature": g.temperature,
            "top_p": g.top_p,
            "max_new_tokens": g.max_new_tokens,
            "dtype": cfg.model.dtype,
            "max_batch": g.max_batch,
            "response_prefix": g.response_prefix,
        }
        actor = ray.remote(num_cpus=1)(RolloutWorker)
        self.workers: list[Any] = [
            actor.remote(cfg.model.name, gen, cfg.env.id, cfg.env.kwargs, cfg.model.threads or 1)
            for _ in range(workers)
        ]

    def push_weights(self, model: Any) -> None:
        import ray

        state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
        ref = ray.put(state)
        ray.get([w.set_weights.remote(ref) for w in self.workers])

    async def collect(
        self,
        trainer: Trainer,
        tasks: list[Task],
        seeds: list[int],
        group_size: int,
        greedy_anchor: bool,
        temperature: float | None,
    ) -> list[list[Trajectory]]:
        import asyncio

        n = len(self.workers)
        jobs = []
        for w, worker in enumerate(self.workers):
            idx = list(range(w, len(tasks), n))
            if idx:
                jobs.append(
                    (
                        idx,
                        worker.rollout.remote(
                            [tasks[i].model_dump(mode="json") for i in idx],
                            [seeds[i] for i in idx],
                            group_size,
                            greedy_anchor,
                            temperature,
                        ),
                    )
                )
        results = await asyncio.gather(*(asyncio.wrap_future(ref.future()) for _, ref in jobs))
        groups: list[list[Trajectory]] = [[] for _ in tasks]
        for (idx, _), result in zip(jobs, results, strict=True):
            for i, (trajs, turns) in zip(idx, result, strict=True):
                group = [Trajectory.model_validate_json(t) for t in trajs]
                for traj, tt in zip(group, turns, strict=True):
                    trainer.policy.views[(traj.task.id, traj.seed)] = Recorded([Turn(**x) for x in tt])  # type: ignore[assignment]
                groups[i] = group
        return groups

    def close(self) -> None:
        import ray

        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._owns_ray:
            ray.shutdown()
