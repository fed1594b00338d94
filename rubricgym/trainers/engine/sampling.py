"""Where rollouts are played: ``play_groups`` plays one group of ``group_size`` episodes per task with any
``Recorder`` (the local policy, an agent over a vLLM server): an agent whose episodes record a ``Turn`` per
generation. A ``RolloutBackend`` (local, Ray, vLLM: ``trainers/engine/backends.py``) returns groups of ``Rollout``
and follows the learner's weights.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rubricgym.agents.local import Turn
from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import make, spec
from rubricgym.core.rollout import EnvFactory, rollout_fresh
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.trainers.algo.rollouts import Group, Rollout

EnvOf = Callable[[Task], tuple[str, dict[str, Any]]]
"""The env id and keyword arguments a task is played in (one env for a run, an entry's env for a suite)."""


class Episode(Protocol):
    """An agent for one episode that appends a ``Turn`` to ``turns`` for every output."""

    turns: list[Turn]

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str: ...


class Recorder(Protocol):
    """A policy whose episodes record their turns; ``temperature`` overrides its sampling temperature."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str | None: ...

    def recording(self, task: Task, seed: int, temperature: float | None) -> Episode: ...

    def render(self, messages: list[Message]) -> list[int]:
        """The prompt token ids an episode generates from for ``messages``."""
        ...


class RolloutBackend(Protocol):
    """Where rollouts are generated: groups of ``Rollout`` for tasks, the learner's weights after each update."""

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
        """One group per task; group j uses seeds ``seeds[j] ..``; with ``anchor_greedy`` its first is greedy.
        ``full_precision`` asks for generation without bf16 autocast (where the backend has the choice);
        ``hints[j]`` (if given) is shown in group j's task prompt (``with_hint``), each turn recording the prompt
        without it as ``Turn.plain_prompt_ids``."""
        ...

    def push_weights(self, model: Any) -> None: ...

    def close(self) -> None: ...


@dataclass
class ToolLimits:
    """Limits on the env side of a run's rollouts (``env.tool_timeout_s``, ``env.max_concurrent_tools``): each
    ``async def`` tool call (a sandbox command, a browser action, a judge) is cancelled after ``timeout_s`` with a
    timeout error the agent sees, and at most ``max_concurrent`` such calls run at once across every episode the
    backend plays, however many episodes generate together."""

    timeout_s: float | None = None
    max_concurrent: int | None = None

    def __post_init__(self) -> None:
        self.limiter = asyncio.Semaphore(self.max_concurrent) if self.max_concurrent else None

    def apply(self, env: RubricEnv) -> RubricEnv:
        env.tool_timeout_s, env.tool_limiter = self.timeout_s, self.limiter
        return env


def fixed_env(env_id: str, env_kwargs: dict[str, Any]) -> EnvOf:
    """Every task in the same env."""
    return lambda task: (env_id, env_kwargs)


HINT_HEADER = "Hint: "


def with_hint(messages: list[Message], hint: str) -> list[Message]:
    """``messages`` with ``hint`` appended to the first user message (the task), as a paragraph of its own."""
    out = list(messages)
    for i, m in enumerate(out):
        if m.role == "user":
            out[i] = m.model_copy(update={"content": f"{m.content or ''}\n\n{HINT_HEADER}{hint}"})
            return out
    at = 1 if out and out[0].role == "system" else 0
    return [*out[:at], Message(role="user", content=HINT_HEADER + hint), *out[at:]]


@dataclass
class _Played:
    """One recorded episode as an agent ``core.rollout.rollout`` can play (its ``episode`` is itself); with a
    ``hint``, the agent sees it in the task and each turn records the prompt it would have had without it."""

    episode_agent: Episode
    name: str
    model: str | None
    recorder: Recorder
    hint: str | None = None

    def episode(self, task: Task, seed: int | None) -> _Played:
        return self

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        if self.hint is None:
            return await self.episode_agent.act(messages, tools)
        text = await self.episode_agent.act(with_hint(messages, self.hint), tools)
        self.episode_agent.turns[-1].plain_prompt_ids = self.recorder.render(messages)
        return text


async def play_group(
    agent: Recorder,
    env: EnvFactory,
    task: Task,
    n: int,
    seed: int,
    temperatures: Sequence[float | None],
    hint: str | None = None,
) -> Group:
    """``n`` episodes of ``task`` (seeds ``seed .. seed+n-1``, temperature ``temperatures[i]``) sharing a group id;
    ``hint`` is shown in the task of every one of them."""
    group_id = uuid.uuid4().hex

    async def one(i: int) -> Rollout:
        ep = agent.recording(task, seed + i, temperatures[i])
        played = _Played(ep, agent.name, agent.model, agent, hint)
        traj = await rollout_fresh(env, played, task, seed=seed + i, group_id=group_id)  # closes the env after
        return Rollout(traj, ep.turns)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def play_groups(
    agent: Recorder,
    env_of: EnvOf,
    tasks: Sequence[Task],
    seeds: Sequence[int],
    group_size: int,
    *,
    anchor_greedy: bool = False,
    temperature: float | None = None,
    hints: Sequence[str | None] | None = None,
    limits: ToolLimits | None = None,
) -> list[Group]:
    """One group per task, all in flight together (a local policy batches them); see ``RolloutBackend.collect``.
    ``limits`` apply to every env played."""
    if hints is not None and len(hints) != len(tasks):
        raise ValueError(f"{len(hints)} hints for {len(tasks)} tasks: give one (or None) per task")
    temps = [0.0 if anchor_greedy and i == 0 else temperature for i in range(group_size)]

    def factory(task: Task) -> EnvFactory:
        env_id, kwargs = env_of(task)
        spec(env_id)  # fail now, with close matches, not inside an episode
        if limits is None:
            return lambda: make(env_id, **kwargs)
        return lambda: limits.apply(make(env_id, **kwargs))

    return list(
        await asyncio.gather(
            *(
                play_group(agent, factory(task), task, group_size, s, temps, hints[j] if hints else None)
                for j, (task, s) in enumerate(zip(tasks, seeds, strict=True))
            )
        )
    )
