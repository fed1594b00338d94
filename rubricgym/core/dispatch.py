"""``ToolDispatch``: an env's tools, the ``@tool`` methods it declares, and running one validated call of them.

A base of ``RubricEnv``. A call runs the method of its name with the call's arguments (a ``Literal`` argument's
value checked first); an ``async def`` tool is awaited on the env's loop (``tool_loop``: ``None`` for the
caller's loop, or a fresh one under a synchronous step), through the one bridge in ``core.aio``. A plain ``def``
tool that returns a coroutine is the env author's bug: a ``TypeError``.

Which method a step runs, and so which one an env overrides:

- the synchronous step (``step``, ``step_typed``) runs every call through ``call_tool``; the base ``call_tool``
  runs an ``async def`` tool through ``acall_tool`` (to completion, on the env's loop);
- the awaited step (``astep_typed``) runs a call of an ``async def`` tool through ``acall_tool`` and any other
  call through ``call_tool``; the base ``acall_tool`` hands a call of any other tool to ``call_tool``.

So an env that wraps the calls of its plain ``def`` tools, or serves tools it declares no method for (a bridge to
another env), overrides ``call_tool``; an env with ``async def`` tools that wraps their calls (a sandbox check,
grading after the last step) overrides ``acall_tool``, and both faces run the wrap (``call_tool`` of such an env
runs it). A ``call_tool`` override also sees async calls under the synchronous step, never under ``astep_typed``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from rubricgym.core.aio import arun_on, run_on
from rubricgym.core.parsing import ArgumentRules
from rubricgym.core.tools import BoundTool, ToolError, ToolOutput, check_enums, declared_tools
from rubricgym.core.types import ToolCall, ToolSpec

T = TypeVar("T")


class ToolDispatch:
    """The tools of a ``RubricEnv`` and how one call of them runs (see the module doc)."""

    def tools(self) -> list[ToolSpec]:
        """The tools available now: by default the ones declared with ``@tool`` (one list object per class).

        Asked at every step. An env whose tools change per episode overrides this (``self.tool_specs()`` has them
        by name); return the same list object while the tools do not change (the step keeps their validation
        rules and system prompt until the ToolSpecs differ), and build a new ToolSpec rather than edit one.
        """
        cls: type = type(self)
        return _declared_specs(cls)

    def tool_specs(self) -> dict[str, ToolSpec]:
        """The declared tools' specs by name."""
        return {name: bound.spec for name, bound in declared_tools(type(self)).items()}

    def call_tool(self, call: ToolCall) -> ToolOutput:
        """Run one validated tool call: the synchronous step runs every call through it.

        The base runs the ``@tool`` method of that name with the call's arguments as keyword arguments; the method
        returns a ``ToolOutput`` or plain text and raises ``ToolError`` for a bad argument value. An ``async def``
        tool runs through ``acall_tool``, to completion on the env's loop, so the synchronous Gymnasium ``step`` can
        call every tool. Override it to wrap the calls of plain ``def`` tools or to serve tools without ``@tool``
        methods (see the module doc for the rule with ``acall_tool``).
        """
        bound = self._bound(call)
        if bound.is_async:
            return self.run_async(self.acall_tool(call))
        result = getattr(self, bound.method)(**call.arguments)
        return result if type(result) is ToolOutput else self._output(call, result)

    async def acall_tool(self, call: ToolCall) -> ToolOutput:
        """Run one validated call of an ``async def`` tool, awaited: ``astep_typed`` awaits such calls through it,
        and the base ``call_tool`` runs them through it, so an env that wraps its async tools' calls (a sandbox
        check, grading after the last step) overrides this and both faces run the wrap. The base awaits the
        ``@tool`` method; a call of any other tool goes to ``call_tool``."""
        bound = declared_tools(type(self)).get(call.name)
        if bound is None or not bound.is_async:  # a plain def tool, or a tool the env serves itself
            return self.call_tool(call)
        method = self._bound(call).method  # checks the call's Literal arguments
        return self._output(call, await getattr(self, method)(**call.arguments))

    def _bound(self, call: ToolCall) -> BoundTool:
        bound = declared_tools(type(self)).get(call.name)
        if bound is None:  # the env advertised a tool it has no code for: its author's mistake, not the agent's
            raise TypeError(
                f"{type(self).__name__} has no @tool named {call.name!r}: declare it with @tool or override call_tool"
            )
        if bound.enums:
            problem = check_enums(bound, call.arguments)
            if problem is not None:
                raise ToolError(problem)
        return bound

    def _output(self, call: ToolCall, result: Any) -> ToolOutput:
        if isinstance(result, ToolOutput):
            return result
        if inspect.isawaitable(result):  # a plain def returned a coroutine: nobody would ever run it
            if inspect.iscoroutine(result):
                result.close()
            raise TypeError(
                f"{type(self).__name__}'s tool {call.name!r} returned an un-awaited {type(result).__name__}: declare "
                f"the method `async def` (steps await async tools) or await inside it"
            )
        return ToolOutput(text=str(result))

    @property
    def tool_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the env's async tools and resources live on. ``None`` (default): the caller's loop under
        ``astep_typed``, a fresh one under ``step``. An env whose resources are bound to a loop running in its
        own thread (a browser pool's) returns that loop."""
        return None

    def run_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to completion on the env's loop from synchronous code (``begin``, ``close``, ``step``)."""
        return run_on(self.tool_loop, coro)

    async def arun_async(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the env's loop from the caller's loop."""
        return await arun_on(self.tool_loop, coro)


@functools.cache
def _declared_specs(cls: type) -> list[ToolSpec]:
    """One list object per class, so the env's per-step tool lookup stays an identity check."""
    return [bound.spec for bound in declared_tools(cls).values()]


@functools.cache
def async_tool_names(cls: type) -> frozenset[str]:
    """The names of the ``async def`` tools ``cls`` declares (empty: a step has nothing to await)."""
    return frozenset(name for name, bound in declared_tools(cls).items() if bound.is_async)


@dataclass(slots=True)
class ToolSet:
    """The tools of the moment, their validation rules and the system prompt built from them (``RubricEnv``
    rebuilds it when ``tools()`` hands out other ToolSpecs)."""

    tools: list[ToolSpec]
    rules: dict[str, ArgumentRules]
    prompt: str | None = None
