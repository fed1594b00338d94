"""Where a session's env runs: a worker thread of the server (``isolation="thread"``) or a process of its own
(``isolation="process"``).

A session talks to its env only through the operations below, which take and return plain picklable values, so
both runners serve the same protocol. Threads are cheap and share the server's memory; they keep the event loop
free while an env blocks (a sandbox, a subprocess, I/O), but env code that computes in pure Python holds the
interpreter lock and slows every other session's turn. A thread runner's steps and resets run on the event
loop itself once its session has shown they are short (``inline``). A worker process (forked from a
``forkserver`` that has the env's modules imported, so it starts in milliseconds) runs such code beside the server
instead of inside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from pydantic import ValidationError

from rubricgym.core.env import RubricEnv
from rubricgym.core.types import Action, Message, Observation, State, Task
from rubricgym.server.inline import InlineSteps, SessionSteps, timed
from rubricgym.server.policy import check_client_task, public_trajectory
from rubricgym.server.threads import EnvThreads

T = TypeVar("T")

WORKER_NICE = 10
"""How much lower a worker process's CPU priority is than the server's."""


def op_reset(env: RubricEnv, seed: int | None, task: Task | None) -> tuple[Observation, State]:
    return env.reset_typed(seed=seed, task=task), env.state()


Stepped = tuple[Observation, dict[str, Any], list[Message]]
"""A step as a client may see it: the observation, the step's wire ``info`` and the messages the turn added."""


def _stepped(env: RubricEnv, obs: Observation) -> Stepped:
    """The step as a client may see it: its ``info`` cut to the env's ``public_info_keys`` (the private record
    stays with the env: checks and a trusted ``trajectory`` read it). Only the fields the wire carries are
    picked (no copy of the whole ``Step``), so a worker process also pickles less."""
    step, messages = env.last_step()
    info = {
        "step": step.index + 1,
        "stage": step.stage,
        "parse_error": step.action.parse_error,
        "tool_error": step.tool_error,
        "details": env.public_details(step.info),
    }
    return obs, info, messages


def op_step(env: RubricEnv, action: Action | str) -> Stepped:
    return _stepped(env, env.step_typed(action))


def op_state(env: RubricEnv) -> State:
    return env.state()


def op_trajectory(env: RubricEnv, trusted: bool) -> dict[str, Any]:
    return public_trajectory(env, trusted)


def op_tasks(env: RubricEnv, n: int, seed: int, split: str) -> list[Task]:
    return env.task_set(n, seed=seed, split=split)


def op_check_task(env: RubricEnv, data: dict[str, Any]) -> Task:
    return check_client_task(env, data)


OPS: dict[str, Callable[..., Any]] = {
    "reset": op_reset,
    "step": op_step,
    "state": op_state,
    "trajectory": op_trajectory,
    "tasks": op_tasks,
    "check_task": op_check_task,
}


def off_loop(executor: Executor | None, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
    """``fn(*args)`` on ``executor``'s threads (``None``: the loop's default executor), awaited on the loop."""
    if isinstance(executor, EnvThreads):
        return executor.run(fn, *args)  # the cheap hand-off (``threads``)
    return asyncio.get_running_loop().run_in_executor(executor, fn, *args)


def is_async(env_cls: type[RubricEnv]) -> bool:
    """Whether the env's steps are coroutines (its tools do I/O): awaited on a loop, not run on a thread."""
    return env_cls.is_async()


class ThreadRunner:
    """The env in the server's process; its calls run on the server's executor (async steps on the loop, and
    a sync env's short steps and resets too, under ``inline``'s rule)."""

    def __init__(self, env: RubricEnv, executor: Executor | None, inline: InlineSteps | None = None):
        self.env, self.executor = env, executor
        self._async = is_async(type(env))
        self.steps: SessionSteps | None = None
        self.resets: SessionSteps | None = None
        if inline is not None and not self._async:
            self.steps, self.resets = inline.session(), inline.session()

    async def call(self, op: str, *args: Any) -> Any:
        if op == "step":
            if self._async:
                return _stepped(self.env, await self.env.astep_typed(args[0]))
            placement = self.steps
        else:
            placement = self.resets if op == "reset" else None
        if placement is None:
            return await off_loop(self.executor, OPS[op], self.env, *args)
        if placement.on_loop():
            return placement.run_inline(OPS[op], self.env, *args)
        try:
            result, wall_s = await off_loop(self.executor, timed, OPS[op], self.env, *args)
        except BaseException:
            placement.ran_on_thread(float("inf"))
            raise
        placement.ran_on_thread(wall_s)
        return result

    async def close(self) -> None:
        await off_loop(self.executor, self.env.close)


class WorkerError(Exception):
    """An env call failed in a worker process: ``kind`` says which exception the session should see."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


_RAISE = {"value": ValueError, "type": TypeError}


def _describe(e: BaseException) -> tuple[str, str]:
    if isinstance(e, ValidationError):
        return "value", "; ".join(f"{'.'.join(map(str, x['loc'])) or 'data'}: {x['msg']}" for x in e.errors()[:5])
    if isinstance(e, ValueError | TypeError):
        return ("value" if isinstance(e, ValueError) else "type"), str(e)
    return "other", f"{type(e).__name__}: {e}"


def _serve(conn: Connection, factory: Callable[[], RubricEnv]) -> None:
    """A worker process: build the env, then answer ``(op, args)`` requests until ``close`` or the server goes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's; it closes its workers
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)  # env work yields the CPU to the server's event loop (/health, other sessions)
    try:
        env = factory()
    except Exception as e:
        conn.send(("error", *_describe(e)))
        return
    conn.send(("ok", None))
    loop = asyncio.new_event_loop() if is_async(type(env)) else None
    try:
        while True:
            try:
                op, args = conn.recv()
            except (EOFError, OSError):
                return  # the server is gone
            if op == "close":
                return
            try:
                if op == "step" and loop is not None:
                    result = _stepped(env, loop.run_until_complete(env.astep_typed(args[0])))
                else:
                    result = OPS[op](env, *args)
            except Exception as e:
                conn.send(("error", *_describe(e)))
            else:
                conn.send(("ok", result))
    finally:
        with contextlib.suppress(Exception):
            env.close()
        with contextlib.suppress(Exception):
            conn.send(("ok", None))
        if loop is not None:
            loop.close()


def worker_context(preload: list[str]) -> multiprocessing.context.BaseContext:
    """The ``forkserver`` context whose server process has ``preload`` (the env's modules) imported once."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    return ctx


def _noop() -> None:
    return None


def start_forkserver(ctx: Any) -> None:
    """Start the forkserver and wait until it has imported the preloaded modules (one empty child forked and
    joined), so the first session does not pay for the imports."""
    warm = ctx.Process(target=_noop, name="rubricgym-warm-up")
    warm.start()
    warm.join()


class ProcessRunner:
    """The env in a process of its own; each call is one request/reply on a pipe, waited for on a thread."""

    CLOSE_TIMEOUT_S = 30.0

    def __init__(self, factory: Callable[[], RubricEnv], ctx: Any, executor: Executor | None):
        self.executor = executor
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, factory), name="rubricgym-env", daemon=True)
        self._lock = threading.Lock()
        self._proc.start()
        child.close()
        self._reply()  # the env is built (or its error raised here, at open)

    def _died(self) -> WorkerError:
        self._proc.join(1.0)  # a killed worker's exit code is known once it is reaped
        return WorkerError("other", f"the env's worker process died (exit code {self._proc.exitcode})")

    def _reply(self) -> Any:
        try:
            status, *rest = self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        if status == "error":
            kind, message = rest
            if kind in _RAISE:
                raise _RAISE[kind](message)
            raise WorkerError(kind, message)
        return rest[0]

    def _call(self, op: str, args: tuple[Any, ...]) -> Any:
        with self._lock:  # one request in flight: replies pair with requests
            try:
                self._conn.send((op, args))
            except OSError:  # the worker died before the request (a broken pipe), not only while serving it
                raise self._died() from None
            return self._reply()

    async def call(self, op: str, *args: Any) -> Any:
        return await off_loop(self.executor, self._call, op, args)

    def _close(self) -> None:
        if self._lock.acquire(timeout=self.CLOSE_TIMEOUT_S):  # a step in flight finishes first
            try:
                self._conn.send(("close", ()))
                if self._conn.poll(self.CLOSE_TIMEOUT_S):
                    self._conn.recv()
            except (EOFError, OSError):
                pass
            finally:
                self._lock.release()
        self._proc.join(5.0)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5.0)
        self._conn.close()

    async def close(self) -> None:
        await off_loop(self.executor, self._close)
