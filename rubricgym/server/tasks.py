"""OpenEnv's Task API over the server's own task source: finite, numbered task lists per split.

A rubricgym env draws tasks from a seeded generator (``env.task_set(n, seed, split)``); OpenEnv's Task API
(``/list_environments``, ``/{env}/splits``, ``/{env}/tasks``, ``/{env}/num_tasks``, ``/{env}/task``,
``/{env}/task_range``, then ``reset(split=..., index=...)``) numbers tasks within a split. The server's source is
the first ``tasks_per_split`` tasks of each split from ``task_seed`` (``rubricgym serve --tasks-per-split
--task-seed``), built once per split on first use and kept: task ``i`` of ``train`` is the same task on every
call, for every client. What a client sees of a task never holds ``Task.hidden`` unless the server is trusted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.core.env import RubricEnv
from rubricgym.core.types import Task
from rubricgym.server.policy import public_task
from rubricgym.server.protocol import ErrorCode, ProtocolError

CANDIDATE_SPLITS = ("train", "validation", "test")
"""Splits probed on an env that does not declare its own (``splits`` class attribute)."""


def split_type(split: str) -> str:
    """OpenEnv's split descriptor type: ``train``, ``validation`` or ``test`` (held-out splits are tests)."""
    if split in ("train", "validation", "test"):
        return split
    return "train" if split.startswith("train") else "test"


class TaskSource:
    """The numbered tasks a server plays by ``(split, index)``: its env's first ``per_split`` tasks of a split."""

    def __init__(self, env: RubricEnv, executor: Executor | None, per_split: int, seed: int = 0):
        self.env, self.executor, self.per_split, self.seed = env, executor, per_split, seed
        self._splits: list[str] | None = None
        self._tasks: dict[str, list[Task]] = {}
        self._lock = asyncio.Lock()  # one build at a time: task sets are built in Python, on a thread

    async def _off_loop(self, fn: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    async def splits(self) -> list[str]:
        """The env's splits: its ``splits`` attribute, else those of train/validation/test it can draw from."""
        if self._splits is None:
            declared = getattr(type(self.env), "splits", None)
            if declared:
                self._splits = [str(s) for s in declared]
            else:
                self._splits = [s for s in CANDIDATE_SPLITS if await self._draws(s)]
        return self._splits

    async def _draws(self, split: str) -> bool:
        async with self._lock:
            if split in self._tasks:
                return True
            try:
                self._tasks[split] = await self._off_loop(lambda: self.env.task_set(self.per_split, self.seed, split))
            except (ValueError, KeyError):
                return False
            return True

    async def tasks(self, split: str) -> list[Task]:
        """Every task of ``split``; ``UNKNOWN_TASK`` naming the splits there are when ``split`` is not one."""
        known = await self.splits()
        if split not in known or not await self._draws(split):
            raise ProtocolError(
                ErrorCode.UNKNOWN_TASK, f"no split {split[:64]!r} on this server; its splits are {known}", status=404
            )
        return self._tasks[split]

    async def task(self, split: str, index: int) -> Task:
        """Task ``index`` of ``split`` (``UNKNOWN_TASK`` when out of range)."""
        tasks = await self.tasks(split)
        if not 0 <= index < len(tasks):
            raise ProtocolError(
                ErrorCode.UNKNOWN_TASK,
                f"split {split!r} has tasks 0..{len(tasks) - 1} on this server, not index {index} "
                "(the operator sets how many with --tasks-per-split)",
            )
        return tasks[index]


class _SplitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: str = Field(min_length=1, max_length=64)


class _TaskRequest(_SplitRequest):
    index: int


class _RangeRequest(_SplitRequest):
    start: int | None = None
    stop: int | None = None


def add_task_routes(app: FastAPI, env_id: str, source: TaskSource, trusted: bool) -> None:
    """Register OpenEnv's Task API routes for the env served as ``env_id`` (names compared case-insensitively)."""

    def check(env_name: str) -> None:
        if env_name.lower() != env_id.lower():
            raise HTTPException(404, f"unknown environment {env_name[:80]!r}: this server serves {env_id!r}")

    def listed(tasks: list[Task], start: int = 0) -> list[dict[str, Any]]:
        return [{**public_task(t, trusted), "index": start + i} for i, t in enumerate(tasks)]

    @app.get("/list_environments", tags=["Task API"])
    async def list_environments() -> list[str]:
        return [env_id]

    @app.get("/{env_name}/splits", tags=["Task API"])
    async def list_splits(env_name: str) -> list[dict[str, str]]:
        check(env_name)
        return [{"name": s, "type": split_type(s)} for s in await source.splits()]

    @app.post("/{env_name}/tasks", tags=["Task API"])
    async def list_tasks(env_name: str, request: _SplitRequest) -> dict[str, Any]:
        check(env_name)
        return {"tasks": listed(await source.tasks(request.split)), "env_name": env_id}

    @app.post("/{env_name}/num_tasks", tags=["Task API"])
    async def num_tasks(env_name: str, request: _SplitRequest) -> dict[str, int]:
        check(env_name)
        return {"num_tasks": len(await source.tasks(request.split))}

    @app.post("/{env_name}/task", tags=["Task API"])
    async def get_task(env_name: str, request: _TaskRequest) -> dict[str, Any]:
        check(env_name)
        task = await source.task(request.split, request.index)
        return {"task": {**public_task(task, trusted), "index": request.index}}

    @app.post("/{env_name}/task_range", tags=["Task API"])
    async def get_task_range(env_name: str, request: _RangeRequest) -> dict[str, Any]:
        check(env_name)
        tasks = await source.tasks(request.split)
        start, stop, _ = slice(request.start, request.stop).indices(len(tasks))
        return {"tasks": listed(tasks[start:stop], start)}
