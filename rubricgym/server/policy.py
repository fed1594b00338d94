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
from typing import Any

from pydantic import ValidationError

from rubricgym.core.env import RubricEnv
from rubricgym.core.types import Task
from rubricgym.server.protocol import ErrorCode, ProtocolError

_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_URL = re.compile(r"^(file|unix|npipe|fd|proc)\s*:", re.IGNORECASE)
_SEP = re.compile(r"[\\/]")
_WEB_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # http(s)://, ...: a page, not a host file
_EXTENSIONS = (
    "txt md rst json jsonl yaml yml toml ini cfg conf env csv tsv parquet arrow db sqlite sqlite3 log py sh pem key "
    "crt pub pkl pickle pt pth bin safetensors gguf npy npz gz bz2 xz zst zip tar tgz html htm xml pdf"
)
_FILE_EXTENSIONS = frozenset(_EXTENSIONS.split())
"""Extensions that make one token a file name (``notes.txt``); ``answer.sender`` or ``v1.2`` are not."""


def names_host_path(text: str) -> bool:
    """Whether ``text`` reads as a path on the server host: absolute, ``~``, ``file:``, ``..``, or path-shaped
    (one token with a separator between names, ``./x``, or a file name such as ``notes.txt``).

    Decided by the text alone, never by looking at the disk: a probe would refuse a path that exists and play one
    that does not, so a client could list the server's working directory by trying names. Prose (any whitespace,
    ``2 / 3``), arithmetic (``3/4``), web URLs and bare words are not paths.
    """
    s = text.strip()
    if not s:
        return False
    if s.startswith(("/", "~", "\\")) or _DRIVE.match(s) or _URL.match(s):
        return True
    parts = _SEP.split(s)
    if ".." in parts:
        return True
    if _WEB_URL.match(s) or any(c.isspace() for c in s):
        return False
    if s == "." or s.startswith(("./", ".\\")):
        return True
    if len(parts) > 1 and any(re.search(r"[A-Za-z_]", p) for p in parts):
        return True
    stem, dot, ext = s.rpartition(".")
    return bool(dot and stem and ext.lower() in _FILE_EXTENSIONS)


def host_path_fields(task: Task) -> list[str]:
    """Where ``task``'s params, hidden record and rubric name a host path (``params.corpus``, ...); a rubric's
    ``id`` is a name (``deepsearch/ds-...``), not a path."""
    found: list[str] = []
    rubric = {k: v for k, v in task.rubric.items() if k != "id"} if isinstance(task.rubric, dict) else task.rubric
    stack: list[tuple[str, Any]] = [("params", task.params), ("hidden", task.hidden), ("rubric", rubric)]
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

    Bounded, and fair between clients (a client is a session: one WebSocket connection). A client holds at most
    ``per_client`` tasks (asking for more forgets its own oldest); the server holds at most ``capacity`` distinct
    tasks, and room for a new reply is made only from tasks of sessions that have closed (first closed first) and
    from the asking client's own older ones, never from another open session's. A reply that still does not fit is
    refused (``LIMIT_EXCEEDED``, nothing forgotten): no client can make the server forget what it handed another.
    """

    def __init__(self, capacity: int, per_client: int | None = None):
        per_client = capacity if per_client is None else per_client
        if not 1 <= per_client <= capacity:
            raise ValueError(f"per_client must be in [1, capacity={capacity}], got {per_client}")
        self.capacity, self.per_client = capacity, per_client
        self._tasks: dict[str, Task] = {}
        self._holders: dict[str, set[str]] = {}  # task id -> clients holding it
        self._held: dict[str, OrderedDict[str, None]] = {}  # client -> task ids, least recently issued first
        self._closed: OrderedDict[str, None] = OrderedDict()  # clients whose session closed, first closed first

    def __len__(self) -> int:
        return len(self._tasks)

    def held_by(self, client: str) -> int:
        """How many handed-out tasks ``client`` holds."""
        return len(self._held.get(client, ()))

    def add(self, tasks: list[Task], client: str = "") -> None:
        """Remember ``tasks`` as handed to ``client``; ``LIMIT_EXCEEDED`` (nothing changed) when they do not fit."""
        batch = set(t.id for t in tasks)
        if len(batch) > self.per_client:
            raise ProtocolError(
                ErrorCode.LIMIT_EXCEEDED,
                f"tasks: {len(batch)} tasks are over this server's {self.per_client} per client; ask for fewer",
                issued_per_client=self.per_client,
            )
        own_old = [i for i in self._held.get(client, ()) if i not in batch]
        over_quota = own_old[: max(0, len(own_old) + len(batch) - self.per_client)]  # the client's oldest
        mine = {client} | self._closed.keys()
        freeable = sum(1 for i, h in self._holders.items() if h <= mine and i not in batch)
        if self._missing(batch) - self.capacity + len(self._tasks) > freeable:
            others = sum(1 for c in self._held if c != client and c not in self._closed)
            raise ProtocolError(
                ErrorCode.LIMIT_EXCEEDED,
                f"tasks: the server holds {len(self._tasks)} handed-out tasks (its cap is {self.capacity}) for "
                f"{others} other open sessions; close sessions you no longer need, ask for fewer, or retry later "
                "(the server's operator may raise --issued-tasks)",
                issued_tasks=self.capacity,
            )
        for i in over_quota:
            self._release(client, i)
        while self._closed and len(self._tasks) + self._missing(batch) > self.capacity:
            gone = next(iter(self._closed))
            held = self._held.get(gone)
            if held:
                self._release(gone, next(iter(held)))  # its oldest first
            if not held:
                self._closed.pop(gone)
                self._held.pop(gone, None)
        room = self.capacity - self._missing(batch)  # batch ids are never released below: this stays exact
        for i in [i for i in self._held.get(client, ()) if i not in batch]:
            if len(self._tasks) <= room:
                break
            self._release(client, i)
        held = self._held.setdefault(client, OrderedDict())
        self._closed.pop(client, None)
        for t in tasks:
            self._tasks[t.id] = t
            self._holders.setdefault(t.id, set()).add(client)
            held[t.id] = None
            held.move_to_end(t.id)

    def _missing(self, batch: set[str]) -> int:
        return sum(1 for i in batch if i not in self._tasks)

    def close(self, client: str) -> None:
        """``client``'s session closed: its tasks stay playable (other sessions may name them) until room is needed;
        those another client also holds are that client's to keep."""
        held = self._held.get(client)
        if held is None:
            return
        for i in [i for i in held if len(self._holders[i]) > 1]:
            self._release(client, i)
        if held:
            self._closed[client] = None
        else:
            del self._held[client]

    def _release(self, client: str, task_id: str) -> None:
        held = self._held.get(client)
        if held is not None:
            held.pop(task_id, None)
        holders = self._holders.get(task_id)
        if holders is not None:
            holders.discard(client)
            if not holders:
                del self._holders[task_id]
                del self._tasks[task_id]

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
