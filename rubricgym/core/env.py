"""``RubricEnv``: the env contract, a ``gymnasium.Env`` over text with a typed (OpenEnv-style) face beside it.

A subclass declares its tools, how to run one tool call, and how to label a step with a stage; the base class
does parsing, malformed-action feedback, truncation at ``max_steps``, observation truncation, the chat history
and the episode record that becomes a ``Trajectory``.

A step is one path: ``_parse`` turns the agent's output into a ``PendingStep`` (the action as recorded, the valid
call or the parse error), the tool call runs (``call_tool``, or ``acall_tool`` for an ``async def`` tool under
``astep_typed``), and ``_finish_step`` labels, truncates and records it as a ``StepRecord``.

Tools may be ``async def`` (I/O: sandboxes, browsers, LLMs). ``astep_typed`` awaits them and the synchronous
``step``/``step_typed`` run them to completion, both on the env's loop. How a tool call runs, and which of
``call_tool``/``acall_tool`` an env overrides, is ``ToolDispatch`` (``core.dispatch``); what an env declares for
rewards, agents and the leak audit is ``EnvDeclarations`` (``core.declarations``); the read-only views of the
episode (``outcome``, ``steps``, ``messages``, ``state``, ``trajectory``) are ``EpisodeViews`` (``core.episode``):
all three are bases of ``RubricEnv``.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from abc import ABCMeta, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from time import perf_counter
from typing import Any, ClassVar

import gymnasium
import numpy as np

from rubricgym.core.declarations import EnvDeclarations
from rubricgym.core.dispatch import ToolDispatch, ToolSet, async_tool_names
from rubricgym.core.episode import EpisodeViews
from rubricgym.core.parsing import (
    argument_rules,
    call_error,
    clean_call,
    clean_text,
    format_parse_error,
    parse_tool_call,
)
from rubricgym.core.record import StepRecord
from rubricgym.core.text import UnicodeText, truncate
from rubricgym.core.tools import ToolError, ToolOutput, tool_prompt
from rubricgym.core.types import (
    Action,
    Message,
    Observation,
    Outcome,
    Task,
    ToolCall,
    ToolSpec,
)

# ToolError, ToolOutput, UnicodeText and truncate live in core.tools / core.text and stay importable from here
__all__ = ["PendingStep", "RubricEnv", "ToolError", "ToolOutput", "UnicodeText", "truncate"]


@dataclass(slots=True)
class PendingStep:
    """One step between parsing and recording: the action as the step records it, the call to run when it is valid,
    and, once the call ran, its output.

    A dataclass rather than a ``NamedTuple``: ``out`` is filled in after the tool runs (by ``call_tool`` in a
    synchronous step, ``acall_tool`` in an awaited one), and a record that is not a tuple cannot be unpacked or
    indexed by position by mistake. Every reader takes its fields by name; its one maker (``_parse``) passes them
    in field order, since a class called with keywords builds a dict per call (about 3% of a toy step)."""

    started: float
    """``perf_counter()`` when the step began: the step's ``duration_s`` counts from here."""
    tools: list[ToolSpec]
    """The tools the action was validated against (recorded on the step's observation)."""
    text: str
    """The agent's text as recorded: a ``str``, lone surrogates replaced, at most ``max_action_chars``."""
    sent: ToolCall | None
    """The call the agent sent, recorded even when it is invalid."""
    call: ToolCall | None
    """The call to run: ``sent`` when it parsed and passed the tools' schemas, else ``None``."""
    parse_error: str | None
    """Why the action is malformed (no call, bad JSON, a schema error), else ``None``."""
    structured: bool
    """Whether the call came as a structured chat tool call rather than in the text."""
    out: ToolOutput | None = None
    """What the call gave once it ran (``None`` while it has not, and for a malformed action)."""


class RubricEnv(EpisodeViews, ToolDispatch, EnvDeclarations, gymnasium.Env[str, str], metaclass=ABCMeta):
    """Base class of every rubricgym env.

    Subclasses set ``env_id`` and ``stages``, declare their tools as ``@tool`` methods, implement
    ``sample_task``, and declare ``check_set``, ``rubric_file``, ``scripted_agents`` and the rest of
    ``EnvDeclarations`` (``core.declarations``); they may override ``begin``, ``stage_of``, ``system_prompt`` and
    ``summary``, and wrap tool calls by overriding ``call_tool`` or ``acall_tool`` (``ToolDispatch`` says which).

    Both faces run the same step: ``step`` and ``step_typed`` run the tool call through ``call_tool``;
    ``astep_typed`` awaits an ``async def`` tool's call through ``acall_tool`` and runs any other call through
    ``call_tool``. An env with no ``async def`` tool has nothing to await, so its ``astep_typed`` is its
    ``step_typed``, and an override of ``step_typed`` holds under both faces; an env with ``async def`` tools that
    overrides ``step_typed`` overrides ``astep_typed`` too.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012  (Gymnasium declares it so)
    env_id: str = ""  # set on the class; an instance may name itself (the bring-your-own web env does)
    stages: ClassVar[tuple[str, ...]] = ()
    default_max_steps: ClassVar[int] = 10
    max_observation_chars: ClassVar[int] = 8000
    max_action_chars: ClassVar[int] = 32_000
    tool_timeout_s: float | None = None
    """Seconds an ``async def`` tool call may run under ``astep_typed`` before it is cancelled; the agent then sees
    a timeout error and the episode goes on (``None``: no limit). Set on an instance by whoever runs it (the
    trainer's ``env.tool_timeout_s``). Synchronous tools are not interrupted: a slow tool should be ``async def``."""
    announce_steps: bool = False
    """Whether each observation ends with how many steps are left (``[2 of 4 steps left]``), so an agent can plan to
    its step limit; an env that takes it as a constructor argument sets it on the instance."""
    tool_limiter: asyncio.Semaphore | None = None
    """A semaphore shared by the envs of a run: at most its value of their ``async def`` tool calls run at once
    under ``astep_typed`` (sandboxes, browsers, judges), whatever the generation's concurrency (``None``: no cap)."""

    def __init__(self, max_steps: int | None = None, render_mode: str | None = None):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} not supported; use one of {self.metadata['render_modes']}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps or self.default_max_steps
        self.render_mode = render_mode
        # the initial observation holds system prompt + task, so allow twice the per-step budget
        self.observation_space = UnicodeText(max_length=2 * self.max_observation_chars + 20_000)
        self.action_space = UnicodeText(max_length=self.max_action_chars)
        self._task: Task | None = None
        self._task_id: str | None = None  # the task's id, read per step without a pydantic attribute lookup
        self._system = ""
        self._records: list[StepRecord] = []
        self._stage: str | None = None
        self._done = False
        self._outcome: Outcome | None = None  # built on first use (``outcome``)
        self._seed: int | None = None
        self._env_key = uuid.uuid4().hex[:12]
        self._episodes = 0
        self._toolset: ToolSet | None = None

    # ---- hooks for subclasses ---------------------------------------------------------------------------

    @abstractmethod
    def sample_task(self, rng: np.random.Generator, split: str = "train") -> Task:
        """A task drawn with ``rng``; used by ``reset`` when no task is given and by ``task_set``."""

    @classmethod
    def is_async(cls) -> bool:
        """Whether a step awaits I/O (an ``async def`` tool, or an ``astep_typed`` of its own): callers on an event
        loop (rollouts, the server) should ``await astep_typed`` rather than block in ``step_typed``."""
        return cls.astep_typed is not RubricEnv.astep_typed or bool(async_tool_names(cls))

    def begin(self, task: Task) -> None:
        """Prepare episode state for ``task`` (called by ``reset`` before the first observation)."""

    def stage_of(self, call: ToolCall | None) -> str:
        """The stage label of a step that made ``call`` (``None`` for a malformed action)."""
        return self._stage or (self.stages[0] if self.stages else "act")

    def system_prompt(self) -> str:
        """Instructions shown before the task: the tools and how to call them.

        Built once per tool list and reused across episodes: task-specific text belongs in ``Task.prompt``.
        """
        return tool_prompt(self.tools())

    # ---- task sets --------------------------------------------------------------------------------------

    def task_origin(self, task: Task) -> str:
        """Where ``task`` came from, for messages to the person who owns the data (a check's report, a loader
        error): ``""`` for generated tasks; an env that loads a user's file names the record (its own id and
        ``FILE:LINE``), since task ids may be opaque on purpose. Never shown to the agent."""
        return ""

    def task_set(self, n: int, seed: int = 0, split: str = "train") -> list[Task]:
        """``n`` tasks of ``split``, deterministic in ``seed`` (task i uses its own child seed)."""
        seeds = np.random.SeedSequence([seed, _split_key(split)]).spawn(n)
        return [self.sample_task(np.random.default_rng(s), split) for s in seeds]

    # ---- Gymnasium face ---------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        task = self._begin(seed, options.get("task") if options else None)
        return f"{self._system}\n\n{task.prompt}", {"stage": self._stage, "step": 0, "task_id": self._task_id}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        rec = self._advance(action)
        out = rec.out
        info = {
            "stage": rec.stage,
            "step": rec.index + 1,
            "task_id": self._task_id,
            "parse_error": rec.parse_error,
            "tool_error": out.error,
            "details": self.public_details(out.info),
        }
        return rec.reply, out.reward, out.done, rec.truncated, info

    def public_details(self, info: Mapping[str, Any]) -> dict[str, Any]:
        """The part of a step's ``info`` the agent may see: the keys in ``public_info_keys``, nothing else."""
        keys = self.public_info_keys
        if not keys or not info:
            return {}
        if info.keys() <= keys:  # all of it is public: a copy, so the agent's dict is not the record
            return info.copy() if type(info) is dict else dict(info)
        return {k: info[k] for k in keys if k in info}

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        return "\n".join(f"[{m.role}] {m.content or ''}" for m in self.messages)

    # ---- typed face -------------------------------------------------------------------------------------

    def reset_typed(self, seed: int | None = None, task: Task | dict[str, Any] | None = None) -> Observation:
        """Start an episode of ``task`` (a ``Task`` or its dict) or of a task drawn with ``seed``."""
        self._begin(seed, task)
        return Observation(messages=self._head(), stage=self._stage, tools=self.tools())

    def step_typed(self, action: Action | str | Message) -> Observation:
        """Apply one agent output. Malformed actions yield an explanatory observation, never an exception."""
        return self._advance(**_action_fields(action)).materialise()[0].observation

    async def astep_typed(self, action: Action | str | Message) -> Observation:
        """``step_typed`` for callers on an event loop: a call of an ``async def`` tool is awaited through
        ``acall_tool`` (on the env's loop, within ``tool_limiter`` and ``tool_timeout_s``) instead of blocking; any
        other call runs through ``call_tool``. An env with no ``async def`` tool steps with ``step_typed``."""
        awaited = async_tool_names(type(self))
        if not awaited:  # nothing to await: the synchronous step (and an override of it) is the step
            return self.step_typed(action)
        pending = self._parse(**_action_fields(action))
        call = pending.call
        if call is not None:
            pending.out = await self._await_tool(call) if call.name in awaited else self._run_tool(call)
        return self._finish_step(pending).materialise()[0].observation

    # ---- the step ---------------------------------------------------------------------------------------

    def _begin(self, seed: int | None, task: Task | dict[str, Any] | None) -> Task:
        if seed is not None:  # Gymnasium's reset only (re)seeds np_random, and only when given a seed
            super().reset(seed=seed)
        self._seed = seed
        if task is None:
            task = self.sample_task(self.np_random)
        elif type(task) is Task:  # the usual case, one identity check
            pass
        elif isinstance(task, dict):
            task = Task.model_validate(task)
        elif not isinstance(task, Task):
            raise TypeError(f"options['task'] must be a Task or a dict, got {type(task).__name__}")
        env_id = self.env_id  # class attributes read through the instance are slow lookups: once each
        if env_id and task.env_id != env_id:
            raise ValueError(f"task {task.id!r} is for env {task.env_id!r}, not {env_id!r}")
        self._task = task
        self._task_id = task.id
        self._episodes += 1
        self._records = []
        self._done = False
        self._outcome = None
        stages = self.stages
        self._stage = stages[0] if stages else None
        self.begin(task)
        self._system = self._system_text()
        return self._task  # begin() may replace it (a GUI env puts the first page into the prompt)

    def _head(self) -> list[Message]:
        """The episode's first messages: the system prompt and the task."""
        prompt = self._task.prompt if self._task else ""
        return [Message(role="system", content=self._system), Message(role="user", content=prompt)]

    def _system_text(self) -> str:
        toolset = self._tools_now()
        if toolset.prompt is None:
            toolset.prompt = self.system_prompt()
        return toolset.prompt

    def _tools_now(self) -> ToolSet:
        """The current tools (``tools()``, asked at every step) with their validation rules and system prompt.

        Rebuilt only when the ToolSpecs change: the set is kept while ``tools()`` returns the same list object (the
        base does) or a list of the same ToolSpec objects (a changed schema is a new ToolSpec: a spec is never
        edited in place once an env has handed it out)."""
        tools = self.tools()
        toolset = self._toolset
        if toolset is None or toolset.tools is not tools:
            if toolset is None or not _same_specs(toolset.tools, tools):
                toolset = self._toolset = ToolSet(tools, argument_rules(tools))
            else:
                toolset.tools = tools  # the same specs in a new list: the next step's check is one identity test
        return toolset

    def _advance(
        self, text: Any, *, call: ToolCall | None = None, parse_error: str | None = None, structured: bool = False
    ) -> StepRecord:
        """The synchronous step: parse and validate the action, run its call through ``call_tool``, record it."""
        pending = self._parse(text, call, parse_error, structured)
        if pending.call is not None:
            pending.out = self._run_tool(pending.call)
        return self._finish_step(pending)

    def _run_tool(self, call: ToolCall) -> ToolOutput:
        """``call_tool(call)``; a ``ToolError`` becomes the output that tells the agent what went wrong."""
        try:
            return self.call_tool(call)
        except ToolError as e:
            return _tool_error(call, e)

    async def _await_tool(self, call: ToolCall) -> ToolOutput:
        """``acall_tool(call)`` on the env's loop within ``tool_limiter`` and ``tool_timeout_s``; a ``ToolError``
        or the timeout becomes the output that tells the agent what went wrong."""
        timeout_s = self.tool_timeout_s
        try:
            if self.tool_limiter is None and timeout_s is None:
                return await self.arun_async(self.acall_tool(call))
            async with self.tool_limiter or contextlib.nullcontext():
                try:
                    async with asyncio.timeout(timeout_s) as deadline:
                        return await self.arun_async(self.acall_tool(call))
                except TimeoutError:
                    if not deadline.expired():
                        raise  # the tool's own TimeoutError, not ours
        except ToolError as e:
            return _tool_error(call, e)
        msg = f"timed out after {timeout_s:g} s and was stopped"
        return ToolOutput(
            text=f"Error from {call.name}: {msg}. Try a quicker call (a narrower command or query).",
            error=msg,
            info={"timed_out": True},
        )

    def _parse(
        self, text: Any, call: ToolCall | None = None, parse_error: str | None = None, structured: bool = False
    ) -> PendingStep:
        """An agent output as a step about to run: parsed, and its call validated against the current tools."""
        if self._task is None or self._done:
            raise RuntimeError(
                "call reset() before step()"
                if self._task is None
                else "the episode is over (terminated or truncated): call reset() to start another"
            )
        started = perf_counter()
        toolset = self._tools_now()
        if type(text) is not str or call is not None or not text.isascii() or len(text) > self.max_action_chars:
            text, call, parse_error = self._normalise(text, call, parse_error)
        if call is None and parse_error is None:
            parsed = parse_tool_call(text)
            if isinstance(parsed, str):
                parse_error = parsed
            else:
                call = parsed
        if call is not None and parse_error is None:
            parse_error = call_error(call.name, call.arguments, toolset.tools, toolset.rules)
        valid = call if parse_error is None else None
        return PendingStep(started, toolset.tools, text, call, valid, parse_error, structured)  # fields in order

    def _normalise(
        self, text: Any, call: ToolCall | None, parse_error: str | None
    ) -> tuple[str, ToolCall | None, str | None]:
        """An action as a step records it: text (``str``, lone surrogates replaced, at most ``max_action_chars``), the
        given call with lone surrogates replaced, and the parse error a non-text output is."""
        if not isinstance(text, str):
            text, parse_error = str(text), f"agent output must be text, got {type(text).__name__}"
        if not text.isascii():  # no lone surrogates past here (ASCII text has none)
            text = clean_text(text)
        if call is not None:
            call = clean_call(call)
        if len(text) > self.max_action_chars:
            text = truncate(text, self.max_action_chars)
        return text, call, parse_error

    def _finish_step(self, pending: PendingStep) -> StepRecord:
        """Label, truncate and record a step (a malformed action's output is the parse error and how to call)."""
        tools = pending.tools
        out = pending.out
        if out is None:
            out = ToolOutput(text=format_parse_error(pending.parse_error or "no tool call found", tools))
        stage = self._stage = self.stage_of(pending.call)
        index = len(self._records)
        truncated = not out.done and index + 1 >= self.max_steps
        reply = out.text
        if len(reply) > self.max_observation_chars:
            reply = truncate(reply, self.max_observation_chars)
        if truncated:
            reply += f"\n\nStep limit reached ({self.max_steps} steps): the episode is over."
        elif self.announce_steps and not out.done:
            left = self.max_steps - index - 1
            reply += f"\n\n[{left} of {self.max_steps} steps left{': the next call is your last' if left == 1 else ''}]"
        rec = StepRecord(
            index=index,
            stage=stage,
            text=pending.text,
            call=pending.sent,
            parse_error=pending.parse_error,
            structured=pending.structured,
            out=out,
            reply=reply,
            truncated=truncated,
            duration_s=perf_counter() - pending.started,
            tools=tools,
        )
        self._records.append(rec)
        if out.done or truncated:
            self._done = True
            self._outcome = None  # built on first use: summary() may be costly and Gymnasium users never read it
        return rec

    async def aclose(self) -> None:
        """Async ``close`` (rollouts close the envs they make with it); envs holding async resources override it."""
        await asyncio.to_thread(self.close)


def _action_fields(action: Action | str | Message) -> dict[str, Any]:
    """``_parse``'s arguments for an agent output (an ``Action``, a chat ``Message`` or raw text)."""
    if isinstance(action, Action):
        return {
            "text": action.text,
            "call": action.tool_call,
            "parse_error": action.parse_error,
            "structured": action.structured,
        }
    if isinstance(action, Message) and action.tool_calls:
        return {"text": action.content or "", "call": action.tool_calls[0], "structured": True}
    return {"text": action.content or "" if isinstance(action, Message) else action}


def _same_specs(a: list[ToolSpec], b: list[ToolSpec]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _tool_error(call: ToolCall, e: ToolError) -> ToolOutput:
    return ToolOutput(text=f"Error from {call.name}: {e}", error=str(e))


def _split_key(split: str) -> int:
    return int.from_bytes(split.encode()[:8].ljust(8, b"\0"), "little")
