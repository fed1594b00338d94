"""One served env instance: a ``Session`` turns protocol requests into env calls and env results into wire dicts.

Every env call (reset, step, state, the record, task sets) goes through the session's runner (``worker``): a
worker thread of the server, or a process of its own, so one slow episode (a large generated world, a sandbox
starting) never delays another session or ``/health``. The one exception is a step or reset the session has
shown to be short (``inline``): it runs on the event loop, where the hop to a thread would cost more than the
call. The server's executor has a thread per session, so sessions never queue behind each other; a session's own
calls are serialised (one message at a time). What a client may send and receive is ``policy``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from rubricgym.core.env import RubricEnv
from rubricgym.core.types import Message, Observation, Task, ToolSpec
from rubricgym.server.policy import IssuedTasks, public_task
from rubricgym.server.protocol import ErrorCode, ProtocolError, ResetData, TasksData, WireAction
from rubricgym.server.worker import ProcessRunner, ThreadRunner, off_loop

T = TypeVar("T")
_MESSAGES = TypeAdapter(list[Message])  # one serializer call for a turn's messages, not one model_dump each


@dataclass
class SessionPolicy:
    """What the server lets every session do: see ``ServerConfig`` for each field's meaning."""

    executor: Executor | None = None
    trusted: bool = False
    accept_client_tasks: bool = False
    max_tasks: int = 1000
    issued: IssuedTasks = field(default_factory=lambda: IssuedTasks(10_000))
    find_task: Callable[[str], Awaitable[Task | None]] | None = None
    """Asks the server's other workers for a task they handed out (``--workers``; see ``peers``)."""
    numbered_task: Callable[[str, int], Awaitable[Task]] | None = None
    """Task ``index`` of ``split`` in the server's task source (OpenEnv's Task API; see ``tasks``)."""
    task_builds: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    """One ``tasks`` reply built at a time: task sets are built in Python on the server's threads, and several at
    once took the interpreter lock from the event loop (4 x 1000 deep-search tasks held ``/health`` up to 1.4-2 s
    on a loaded 2-core machine; one at a time, 0.4-0.5 s)."""

    async def issued_task(self, task_id: str, client: str = "") -> Task | None:
        """A task this server handed out: this worker's memory first, then its peers' (kept here, as ``client``'s,
        once found and while there is room)."""
        task = self.issued.get(task_id)
        if task is None and self.find_task is not None:
            task = await self.find_task(task_id)
            if task is not None:
                with contextlib.suppress(ProtocolError):  # no room: played all the same, not remembered here
                    self.issued.add([task], client)
        return task


class Session:
    """A session's env and its episode bookkeeping (one per WebSocket connection or HTTP session id)."""

    def __init__(
        self,
        env: RubricEnv | ThreadRunner | ProcessRunner,
        kind: str = "ws",
        policy: SessionPolicy | None = None,
        id_prefix: str = "",
    ):
        self.policy = policy or SessionPolicy()
        self.id = id_prefix + uuid.uuid4().hex  # the prefix names the worker that owns it (``peers``)
        self.runner = env if isinstance(env, ThreadRunner | ProcessRunner) else ThreadRunner(env, self.policy.executor)
        self.kind = kind
        self.last_active = time.monotonic()
        self.busy = False
        self.closed = False
        self.started = False
        self.done = False
        self.lock = asyncio.Lock()
        self.on_reap: Callable[..., Awaitable[None]] | None = None  # (code: ErrorCode = IDLE_TIMEOUT)
        self._tools: list[ToolSpec] | None = None
        self._tools_wire: list[dict[str, Any]] = []
        self._episode: dict[str, Any] = {}

    @property
    def env(self) -> RubricEnv:
        """The env object (thread isolation only: a worker process keeps its env to itself)."""
        if not isinstance(self.runner, ThreadRunner):
            raise AttributeError("this session's env lives in a worker process")
        return self.runner.env

    def _tools_of(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        # envs whose tools do not change pay for the dump once (a fresh list of the same specs compares by identity)
        if self._tools is None or tools != self._tools:
            self._tools, self._tools_wire = tools, [t.model_dump() for t in tools]
        return self._tools_wire

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {**self._episode, **extra}

    async def reset(self, data: Any) -> dict[str, Any]:
        """Start an episode; ``data`` is the ``reset`` payload (seed, task or options.task)."""
        try:
            req = ResetData.model_validate(data or {})
            task = await self._task_of(req)
            obs, state = await self.runner.call("reset", req.seed, task)
        except (ValidationError, ValueError, TypeError) as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"reset: {_short(e)}") from None
        self.started, self.done = True, False
        self._episode = {"task_id": state.task_id, "episode_id": state.episode_id}
        wire = self._observation(obs, list(obs.messages), self._info(step=0, stage=obs.stage))
        return {"observation": wire, "reward": None, "done": False}

    async def _task_of(self, req: ResetData) -> Task | None:
        """The task ``req`` chooses: one this server handed out or numbered (``split`` + ``index``), or (if
        accepted) a checked client task."""
        if req.split is not None or req.index is not None:
            if req.split is None or req.index is None:
                raise ProtocolError(
                    ErrorCode.VALIDATION_ERROR,
                    "reset: split and index go together (task `index` of `split`, as GET /{env}/tasks lists them)",
                )
            if self.policy.numbered_task is None:
                raise ProtocolError(ErrorCode.UNKNOWN_TASK, "reset: this server has no numbered task source")
            return await self.policy.numbered_task(req.split, req.index)
        if req.task_id is not None:
            issued = await self.policy.issued_task(req.task_id, self.id)
            if issued is None:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_TASK,
                    f"reset: no task {req.task_id[:80]!r} was handed out by this server; ask for tasks first",
                )
            return issued
        data = req.the_task()
        if data is None:
            return None
        if not isinstance(data, dict):
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, "reset: a task is a JSON object")
        if isinstance(data.get("id"), str):
            # another worker may have handed it out: now known here too
            await self.policy.issued_task(data["id"], self.id)
        issued = self.policy.issued.match(data)
        if issued is not None:
            return issued
        if not self.policy.accept_client_tasks:
            raise ProtocolError(
                ErrorCode.TASK_REFUSED,
                "reset: this server plays only its own tasks; choose one by seed, or by task_id from a tasks reply "
                "(the server's operator may allow client tasks with --accept-client-tasks)",
            )
        task: Task = await self.runner.call("check_task", data)
        return task

    async def step(self, data: Any) -> dict[str, Any]:
        """Apply one action; ``data`` is a ``WireAction`` dict: ``{"text": ...}``, or ``{"text": "", "tool_call": ...}``
        for a structured call."""
        if not self.started:
            raise ProtocolError(ErrorCode.NOT_RESET, "no episode yet: send reset before step")
        if self.done:
            raise ProtocolError(ErrorCode.EPISODE_OVER, "the episode is over (done): send reset to start another")
        try:  # the common action, plain text, is taken as is: what validating it would give
            fast = type(data) is dict and len(data) == 1 and type(data.get("text")) is str
            action = data["text"] if fast else WireAction.model_validate(data).to_action()
        except ValidationError as e:
            raise ProtocolError(
                ErrorCode.VALIDATION_ERROR,
                f'step: {_short(e)}; send {{"text": "..."}} or '
                '{"text": "", "tool_call": {"name": ..., "arguments": {...}}}',
            ) from None
        obs, info, messages = await self.runner.call("step", action)  # info: public keys only (worker._stepped)
        self.done = obs.done or obs.truncated
        info = self._info(**info)
        return {"observation": self._observation(obs, messages, info), "reward": obs.reward, "done": self.done}

    def _observation(self, obs: Observation, messages: list[Any], info: dict[str, Any]) -> dict[str, Any]:
        return {
            "text": obs.text,
            "messages": _MESSAGES.dump_python(messages, exclude_none=True),
            "tools": self._tools_of(obs.tools),
            "stage": obs.stage,
            "truncated": obs.truncated,
            "info": info,
        }

    async def state(self) -> dict[str, Any]:
        state = await self.runner.call("state")
        return state.model_dump(mode="json")

    async def trajectory(self) -> dict[str, Any]:
        """The episode record so far (task, messages, steps, outcome); hidden data only to a trusted client."""
        if not self.started:
            raise ProtocolError(ErrorCode.NOT_RESET, "no episode yet: send reset first")
        record: dict[str, Any] = await self.runner.call("trajectory", self.policy.trusted)
        return record

    async def tasks(self, data: Any) -> list[dict[str, Any]]:
        """``env.task_set`` (at most ``max_tasks``); each becomes one a client may name in ``reset``."""
        try:
            req = TasksData.model_validate(data or {})
        except ValidationError as e:
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"tasks: {_short(e)}") from None
        cap = self.policy.max_tasks
        if req.n > cap:
            raise ProtocolError(
                ErrorCode.LIMIT_EXCEEDED,
                f"tasks: n={req.n} is over this server's cap of {cap} per request; ask for at most {cap}",
                max_tasks=cap,
            )
        async with self.policy.task_builds:
            tasks = await self.runner.call("tasks", req.n, req.seed, req.split)
            self.policy.issued.add(tasks, self.id)  # LIMIT_EXCEEDED when it would evict another session's tasks
            trusted = self.policy.trusted
            return await off_loop(self.policy.executor, lambda: [public_task(t, trusted) for t in tasks])

    async def close(self) -> None:
        """Close the env (sandboxes, browsers) once; safe to call from any path that ends the session."""
        if self.closed:
            return
        self.closed = True
        self.policy.issued.close(self.id)  # its tasks stay playable until another session needs the room
        await self.runner.close()


def _short(e: Exception) -> str:
    if isinstance(e, ValidationError):
        return "; ".join(f"{'.'.join(map(str, err['loc'])) or 'data'}: {err['msg']}" for err in e.errors()[:5])
    return str(e)
