"""Episodes played by the user's own agent program (LangGraph, the OpenAI Agents SDK, a plain script with an
OpenAI client), unchanged, through the recording proxy; ``trainers/engine/proxy_backend.py`` makes them a rollout
backend.

For each episode the trainer wants, the backend hands the user's agent function a ``ProxyEpisode``: the
proxy's ``base_url``, an ``api_key`` that names the episode's session, the model name, the task's prompt and the
env's tools as OpenAI function specs and as Python callables. The agent calls the model through the proxy and the
tools through ``episode.call_tool`` (or the callables) however its framework does. Underneath, the env episode is
played by the trainer's ordinary rollout loop: each model call is one turn of the policy (its exact prompt and
completion token ids and log-probs recorded, as the local sampler records them), the completion is the env's
action, and the env's observation is what the agent's tool call returns. So every turn is one env step, the
trajectory is the env's (its rubric scores it, its verdict says solved), and the trainer trains on exactly the
tokens that were generated: no re-tokenisation.

Rules the agent sees: one tool call per model turn (a second call in the same turn returns an error text); a
model turn without a tool call is played to the env as it is (a malformed action, or an answer for envs that take
text); once the env's episode is over, further model calls get the reply ``EPISODE_OVER`` and are not trained on;
an agent that returns before the episode is over ends it with ``AGENT_STOPPED`` actions until the env's step limit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import inspect
import socket
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rubricgym.agents.local import Turn
from rubricgym.core.types import Message, Task, ToolSpec
from rubricgym.proxy.app import Generator, create_app
from rubricgym.proxy.sessions import Session, SessionLog
from rubricgym.proxy.wire import WireError, reply_message

EPISODE_OVER = "The episode is over."
AGENT_STOPPED = "(the agent stopped before the episode was over)"
TOOL_WAIT_S = 900.0
"""How long a tool call waits for the env's observation before it gives up with an error text."""

AgentProgram = Callable[["ProxyEpisode"], Any]


def load_agent_program(ref: str) -> AgentProgram:
    """The agent function ``module:function`` names (a sync or ``async def`` taking a ``ProxyEpisode``)."""
    module, _, name = ref.partition(":")
    if not module or not name:
        raise ValueError(f"agent program {ref!r}: expected 'module:function', e.g. 'my_agents:react'")
    try:
        fn = getattr(importlib.import_module(module), name)
    except ImportError as e:
        raise ValueError(f"agent program {ref!r}: cannot import {module!r} ({e}); is it on PYTHONPATH?") from None
    except AttributeError:
        raise ValueError(f"agent program {ref!r}: module {module!r} has no {name!r}") from None
    if not callable(fn):
        raise ValueError(f"agent program {ref!r} is not callable")
    return fn


def _observation(messages: list[Message]) -> str:
    """What the env showed after the last assistant turn (the tool's output), as text."""
    last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
    return "\n".join(m.content or "" for m in messages[last + 1 :])


@dataclass
class _Request:
    messages: list[Message]
    tools: list[ToolSpec]
    reply: concurrent.futures.Future[Turn]


@dataclass
class ProxyEpisode:
    """One episode as the user's agent sees it. ``base_url``/``api_key``/``model`` configure any OpenAI client;
    ``prompt`` is the task; ``tools`` the env's tools as OpenAI function specs; ``call_tool`` (or ``functions``)
    runs one."""

    base_url: str
    api_key: str
    model: str
    task_id: str
    prompt: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    _loop: asyncio.AbstractEventLoop | None = None
    _queue: asyncio.Queue[_Request | None] | None = None
    _cond: threading.Condition = field(default_factory=threading.Condition)
    _observations: list[str] = field(default_factory=list)
    _taken: int = 0
    _over: bool = False
    _stopped: bool = False

    def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """Run the tool the model's last turn called and return the env's observation (an error text when there
        is no such call to run: one tool call per model turn)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._observations) > self._taken or self._over, TOOL_WAIT_S):
                return f"error: no observation for {name} after {TOOL_WAIT_S:.0f} s"
            if len(self._observations) <= self._taken:
                return f"error: {EPISODE_OVER} (no model turn called {name})"
            out = self._observations[self._taken]
            self._taken += 1
            return out

    def functions(self) -> list[Callable[..., str]]:
        """The env's tools as Python callables (keyword arguments), named and documented like the tools."""
        out = []
        for spec in self.tools:
            fn = spec["function"]

            def call(_name: str = fn["name"], **kwargs: Any) -> str:
                return self.call_tool(_name, kwargs)

            call.__name__, call.__doc__ = fn["name"], fn.get("description", "")
            out.append(call)
        return out

    # ---- the trainer's side -----------------------------------------------------------------------------

    def publish(self, observation: str) -> None:
        with self._cond:
            self._observations.append(observation)
            self._cond.notify_all()

    def discard_unread(self) -> None:
        with self._cond:
            self._taken = len(self._observations)

    def close(self) -> None:
        with self._cond:
            self._over = True
            self._cond.notify_all()


class ProgramAgent:
    """The rollout loop's agent for one proxied episode: each ``act`` waits for the user's agent to call the
    model, generates that turn with the policy's episode view, answers the agent and returns the text to the env."""

    def __init__(self, ep: ProxyEpisode, view: Any, program: AgentProgram, name: str, model: str | None):
        self.ep, self.view, self.program, self.name, self.model = ep, view, program, name, model
        self.turns: list[Turn] = view.turns
        self.program_task: asyncio.Task[Any] | None = None
        self.tool_turn = False
        self.error: BaseException | None = None

    def episode(self, task: Task, seed: int | None) -> ProgramAgent:
        return self

    def _run_program(self) -> None:
        try:
            result = self.program(self.ep)
            if inspect.isawaitable(result):
                asyncio.run(result)  # type: ignore[arg-type]
        except BaseException as e:  # noqa: BLE001  (the episode's data survives a failing agent: said below)
            self.error = e
        finally:
            loop, queue = self.ep._loop, self.ep._queue
            self.ep._stopped = True
            if loop is not None and queue is not None:
                loop.call_soon_threadsafe(queue.put_nowait, None)

    async def act(self, messages: list[Message], tools: list[ToolSpec]) -> str:
        ep = self.ep
        if self.program_task is None:
            ep._loop, ep._queue = asyncio.get_running_loop(), asyncio.Queue()
            ep.prompt = next((m.content or "" for m in messages if m.role == "user"), "")
            ep.tools = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
            self.program_task = asyncio.create_task(asyncio.to_thread(self._run_program))
        elif self.tool_turn:
            ep.publish(_observation(messages))
        assert ep._queue is not None
        request = None if ep._stopped and ep._queue.empty() else await ep._queue.get()
        ep.discard_unread()  # an observation the agent never fetched before calling the model again is stale
        if request is None:
            self.tool_turn = False
            return AGENT_STOPPED
        try:
            turn = await self.view.generate(self.view.render(request.messages))
            turn.text = self.view.response_prefix + turn.text
        except BaseException as e:
            request.reply.set_exception(e)
            raise
        self.turns.append(turn)
        self.tool_turn = "tool_calls" in reply_message(turn.text, request.tools)[0]
        request.reply.set_result(turn)
        return turn.text

    async def finish(self, final_observation: str) -> None:
        """The env's episode is over: give the agent its last observation, then let it end."""
        if self.tool_turn:
            self.ep.publish(final_observation)
        self.ep.close()
        if self.program_task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.program_task), TOOL_WAIT_S)
            except TimeoutError:
                self.error = TimeoutError(f"it was still running {TOOL_WAIT_S:.0f} s after the episode ended")
        if self.error is not None:
            warnings.warn(
                f"the agent program failed in episode {self.ep.api_key}: {type(self.error).__name__}: {self.error} "
                "(the episode is kept as the env recorded it)",
                stacklevel=2,
            )


class EpisodeRouter:
    """The proxy's generator in a training run: a session is an episode ``ProxyBackend`` opened (its key is the
    episode's ``api_key``); each request is handed to the rollout loop playing it."""

    def __init__(self, model: str, temperature: float):
        self.model, self.temperature = model, temperature
        self.log = SessionLog()
        self.episodes: dict[str, ProxyEpisode] = {}

    async def complete(self, session: Session, messages: list[Message], tools: list[ToolSpec]) -> Turn:
        ep = self.episodes.get(session.key)
        if ep is None:
            raise WireError(
                f"no episode is open for session {session.key!r}: use the api_key of the ProxyEpisode your agent "
                "function was given",
                404,
                "session_not_found",
            )
        if ep._over or ep._loop is None or ep._queue is None:
            return Turn([], [], [], EPISODE_OVER)
        reply: concurrent.futures.Future[Turn] = concurrent.futures.Future()
        ep._loop.call_soon_threadsafe(ep._queue.put_nowait, _Request(messages, tools, reply))
        return await asyncio.wrap_future(reply)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ProxyServer:
    """The proxy app served by uvicorn on loopback in a background thread (started once, stopped by ``close``)."""

    def __init__(self, gen: Generator, host: str = "127.0.0.1", port: int | None = None):
        import uvicorn

        self.gen, self.host, self.port = gen, host, port or _free_port()
        config = uvicorn.Config(create_app(gen), host=host, port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="rubricgym-proxy", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the recording proxy did not start on {host}:{self.port}")
            time.sleep(0.02)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
