"""``RemoteEnv``: a served env (``rubricgym serve``) used exactly like a local one.

``rubricgym.make("ws://host:port")`` (or ``RemoteEnv.connect(url)``) gives a ``RubricEnv``: the Gymnasium face
(``reset``/``step``), the typed face (``reset_typed``/``step_typed``/``astep_typed``/``state``), ``messages``,
``task_set`` and ``trajectory``, so ``rollout``, ``rubricgym run``, the trainer and the arena work unchanged. The
server ships the episode record, so the trajectory (and every check and rubric score of it) is the one a local
run of the same task and seed produces. Scripted agents, checks and the default rubric come from the env's
local registration when it is installed here (the default rubric also from the server's metadata).

Every connection lives on one shared I/O thread with its own event loop: the synchronous methods block on it
(they are also callable from inside a running loop, as ``rollout`` does for ``reset_typed``) and ``astep_typed``
awaits it without blocking the caller's loop. The token comes from ``token=`` or ``$RUBRICGYM_TOKEN``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ClassVar, TypeVar

import httpx
import numpy as np
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from rubricgym.core.env import RubricEnv, ToolOutput
from rubricgym.core.registry import EnvSpec
from rubricgym.core.types import (
    Action,
    Message,
    Observation,
    Outcome,
    State,
    Step,
    Task,
    ToolCall,
    ToolSpec,
    Trajectory,
)

TOKEN_ENV = "RUBRICGYM_TOKEN"
T = TypeVar("T")


class RemoteError(RuntimeError):
    """The server refused a request (``code`` is the protocol's error code) or the connection failed."""

    def __init__(self, message: str, code: str = "CONNECTION"):
        super().__init__(f"{message} (code: {code})")
        self.code = code


class _IOThread:
    """One daemon thread running the event loop every ``RemoteEnv`` connection lives on (started on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="rubricgym-remote-io", daemon=True).start()
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        loop = self.loop()
        if _running_loop() is loop:
            coro.close()
            raise RuntimeError("a RemoteEnv's blocking call was made from its own I/O thread; await the async API")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop()))

    def fire(self, fn: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Schedule ``fn()`` without waiting (finalizers); skipped when the loop is gone at interpreter exit."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and loop.is_running():
            asyncio.run_coroutine_threadsafe(fn(), loop)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_IO = _IOThread()


class _Connection:
    """A WebSocket session with the server: request/reply with protocol errors raised as ``RemoteError``."""

    def __init__(self, url: str, token: str | None, open_timeout_s: float, reply_timeout_s: float):
        self.url = url.rstrip("/") + "/ws"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.open_timeout_s, self.reply_timeout_s = open_timeout_s, reply_timeout_s
        self.ws: ClientConnection | None = None

    async def request(self, kind: str, data: Any = None) -> Any:
        if self.ws is None:
            try:
                self.ws = await connect(
                    self.url,
                    additional_headers=self.headers,
                    open_timeout=self.open_timeout_s,
                    proxy=None,
                    compression=None,
                    max_size=None,
                )
            except InvalidStatus as e:
                status = e.response.status_code
                hint = ": wrong or missing token (token= or $RUBRICGYM_TOKEN)" if status == 403 else ""
                raise RemoteError(f"{self.url} refused the connection with HTTP {status}{hint}") from None
            except OSError as e:
                raise RemoteError(f"cannot connect to {self.url}: {e}") from None
        message = {"type": kind} if data is None else {"type": kind, "data": data}
        try:
            await self.ws.send(json.dumps(message, ensure_ascii=False))
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), self.reply_timeout_s))
        except ConnectionClosed as e:
            self.ws = None
            raise RemoteError(f"the server closed the session ({e.rcvd.reason if e.rcvd else 'no reason'})") from None
        if reply.get("type") == "error":
            err = reply.get("data") or {}
            if err.get("code") in ("CAPACITY_REACHED", "IDLE_TIMEOUT", "SHUTTING_DOWN"):
                await self.aclose()
            raise RemoteError(str(err.get("message")), str(err.get("code")))
        return reply.get("data")

    async def aclose(self) -> None:
        ws, self.ws = self.ws, None
        if ws is not None:
            with contextlib.suppress(ConnectionClosed):
                await ws.send('{"type":"close"}')
            await ws.close()


def _wire_action(action: Action | str | Message) -> dict[str, Any]:
    if isinstance(action, Action):
        if action.structured and action.tool_call is not None:
            return {"text": action.text, "tool_call": action.tool_call.model_dump(exclude_none=True)}
        return {"text": action.text}
    if isinstance(action, Message):
        if action.tool_calls:
            return {"text": action.content or "", "tool_call": action.tool_calls[0].model_dump(exclude_none=True)}
        return {"text": action.content or ""}
    return {"text": action if isinstance(action, str) else str(action)}


class RemoteEnv(RubricEnv):
    """An env served at ``url``; build one with ``RemoteEnv.connect(url)`` or ``rubricgym.make(url)``."""

    url: ClassVar[str] = ""
    server_metadata: ClassVar[dict[str, Any]] = {}

    def __init__(
        self,
        max_steps: int | None = None,
        render_mode: str | None = None,
        *,
        token: str | None = None,
        open_timeout_s: float = 10.0,
        reply_timeout_s: float = 600.0,
    ):
        if not self.url:
            raise TypeError("use RemoteEnv.connect(url) or rubricgym.make(url): the class needs a server URL")
        served = int(self.server_metadata["max_steps"])
        if max_steps is not None and max_steps != served:
            raise ValueError(
                f"{self.url} serves {self.env_id} with max_steps={served}; a remote env cannot change it "
                f"(start the server with `rubricgym serve {self.env_id} --max-steps {max_steps}`)"
            )
        super().__init__(max_steps=served, render_mode=render_mode)
        self._conn = _Connection(self.url, token or os.environ.get(TOKEN_ENV), open_timeout_s, reply_timeout_s)
        weakref.finalize(self, _IO.fire, self._conn.aclose)  # rollouts drop their envs without closing them
        self._remote_tools = [ToolSpec.model_validate(t) for t in self.server_metadata.get("tools", [])]
        self._wire_tools: list[dict[str, Any]] | None = None
        self._chat: list[Message] = []
        self._record: Trajectory | None = None
        self._last_info: dict[str, Any] = {}

    @classmethod
    def connect(cls, url: str, token: str | None = None, **kwargs: Any) -> RemoteEnv:
        """A ``RemoteEnv`` of the env served at ``url`` (``ws://`` or ``http://``)."""
        return remote_class(url, token or os.environ.get(TOKEN_ENV))(token=token, **kwargs)

    # ---- what the server decides ---------------------------------------------------------------------------

    def tools(self) -> list[ToolSpec]:
        return self._remote_tools

    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        return self.task_set(1, seed=int(rng.integers(2**31)), split=split)[0]

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        """The server env's ``task_set(n, seed, split)``: the same tasks a local instance generates."""
        data = self._run(self._conn.request("tasks", {"n": n, "seed": seed, "split": split}))
        return [Task.model_validate(t) for t in data]

    def call_tool(self, call: ToolCall) -> ToolOutput:
        raise TypeError("a RemoteEnv's tools run on the server: send the call with step() or step_typed()")

    # ---- Gymnasium face ------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        options = dict(options or {})
        task = options.pop("task", None)
        obs = self._begin_remote(seed, task)
        return obs["text"], obs["info"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs = self._absorb(self._run(self._step(_wire_action(action))))
        return obs.text, obs.reward, obs.done, obs.truncated, self._last_info

    # ---- typed face ----------------------------------------------------------------------------------------

    def reset_typed(self, seed: int | None = None, task: Task | dict[str, Any] | None = None) -> Observation:
        obs = self._begin_remote(seed, task)
        return Observation(messages=list(self._chat), stage=obs["stage"], tools=self._remote_tools)

    def step_typed(self, action: Action | str | Message) -> Observation:
        return self._absorb(self._run(self._step(_wire_action(action))))

    async def astep_typed(self, action: Action | str | Message) -> Observation:
        return self._absorb(await _IO.arun(self._step(_wire_action(action))))

    def state(self) -> State:
        return State.model_validate(self._run(self._conn.request("state")))

    @property
    def messages(self) -> list[Message]:
        return list(self._chat)

    @property
    def steps(self) -> list[Step]:
        return self._trajectory().steps

    @property
    def outcome(self) -> Outcome:
        """How the episode ended (an empty ``Outcome`` while it runs, as for a local env)."""
        return self._record.outcome if self._record is not None else Outcome()

    def trajectory(self, **fields: Any) -> Trajectory:
        """The server's episode record, with ``fields`` (agent, model, seed, versions...) set on a copy."""
        record = self._trajectory()
        return record.model_copy(update=fields, deep=True) if fields else record.model_copy(deep=True)

    def close(self) -> None:
        if self._conn.ws is not None:
            self._run(self._conn.aclose())
        super().close()

    # ---- plumbing ------------------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return _IO.run(coro)

    def _begin_remote(self, seed: int | None, task: Task | dict[str, Any] | None) -> dict[str, Any]:
        payload: dict[str, Any] = {"seed": seed}
        if task is not None:
            payload["task"] = task.model_dump(mode="json") if isinstance(task, Task) else task
        data = self._run(self._reset(payload))
        obs = data["observation"]
        self._chat = [Message.model_validate(m) for m in obs["messages"]]
        self._record = None
        self._take_tools(obs["tools"])
        return obs

    async def _reset(self, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            return await self._conn.request("reset", payload)
        except RemoteError as e:
            if e.code != "CONNECTION":
                raise
            return await self._conn.request("reset", payload)  # the server dropped an idle session: reconnect once

    async def _step(self, action: dict[str, Any]) -> dict[str, Any]:
        data = await self._conn.request("step", action)
        if data["done"]:  # fetch the record now, in the same hop, so trajectory() never blocks a caller's loop
            data["trajectory"] = await self._conn.request("trajectory")
        return data

    def _absorb(self, data: dict[str, Any]) -> Observation:
        """Record a step's reply (chat, tools, record) and return it as the local env's ``Observation``."""
        obs = data["observation"]
        self._last_info = obs["info"]
        new = [Message.model_validate(m) for m in obs["messages"]]
        self._chat += new
        self._take_tools(obs["tools"])
        if "trajectory" in data:
            self._record = Trajectory.model_validate(data["trajectory"])
        truncated = bool(obs["truncated"])
        return Observation(
            messages=new[-1:],
            done=bool(data["done"]) and not truncated,
            truncated=truncated,
            reward=float(data["reward"]),
            stage=obs["stage"],
            tools=self._remote_tools,
        )

    def _take_tools(self, wire: list[dict[str, Any]]) -> None:
        if wire != self._wire_tools:  # keep one list object while the tools do not change
            self._wire_tools, self._remote_tools = wire, [ToolSpec.model_validate(t) for t in wire]

    def _trajectory(self) -> Trajectory:
        if self._record is None:
            if not self._chat:
                raise RuntimeError("no episode: call reset() first")
            return Trajectory.model_validate(self._run(self._conn.request("trajectory")))
        return self._record


@functools.lru_cache(maxsize=64)
def remote_class(url: str, token: str | None = None) -> type[RemoteEnv]:
    """A ``RemoteEnv`` subclass bound to the env served at ``url`` (its id, stages, agents, checks, rubric)."""
    http = url.replace("ws://", "http://", 1).replace("wss://", "https://", 1).rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.get(f"{http}/metadata", headers=headers, timeout=10.0, trust_env=False)
    except httpx.HTTPError as e:
        raise ConnectionError(f"no rubricgym env server at {url}: {e}; start one with `rubricgym serve ENV_ID`") from e
    if r.status_code == 401:
        raise PermissionError(f"{url} needs a bearer token: pass token= or set ${TOKEN_ENV}")
    r.raise_for_status()
    meta = r.json()
    local = _local_class(meta["env_id"])
    attrs: dict[str, Any] = {
        "url": url.rstrip("/"),
        "server_metadata": meta,
        "env_id": meta["env_id"],
        "stages": tuple(meta.get("stages", ())),
        "default_max_steps": int(meta["max_steps"]),
        "__doc__": f"{meta['env_id']} served at {url}.",
        "__module__": __name__,
    }
    if local is not None:
        for name in ("checks", "default_rubric"):
            attrs[name] = classmethod(_delegate(local, name))
        attrs["agents"] = classmethod(_guarded_agents(local, url.rstrip("/"), meta["env_id"]))
    elif meta.get("default_rubric"):
        attrs["default_rubric"] = classmethod(lambda cls: dict(meta["default_rubric"]))
    name = "Remote" + "".join(p.capitalize() for p in meta["env_id"].replace(".", "-").split("-"))
    return type(name, (RemoteEnv,), attrs)


def _delegate(local: type[RubricEnv], name: str) -> Callable[[type], Any]:
    method = getattr(local, name)
    return lambda cls: method()


class HiddenDataMissing(RuntimeError):
    """A scripted agent needed a task's ``hidden`` data, which a server not started with ``--trusted`` withholds."""


def untrusted_hint(url: str, env_id: str, agent: str, others: Sequence[str], cause: BaseException) -> str:
    """What a scripted agent that failed on a task without ``hidden`` data lacks, and how to give it that."""
    instead = f" such as {', '.join(others)}" if others else ""
    return (
        f"the scripted agent {agent!r} reads each task's hidden data (answers, gold), which the server at {url} "
        f"does not send to clients ({type(cause).__name__}: {cause}). Start the server with "
        f"`rubricgym serve {env_id} --trusted` (keep it on loopback: every client then sees the answers), or play "
        f"an agent that acts only on what it observes{instead}."
    )


class _NeedsHidden:
    """A scripted agent of a served env that turns a failure on a task sent without ``hidden`` data into
    ``HiddenDataMissing`` saying how to start the server (not a bare ``KeyError: 'steps'``)."""

    def __init__(self, inner: Any, hint: Callable[[BaseException], str], task: Task | None = None):
        self.inner, self.hint, self.task = inner, hint, task

    def __getattr__(self, name: str) -> Any:  # name, model, aclose and whatever else the agent offers
        return getattr(self.inner, name)

    def episode(self, task: Task, seed: int | None) -> _NeedsHidden:
        inner = self.inner.episode(task, seed) if hasattr(self.inner, "episode") else self.inner
        return _NeedsHidden(inner, self.hint, task)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str | Message:
        try:
            return await self.inner.act(messages, tools)
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            if self.task is None or self.task.hidden:
                raise
            raise HiddenDataMissing(self.hint(e)) from e


def _guarded_agents(local: type[RubricEnv], url: str, env_id: str) -> Callable[[type], Any]:
    def agents(cls: type) -> dict[str, Callable[..., Any]]:
        found = local.agents()

        def guard(name: str, factory: Callable[..., Any]) -> Callable[..., Any]:
            others = [n for n in ("teacher", "random") if n in found and n != name]

            @functools.wraps(factory)
            def make(*args: Any, **kwargs: Any) -> _NeedsHidden:
                return _NeedsHidden(factory(*args, **kwargs), lambda e: untrusted_hint(url, env_id, name, others, e))

            return make

        return {name: guard(name, f) for name, f in found.items()}

    return agents


def _local_class(env_id: str) -> type[RubricEnv] | None:
    from rubricgym.core.registry import spec

    try:
        return spec(env_id).load()
    except (KeyError, ImportError, TypeError):
        return None


def remote_spec(url: str) -> EnvSpec:
    """The registry's spec of a served env: what ``rubricgym.make(url)`` and ``rubricgym run URL`` build."""
    try:
        cls = remote_class(url, os.environ.get(TOKEN_ENV))
    except (ConnectionError, PermissionError, httpx.HTTPStatusError) as e:
        raise KeyError(str(e)) from e  # what the registry raises for an env it cannot find; the CLI prints it
    return EnvSpec(id=url, entry_point=cls, description=f"{cls.env_id} served at {url}")
