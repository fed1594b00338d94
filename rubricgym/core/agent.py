"""The agent protocol every policy implements: scripted oracles, API clients and local models alike."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rubricgym.core.types import Message, Task, ToolSpec


@runtime_checkable
class Agent(Protocol):
    """A policy: given the chat so far and the tools, returns its next output.

    The output is model text (tool calls inside it are parsed by the env) or a ``Message`` carrying structured
    tool calls, as an OpenAI-compatible API returns them.
    """

    name: str
    model: str | None

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message: ...

    def episode(self, task: Task, seed: int | None) -> Agent:
        """An agent for one episode of ``task``: stateful agents return a fresh copy, stateless ones ``self``."""
        ...


class BaseAgent(ABC):
    """Convenience base: a stateless agent whose ``episode`` returns itself."""

    name: str = "agent"
    model: str | None = None

    @abstractmethod
    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        """The next output for this chat."""

    def episode(self, task: Task, seed: int | None) -> Agent:
        return self

    async def aclose(self) -> None:  # noqa: B027 - optional hook, deliberately a no-op by default
        """Release connections or models; the default holds none."""


class SeededAgent(BaseAgent):
    """A scripted agent that draws from ``self.rng``; each episode gets a fresh copy seeded with the episode seed."""

    def __init__(self, seed: int | None = None):
        self.seed = seed
        self.rng = np.random.default_rng(seed)

    def episode(self, task: Task, seed: int | None) -> Agent:
        return type(self)(seed if seed is not None else self.seed)


class ReplayingAgent(SeededAgent):
    """A scripted agent whose next action is a function of its seed and the messages alone, never of the task: a
    teacher's (``DESIGN.md``). Handed a history it did not play itself (an episode taken over mid-way, a test that
    replays a prefix), it first replays its own decisions on that history, so the same messages give the same
    action. A subclass sets up its episode state in ``_restart`` (with ``self.acted = 0``) and decides one action
    in ``_decide`` (counting it in ``self.acted``)."""

    acted: int

    def __init__(self, seed: int | None = None):
        super().__init__(seed)
        self._restart()

    @abstractmethod
    def _restart(self) -> None:
        """Set up the episode's state from the seed alone (``self.acted = 0``)."""

    @abstractmethod
    def _decide(self, messages: list[Message]) -> str:
        """One action for ``messages``, counted in ``self.acted``."""

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        return self.decide(messages)

    def decide(self, messages: list[Message]) -> str:
        """The next action for ``messages`` (a history this instance did not play is replayed first)."""
        if sum(1 for m in messages if m.role == "assistant") != self.acted:
            self._restart()
            for k, m in enumerate(messages):
                if m.role == "assistant":
                    self._decide(messages[:k])
        return self._decide(messages)


class TaskAgent(BaseAgent):
    """A scripted agent that reads the episode's task (an oracle plays from its hidden record): ``episode`` makes a
    fresh one holding the task, and ``episode_task`` refuses to act without one."""

    def __init__(self, seed: int | None = None, task: Task | None = None):
        self.seed, self.task = seed, task

    def episode(self, task: Task, seed: int | None) -> Agent:
        return type(self)(seed, task)

    def episode_task(self) -> Task:
        if self.task is None:
            raise RuntimeError(f"the {self.name} agent needs the task: use agent.episode(task, seed) (rollout does)")
        return self.task


def tool_call(name: str, **arguments: Any) -> str:
    """A tool call as model text (``<tool_call>{"name": ..., "arguments": ...}</tool_call>``), as scripted agents
    write them."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "</tool_call>"


def last_observation(messages: list[Message]) -> str:
    """The most recent observation text (a tool reply, or the task prompt at the start)."""
    return next((m.content or "" for m in reversed(messages) if m.role in ("user", "tool")), "")


class AgentError(RuntimeError):
    """An agent could not produce an output (endpoint down after retries, model failed to load...)."""
