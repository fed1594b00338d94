"""Rollouts: run agents in envs and collect ``Trajectory`` records.

``rollout`` plays one episode; ``rollout_group`` plays one task ``n`` times (a GRPO group); ``rollout_many``
plays many tasks concurrently with a progress bar, streams finished trajectories to a ``TrajectoryStore`` and
skips tasks the store already holds (resume). A failing agent (an endpoint down after its retries) does not
lose finished work: the failure is reported and the run stops launching new episodes after
``max_consecutive_failures`` failures in a row.
"""

from __future__ import annotations

import asyncio
import platform
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np

from rubricgym.core.agent import Agent
from rubricgym.core.env import RubricEnv
from rubricgym.core.progress import Tracker
from rubricgym.core.progress import progress as progress_display
from rubricgym.core.registry import make, spec
from rubricgym.core.store import TrajectoryStore
from rubricgym.core.types import Task, Trajectory

EnvFactory = Callable[[], RubricEnv]
_VERSIONED = ("rubricgym", "gymnasium", "pydantic", "torch", "transformers", "vllm")


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages that shape a trajectory (only those already imported)."""
    out = {"python": platform.python_version()}
    for name in _VERSIONED:
        if name in sys.modules or name == "rubricgym":
            try:
                out[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                continue
    return out


def episode_seed(seed: int, task_index: int, member: int = 0) -> int:
    """The seed of episode ``member`` of task ``task_index`` in a run seeded ``seed`` (a 32-bit hash of the three).

    Hashing, not ``seed + i*group_size + g``, so runs with different seeds share no episode seeds.
    """
    state = np.random.SeedSequence([seed % 2**63, task_index, member]).generate_state(1, np.uint32)
    return int(state[0])


def _env_factory(env: str | EnvFactory, env_kwargs: dict | None) -> EnvFactory:
    if isinstance(env, str):
        spec(env)  # fail now, with close matches, not inside a worker
        return lambda: make(env, **(env_kwargs or {}))
    return env


async def rollout(
    env: RubricEnv, agent: Agent, task: Task, *, seed: int | None = None, group_id: str | None = None
) -> Trajectory:
    """Play one episode of ``task`` with ``agent`` in ``env`` and return its trajectory."""
    started, t0 = time.time(), time.perf_counter()
    episode_agent = agent.episode(task, seed) if hasattr(agent, "episode") else agent
    obs = env.reset_typed(seed=seed, task=task)
    history = list(obs.messages)
    while True:
        output = await episode_agent.act(list(history), obs.tools)
        obs = await env.astep_typed(output)
        history = env.messages
        if obs.done or obs.truncated:
            break
    return env.trajectory(
        agent=getattr(agent, "name", type(agent).__name__),
        model=getattr(agent, "model", None),
        seed=seed,
        group_id=group_id,
        versions=package_versions(),
        created_at=started,
        duration_s=time.perf_counter() - t0,
    )


async def rollout_fresh(
    factory: EnvFactory, agent: Agent, task: Task, *, seed: int | None = None, group_id: str | None = None
) -> Trajectory:
    """``rollout`` in a new env from ``factory``, closed afterwards (its sandbox, browser page or connection is
    released as soon as the episode ends, also when it fails)."""
    env = factory()
    try:
        return await rollout(env, agent, task, seed=seed, group_id=group_id)
    finally:
        try:
            await env.aclose()
        except Exception as e:  # noqa: BLE001  (a failed release must not cost the episode: say it, keep going)
            warnings.warn(
                f"could not close {type(env).__name__} after an episode: {type(e).__name__}: {e}", stacklevel=2
            )


async def rollout_group(
    env: str | EnvFactory, agent: Agent, task: Task, n: int, *, seed: int = 0, env_kwargs: dict | None = None
) -> list[Trajectory]:
    """``n`` independent episodes of one task (seeds ``seed .. seed+n-1``) sharing a ``group_id``."""
    factory = _env_factory(env, env_kwargs)
    group_id = uuid.uuid4().hex
    return list(
        await asyncio.gather(*(rollout_fresh(factory, agent, task, seed=seed + i, group_id=group_id) for i in range(n)))
    )


@dataclass
class RolloutReport:
    """What ``rollout_many`` did: new trajectories, tasks skipped on resume, and failures."""

    trajectories: list[Trajectory] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    aborted: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures


async def rollout_many(
    env: str | EnvFactory,
    agent: Agent,
    tasks: Sequence[Task],
    *,
    group_size: int = 1,
    concurrency: int = 4,
    store: TrajectoryStore | None = None,
    resume: bool = True,
    seed: int = 0,
    env_kwargs: dict | None = None,
    progress: bool = True,
    max_consecutive_failures: int = 3,
    description: str = "rollouts",
) -> RolloutReport:
    """Roll out every task (``group_size`` times each) with at most ``concurrency`` episodes in flight.

    Episode ``g`` of task ``i`` is seeded ``episode_seed(seed, i, g)``.
    """
    if concurrency < 1 or group_size < 1:
        raise ValueError(f"concurrency and group_size must be >= 1, got {concurrency} and {group_size}")
    factory = _env_factory(env, env_kwargs)
    report = RolloutReport()
    done_ids = store.finished_task_ids() if (store is not None and resume) else set()
    todo = []
    for i, task in enumerate(tasks):
        if task.id in done_ids:
            report.skipped.append(task.id)
        else:
            todo.append((i, task))
    semaphore = asyncio.Semaphore(concurrency)
    consecutive = 0
    stop = asyncio.Event()

    async def one(i: int, task: Task, bar: Tracker) -> None:
        nonlocal consecutive
        async with semaphore:
            if stop.is_set():
                return
            try:
                group_id = uuid.uuid4().hex if group_size > 1 else None
                trajs = await asyncio.gather(
                    *(
                        rollout_fresh(factory, agent, task, seed=episode_seed(seed, i, g), group_id=group_id)
                        for g in range(group_size)
                    )
                )
            except Exception as e:  # the agent or env failed: keep going, keep what finished
                report.failures.append((task.id, f"{type(e).__name__}: {e}"))
                consecutive += 1
                if consecutive >= max_consecutive_failures:
                    stop.set()
                    report.aborted = True
                bar.advance(status=f"{len(report.failures)} failed")
                return
            consecutive = 0
            if store is not None:
                try:
                    store.extend(list(trajs))
                except Exception as e:  # noqa: BLE001  (one unstorable group is a recorded failure, not the run's end)
                    report.failures.append((task.id, f"could not store the trajectories: {type(e).__name__}: {e}"))
                    bar.advance(status=f"{len(report.failures)} failed")
                    return
            report.trajectories.extend(trajs)
            mean = sum(t.outcome.reward for t in report.trajectories) / len(report.trajectories)
            bar.advance(status=f"mean env reward {mean:.3f}")

    unit = "tasks" if group_size == 1 else f"groups of {group_size}"
    with progress_display(None, description, total=len(todo), enabled=progress, unit=unit, min_interval_s=2) as bar:
        await asyncio.gather(*(one(i, task, bar) for i, task in todo))
    return report
