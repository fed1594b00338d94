"""``ToolDispatch``: an env's tools, the ``@tool`` methods it declares, and running one validated call of them.

A base of ``RubricEnv``. A call runs the method of its name with the call's arguments (a ``Literal`` argument's
value checked first); an ``async def`` tool is awaited on the env's loop (``tool_loop``: ``None`` for the
caller's loop, or a fresh one under a synchronous step), through the one bridge in ``core.aio``. A plain ``def``
tool that returns a coroutine is the env author's bug: a ``TypeError``.
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
        """The tools available in the current episode: by default the ones declared with ``@tool``.

        An env whose tools change per episode overrides this (``self.tool_specs()`` has them by name); return the
        same list object while the tools do not change.
        """
        cls: type = type(self)
        return _declared_specs(cls)

    def tool_specs(self) -> dict[str, ToolSpec]:
        """The declared tools' specs by name."""
        return {name: bound.spec for name, bound in declared_tools(type(self)).items()}

    def call_tool(self, call: ToolCall) -> ToolOutput:
        """Run one validated tool call: by default the ``@tool`` method of that name.

        The method gets the call's arguments as keyword arguments and returns a ``ToolOutput`` or plain text; it
        raises ``ToolError`` for a bad argument value. An ``async def`` tool runs to completion on the env's loop
        (through ``acall_tool``), so the synchronous Gymnasium ``step`` can call every tool.
        """
        bound = self._bound(call)
        if bound.is_async:
            return self.run_async(self.acall_tool(call))
        result = getattr(self, bound.method)(**call.arguments)
        return result if type(result) is ToolOutput else self._output(call, result)

    async def acall_tool(self, call: ToolCall) -> ToolOutput:
        """``call_tool`` for ``astep_typed``: awaits an ``async def`` tool (on the env's loop). An env that wraps
        its async tools (a sandbox check, grading after the last step) overrides this; ``call_tool`` runs it."""
        bound = self._bound(call)
        if not bound.is_async:
            return self.call_tool(call)
        return self._output(call, await getattr(self, bound.method)(**call.arguments))

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


@dataclass(slots=True)
class _Tooling:
    """The tools of the moment, their validation rules and the system prompt built from them; ``fixed`` when they
    are the class's declared tools (the base ``tools()``), which never change."""

    tools: list[ToolSpec]
    rules: dict[str, ArgumentRules]
    direct: dict[str, str]
    """Tool name -> method name of the tools a synchronous step calls itself (``_direct_methods``)."""
    fixed: bool
    prompt: str | None = None


def _direct_methods(env: ToolDispatch) -> dict[str, str]:
    """Tool name -> method name of the declared tools whose call through the base ``call_tool`` is just the method
    call (synchronous, no ``Literal`` argument to check), so a step makes it without ``call_tool``'s lookups
    (``RubricEnv._advance``; kept beside ``call_tool``, whose body it stands for).
    Empty when the env runs its calls its own way (its own ``call_tool`` or ``_bound``)."""
    cls = type(env)
    if cls.call_tool is not ToolDispatch.call_tool or cls._bound is not ToolDispatch._bound or "call_tool" in vars(env):
        return {}
    return {name: b.method for name, b in declared_tools(cls).items() if not b.is_async and not b.enums}
