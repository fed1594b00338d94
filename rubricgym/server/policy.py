"""What a client of ``rubricgym serve`` may send and receive (issue 23, items 1 and 2).

A client chooses a task; it does not supply one. By default a session plays only tasks the server itself draws:
by ``seed``, or by naming (``task_id``, or the task dict a ``tasks`` reply gave it) one of the tasks this server
handed out. Client-supplied tasks need ``ServerConfig.accept_client_tasks``, and even then no field of the task
may name a host path (a corpus folder, a snapshot folder, a knowledge base): those are the server's resources,
chosen by whoever started it. An env may refuse more (``client_task_refusal(task) -> str | None``, e.g. a
generated world other than the one it serves).

What a client receives never holds ``Task.hidden`` (answers, gold patches, diagnoses) nor the private part of
a step's ``info``, unless the server is ``trusted`` (a trainer that scores on its own side).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rubricgym.core.env import RubricEnv
from rubricgym.core.types import Task
from rubricgym.server.protocol import ErrorCode, ProtocolError

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_URL = re.compile(r"^(file|unix|npipe|fd|proc)\s*:", re.IGNORECASE)
MAX_PATH_PROBE = 4096  # longer strings are no file name on Linux (PATH_MAX), so they are not probed


def names_host_path(text: str) -> bool:
    """Whether ``text`` reads as a path on the server host: absolute, ``~``, ``file:``, ``..``, or existing."""
    s = text.strip()
    if not s:
        return False
    if s.startswith(("/", "~", "\\")) or _DRIVE.match(s) or _URL.match(s):
        return True
    if ".." in re.split(r"[\\/]", s):
        return True
    if len(s) > MAX_PATH_PROBE or "\0" in s or "\n" in s:
        return False
    try:
        return Path(s).exists() or Path(s).is_symlink()  # relative to the server's working directory
    except (OSError, ValueError):
        return True  # a name the OS refuses to look at is no name a task needs


def host_path_fields(task: Task) -> list[str]:
    """Where ``task``'s params, hidden record and rubric name a host path (``params.corpus``, ...)."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("params", task.params), ("hidden", task.hidden), ("rubric", task.rubric)]
    while stack:  # iterative: a deeply nested task cannot exhaust the recursion limit
        where, value = stack.pop()
        if isinstance(value, str):
            if names_host_path(value):
                found.append(where)
        elif isinstance(value, dict):
            for k, v in value.items():
                if isinstance(k, str) and names_host_path(k):
                    found.append(f"{where} (key {k[:40]!r})")
                stack.append((f"{where}.{k}", v))
        elif isinstance(value, list | tuple):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return sorted(found)


def check_client_task(env: RubricEnv, data: dict[str, Any]) -> Task:
    """``data`` as a ``Task`` a client may have played, or a ``TASK_REFUSED`` error saying which field is why."""
    try:
        task = Task.model_validate(data)
    except ValidationError as e:
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"task: {e.errors()[0]['msg']}") from None
    paths = host_path_fields(task)
    if paths:
        raise ProtocolError(
            ErrorCode.TASK_REFUSED,
            f"task {task.id!r} names a host path or server resource in {', '.join(paths[:5])}; a client task may "
            "not choose the server's files: use a task the server hands out (tasks, then reset with task_id)",
        )
    refusal = getattr(env, "client_task_refusal", None)
    reason = refusal(task) if callable(refusal) else None
    if reason:
        raise ProtocolError(ErrorCode.TASK_REFUSED, f"task {task.id!r}: {reason}")
    return task


class IssuedTasks:
    """The tasks this server handed out (``tasks`` replies), by id: what a client may name in ``reset``.

    Bounded (least recently issued dropped first) so no client can grow the server's memory with it.
    """

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._tasks: OrderedDict[str, Task] = OrderedDict()

    def add(self, tasks: list[Task]) -> None:
        for t in tasks:
            self._tasks[t.id] = t
            self._tasks.move_to_end(t.id)
        while len(self._tasks) > self.capacity:
            self._tasks.popitem(last=False)

    def get(self, task_id: str) -> Task | None:
        return self._tasks.get(task_id)

    def match(self, data: dict[str, Any]) -> Task | None:
        """The issued task ``data`` is a copy of (its hidden record may be missing: clients never get it)."""
        issued = self._tasks.get(str(data.get("id")))
        if issued is None:
            return None
        public = {k: v for k, v in data.items() if k != "hidden"}
        try:
            same = Task.model_validate({**public, "hidden": issued.hidden}) == issued
        except ValidationError:
            return None
        return issued if same else None


def public_task(task: Task, trusted: bool) -> dict[str, Any]:
    """A task as a client receives it: without ``hidden`` unless the server is trusted."""
    return task.model_dump(mode="json", exclude=None if trusted else {"hidden"})


def public_trajectory(env: RubricEnv, trusted: bool) -> dict[str, Any]:
    """The episode record as a client receives it: no ``task.hidden``, each step's ``info`` cut to public keys."""
    data = env.trajectory().model_dump(mode="json")
    if trusted:
        return data
    data["task"].pop("hidden", None)
    keys: frozenset[str] = getattr(type(env), "public_info_keys", frozenset())
    for step in data["steps"]:
        step["info"] = {k: v for k, v in step.get("info", {}).items() if k in keys}
    return data
