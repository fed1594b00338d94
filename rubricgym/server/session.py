"""One served env instance: a ``Session`` turns protocol requests into env calls and env results into wire dicts.

A fast env (the toy envs: microseconds a step) is stepped inline on the event loop, which is what makes the
round trip cheap. The session keeps a moving average of its calls' wall time: once it passes ``SLOW_CALL_S`` (an
env that blocks: a sandbox, a subprocess) its blocking calls run in a worker thread so it never stalls the other
sessions, and they come back inline when the average drops under ``FAST_CALL_S``. The average makes one scheduler
hiccup on a busy machine harmless, while one long blocking call flips the session at once. Envs whose tools do I/O
override ``astep_typed`` and are awaited directly.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import ValidationError

from rubricgym.core.env import RubricEnv
from rubricgym.core.types import Observation, ToolSpec
from rubricgym.server.protocol import ErrorCode, ProtocolError, ResetData, TasksData, WireAction

SLOW_CALL_S = 0.005
FAST_CALL_S = 0.001
T = TypeVar("T")


class Session:
    """A session's env and its episode bookkeeping (one per WebSocket connection or HTTP session id)."""

    def __init__(self, env: RubricEnv, kind: str = "ws"):
        self.id = uuid.uuid4().hex
        self.env = env
        self.kind = kind
        self.last_active = time.monotonic()
        self.busy = False
        self.closed = False
        self.started = False
        self.done = False
        self.lock = asyncio.Lock()
        self.on_reap: Callable[..., Awaitable[None]] | None = None  # (code: ErrorCode = IDLE_TIMEOUT)
        self._slow = False
        self._avg_s = 0.0
        self._async_step = type(env).astep_typed is not RubricEnv.astep_typed
        self._tools: list[ToolSpec] | None = None
        self._tools_wire: list[dict[str, Any]] = []
        self._episode: dict[str, Any] = {}

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        t0 = time.perf_counter()
        out = await asyncio.to_thread(fn, *args, **kwargs) if self._slow else fn(*args, **kwargs)
        self._avg_s = 0.8 * self._avg_s + 0.2 * (time.perf_counter() - t0)
        self._slow = self._avg_s > (FAST_CALL_S if self._slow else SLOW_CALL_S)
        return out

    def _tools_of(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        if tools is not self._tools:  # envs with a constant tool list pay for the dump once
            self._tools, self._tools_wire = tools, [t.model_dump() for t in tools]
        return self._tools_wire

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {**self._episode, **extra}

    async def reset(self, data: Any) -> dict[str, Any]:
        """Start an episode; ``data`` is the ``reset`` payload (seed, task or options.task)."""
        try:
            req = ResetData.model_validate(data or {})
            obs = await self._run(self.env.reset_typed, seed=req.seed, task=req.the_task())
        except (ValidationError, ValueError, TypeError) as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"reset: {_short(e)}") from None
        self.started, self.done = True, False
        state = self.env.state()
        self._episode = {"task_id": state.task_id, "episode_id": state.episode_id}
        wire = self._observation(obs, list(obs.messages), self._info(step=0, stage=obs.stage))
        return {"observation": wire, "reward": None, "done": False}

    async def step(self, data: Any) -> dict[str, Any]:
        """Apply one action; ``data`` is a ``WireAction`` dict (``{"text": ...}`` or ``{"tool_call": ...}``)."""
        if not self.started:
            raise ProtocolError(ErrorCode.NOT_RESET, "no episode yet: send reset before step")
        if self.done:
            raise ProtocolError(ErrorCode.EPISODE_OVER, "the episode is over (done): send reset to start another")
        try:
            action = WireAction.model_validate(data).to_action()
        except ValidationError as e:
            raise ProtocolError(
                ErrorCode.VALIDATION_ERROR, f'step: {_short(e)}; send {{"text": "..."}} or {{"tool_call": {{...}}}}'
            ) from None
        env = self.env
        obs = await env.astep_typed(action) if self._async_step else await self._run(env.step_typed, action)
        self.done = obs.done or obs.truncated
        step = env.steps[-1]
        info = self._info(
            step=step.index + 1,
            stage=step.stage,
            parse_error=step.action.parse_error,
            tool_error=step.tool_error,
            details=env.public_details(step.info),
        )
        return {"observation": self._observation(obs, env.messages[-2:], info), "reward": obs.reward, "done": self.done}

    def _observation(self, obs: Observation, messages: list[Any], info: dict[str, Any]) -> dict[str, Any]:
        return {
            "text": obs.text,
            "messages": [m.model_dump(exclude_none=True) for m in messages],
            "tools": self._tools_of(obs.tools),
            "stage": obs.stage,
            "truncated": obs.truncated,
            "info": info,
        }

    def state(self) -> dict[str, Any]:
        return self.env.state().model_dump(mode="json")

    def trajectory(self) -> dict[str, Any]:
        """The episode record so far (task, messages, steps, outcome), for scoring on the client side."""
        if not self.started:
            raise ProtocolError(ErrorCode.NOT_RESET, "no episode yet: send reset first")
        return self.env.trajectory().model_dump(mode="json")

    async def tasks(self, data: Any) -> list[dict[str, Any]]:
        try:
            req = TasksData.model_validate(data or {})
        except ValidationError as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"tasks: {_short(e)}") from None
        tasks = await self._run(self.env.task_set, req.n, seed=req.seed, split=req.split)
        return [t.model_dump(mode="json") for t in tasks]

    async def close(self) -> None:
        """Close the env (sandboxes, browsers) once; safe to call from any path that ends the session."""
        if self.closed:
            return
        self.closed = True
        await asyncio.to_thread(self.env.close)


def _short(e: Exception) -> str:
    if isinstance(e, ValidationError):
        return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'data'}: {err['msg']}" for err in e.errors()[:5])
    return str(e)
