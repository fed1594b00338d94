"""The wire protocol of ``rubricgym serve``: OpenEnv's message envelope with rubricgym's explicit fields.

OpenEnv (openenv-core 0.3.0) clients send ``{"type": "reset"|"step"|"state"|"close", "data": ...}`` over
``WS /ws`` and read ``{"type": "observation", "data": {"observation": {...}, "reward": r, "done": d}}``; errors
are ``{"type": "error", "data": {"message", "code"}}`` and never drop the socket. OpenEnv drops an observation's
``metadata`` on the wire, so rubricgym's observation carries everything explicitly: ``text`` (what a text agent
reads), ``messages`` (the chat messages this turn added: system + task at reset, assistant + reply after a
step), ``tools``, ``stage``, ``truncated`` and ``info``. ``done`` is ``terminated or truncated``.

Two message types extend the protocol for ``RemoteEnv``: ``trajectory`` (the episode record, so checks and
rubrics score a remote episode exactly like a local one) and ``tasks`` (the env's seeded task set).
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field

from rubricgym.core.types import Action, Message, State, ToolCall, ToolSpec


class ErrorCode(StrEnum):
    """Codes of ``error`` replies; OpenEnv's own codes first, then rubricgym's."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    NOT_RESET = "NOT_RESET"
    EPISODE_OVER = "EPISODE_OVER"
    MESSAGE_TOO_LARGE = "MESSAGE_TOO_LARGE"
    IDLE_TIMEOUT = "IDLE_TIMEOUT"
    SHUTTING_DOWN = "SHUTTING_DOWN"
    TASK_REFUSED = "TASK_REFUSED"
    UNKNOWN_TASK = "UNKNOWN_TASK"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    WORKER_GONE = "WORKER_GONE"
    """The server worker holding an HTTP session has exited (``--workers``): the episode is lost."""


class ProtocolError(Exception):
    """A request the server refuses; becomes an ``error`` reply (WS) or a 4xx response (HTTP)."""

    def __init__(self, code: ErrorCode, message: str, status: int = 400, **extra: Any):
        super().__init__(message)
        self.code, self.message, self.status, self.extra = code, message, status, extra

    def reply(self) -> dict[str, Any]:
        return {"type": "error", "data": {"message": self.message, "code": self.code.value, **self.extra}}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WireAction(_Strict):
    """A step's action: model text (tool calls inside it are parsed), or a structured tool call.

    ``text`` is required (``""`` beside a structured ``tool_call``): the schema's one required field is what
    generic OpenEnv clients (verifiers' OpenEnv taskset) fill with a model's raw reply.
    """

    text: str = Field(description="The model's reply; tool calls written in it are parsed (empty with tool_call)")
    tool_call: ToolCall | None = Field(default=None, description="A structured tool call (its name and arguments)")

    def to_action(self) -> Action | str:
        if self.tool_call is None:
            return self.text
        return Action(text=self.text, tool_call=self.tool_call, structured=True)


MAX_SEED = 2**63 - 1

# the bounds of what an operator may ask of one server (``ServerConfig``, ``rubricgym serve``)
MAX_SESSIONS = 10_000
"""Sessions one server holds at most (each may hold a thread and an env)."""
MIN_IDLE_S = 0.1
"""Shortest idle timeout: the reaper wakes every quarter of it (a tiny one would spin a core)."""
MAX_IDLE_S = 7 * 24 * 3600.0
MAX_MESSAGE_BYTES = 1 << 30
MAX_ISSUED = 1_000_000
"""Handed-out tasks one server remembers at most (each a ``Task`` in memory)."""
MAX_WORKERS = 64
"""Server processes at most (each imports the env and holds its sessions)."""


class ResetData(_Strict):
    """``reset`` arguments: a seed (the server draws the task with it), or the task to play.

    ``task_id`` names a task the server handed out (``tasks``); ``task`` (or ``options.task``) is a task dict,
    played when it is one the server handed out, or when the server accepts client tasks (see ``policy``).
    """

    seed: int | None = Field(default=None, ge=0, le=MAX_SEED)
    episode_id: str | None = Field(default=None, max_length=256)
    """Accepted for OpenEnv clients; rubricgym names episodes itself (``state().episode_id``)."""
    options: dict[str, Any] | None = None
    task: dict[str, Any] | None = None
    task_id: str | None = Field(default=None, max_length=1024)
    split: str | None = Field(default=None, min_length=1, max_length=64)
    """With ``index``: OpenEnv's Task API, ``reset(split, index)`` plays task ``index`` of the server's ``split``
    (``GET /{env}/tasks`` lists them)."""
    index: int | None = Field(default=None, ge=0)

    def the_task(self) -> dict[str, Any] | None:
        if self.task is not None:
            return self.task
        return (self.options or {}).get("task")


class TasksData(_Strict):
    """``tasks`` arguments: ``env.task_set(n, seed, split)`` (``n`` is capped by ``--max-tasks``)."""

    n: int = Field(ge=1)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    split: str = Field(default="train", min_length=1, max_length=64)


class WireObservation(_Strict):
    """The observation fields on the wire (inside ``{"observation": ..., "reward": ..., "done": ...}``)."""

    text: str
    messages: list[Message]
    tools: list[ToolSpec]
    stage: str | None = None
    truncated: bool = False
    info: dict[str, Any] = Field(default_factory=dict)


class HTTPReset(ResetData):
    """``POST /reset`` body: ``ResetData`` plus an optional session to reset (else a new one is opened)."""

    session_id: str | None = None


class HTTPStep(_Strict):
    """``POST /step`` body, OpenEnv's shape plus the ``session_id`` that ``POST /reset`` returned."""

    action: WireAction
    session_id: str | None = None
    timeout_s: float | None = None
    request_id: str | None = None


def schema() -> dict[str, Any]:
    """``GET /schema``: JSON schemas of the action, the observation and the state."""
    return {
        "action": WireAction.model_json_schema(),
        "observation": WireObservation.model_json_schema(),
        "state": State.model_json_schema(),
    }


def dumps_bytes(obj: Any) -> bytes:
    """Compact UTF-8 JSON of a reply (pydantic-core's encoder: a third of ``json.dumps``'s time per step).

    Text with lone surrogates (an agent's broken text echoed back) is no UTF-8: such a reply falls back to
    ``json.dumps``, whose ASCII escapes keep the frame valid. NaN and infinities are written as ``json.dumps``
    writes them.
    """
    try:
        return pydantic_core.to_json(obj, inf_nan_mode="constants")
    except pydantic_core.PydanticSerializationError:
        return json.dumps(obj, separators=(",", ":")).encode()


def dumps(obj: Any) -> str:
    """``dumps_bytes`` as text, for a WebSocket text frame."""
    return dumps_bytes(obj).decode()
