"""Declared tools: ``@tool`` turns a typed env method into a ``ToolSpec`` and a by-name dispatch.

As verifiers derives tools from typed functions, an env writes each tool once, as a method::

    @tool(examples={"expression": "17 * 23 - 4"})
    def calculator(self, expression: str) -> str:
        \"\"\"Evaluate an arithmetic expression.

        Args:
            expression: numbers, + - * / and parentheses
        \"\"\"

The JSON schema comes from the signature and type hints (``str``, ``int``, ``float``, ``bool``, ``list[...]``,
``dict``, ``Literal[...]`` as an enum, unions as a type list), the description from the docstring's first
paragraph and each argument's description from its Google-style ``Args:`` entry. A parameter with a default is
optional. ``RubricEnv`` lists the declared tools in definition order and calls them by name. A tool that does I/O
(a sandbox, a browser, an LLM) is an ``async def`` method: ``astep_typed`` awaits it and the synchronous ``step``
runs it to completion on the env's loop (``RubricEnv.tool_loop``).
"""

from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args, get_origin

from rubricgym.core.types import ToolSpec, json_type


@dataclass(slots=True)
class ToolOutput:
    """What running one tool call produced."""

    text: str
    done: bool = False
    answer: str | None = None
    error: str | None = None
    """Set when the call was well-formed but failed (bad argument value, unknown doc...); ``text`` explains."""
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    solved: bool | None = None
    """On the terminal call: whether the task was accomplished (``Outcome.solved``), whatever partial credit
    ``reward`` gives; ``None``: the env does not say."""


class ToolError(Exception):
    """Raised by a tool on a bad argument value; becomes an explanatory observation, never a crash."""


F = TypeVar("F", bound=Callable[..., Any])
_MARK = "__rubricgym_tool__"
_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


@dataclass(frozen=True)
class ToolDecl:
    """What ``@tool`` recorded on a method; the ``ToolSpec`` is built on first use (type hints resolved then)."""

    name: str | None
    examples: Mapping[str, Any]
    description: str | None


def tool(
    fn: F | None = None,
    *,
    name: str | None = None,
    examples: Mapping[str, Any] | None = None,
    description: str | None = None,
) -> Any:
    """Declare an env method as a tool (``@tool`` or ``@tool(name=..., examples={arg: value})``)."""

    def mark(f: F) -> F:
        setattr(f, _MARK, ToolDecl(name, dict(examples or {}), description))
        return f

    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class BoundTool:
    """A declared tool of a class: its spec, the method's name and the enum constraints to check on a call;
    ``is_async`` when the method is ``async def`` (a step awaits it)."""

    spec: ToolSpec
    method: str
    enums: Mapping[str, tuple[Any, ...]]
    is_async: bool = False


def declared_tools(cls: type) -> dict[str, BoundTool]:
    """The tools ``cls`` declares with ``@tool`` (its bases' too), by tool name in definition order."""
    cached = getattr(cls, "_declared_tools_cache", None)  # (owner, tools): a subclass must not take its base's
    if cached is not None and cached[0] is cls:
        return cached[1]
    found: dict[str, BoundTool] = {}
    for klass in reversed(cls.__mro__):
        for attr, value in vars(klass).items():
            decl = getattr(value, _MARK, None)
            if isinstance(decl, ToolDecl):
                bound = _build(value, attr, decl)
                found = {k: v for k, v in found.items() if v.method != attr}  # an override replaces its base's
                found[bound.spec.name] = bound
    cls._declared_tools_cache = (cls, found)  # type: ignore[attr-defined]
    return found


def _build(fn: Callable[..., Any], attr: str, decl: ToolDecl) -> BoundTool:
    hints = typing.get_type_hints(fn)
    doc_text, arg_docs = _parse_doc(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    enums: dict[str, tuple[Any, ...]] = {}
    for pname, param in list(inspect.signature(fn).parameters.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"@tool {fn.__qualname__}: *args/**kwargs cannot be described as a JSON schema")
        if pname not in hints:
            raise TypeError(f"@tool {fn.__qualname__}: parameter {pname!r} needs a type hint")
        schema = json_schema(hints[pname], f"{fn.__qualname__}({pname})")
        if "enum" in schema:
            enums[pname] = tuple(schema["enum"])
        if pname in arg_docs:
            schema["description"] = arg_docs[pname]
        if pname in decl.examples:
            schema["examples"] = [decl.examples[pname]]
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        elif param.default is not None:
            schema["default"] = param.default
        properties[pname] = schema
    unknown = set(decl.examples) - set(properties)
    if unknown:
        raise TypeError(f"@tool {fn.__qualname__}: examples for unknown argument(s) {sorted(unknown)}")
    description = decl.description or doc_text
    if not description:
        raise TypeError(f"@tool {fn.__qualname__}: give the tool a docstring (its first paragraph describes it)")
    parameters = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    spec = ToolSpec(name=decl.name or attr, description=description, parameters=parameters)
    return BoundTool(spec, attr, enums, inspect.iscoroutinefunction(fn))


def json_schema(hint: Any, where: str = "") -> dict[str, Any]:
    """The JSON schema of a type hint (the subset tools use); ``TypeError`` naming ``where`` otherwise."""
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is Any:
        return {}
    origin, args = get_origin(hint), get_args(hint)
    if origin is Literal:
        kinds = sorted({_SCALARS[type(a)] for a in args if type(a) in _SCALARS})
        return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        parts = [json_schema(a, where) for a in args]
        if all(set(p) == {"type"} and isinstance(p["type"], str) for p in parts):
            return {"type": [p["type"] for p in parts]}
        return {"anyOf": parts}
    if hint is list or origin is list:
        return {"type": "array", "items": json_schema(args[0], where)} if args else {"type": "array"}
    if hint is dict or origin is dict:
        return {"type": "object"}
    raise TypeError(f"{where}: type {hint!r} has no JSON schema; use str, int, float, bool, list, dict or Literal")


_ARGS_HEADER = re.compile(r"^(Args|Arguments|Parameters):\s*$")
_ARG_LINE = re.compile(r"^(\s+)(\w+)\s*(?:\([^)]*\))?:\s*(.*)$")


def _parse_doc(doc: str) -> tuple[str, dict[str, str]]:
    """A docstring's first paragraph (joined to one line) and its Google-style ``Args:`` entries by name."""
    summary = " ".join(line.strip() for line in doc.split("\n\n")[0].splitlines()).strip()
    args: dict[str, str] = {}
    lines = doc.splitlines()
    header = next((i for i, line in enumerate(lines) if _ARGS_HEADER.match(line)), None)
    if header is None:
        return summary, args
    indent: int | None = None
    current: str | None = None
    for line in lines[header + 1 :]:
        if line.strip() and not line[0].isspace():  # the next section
            break
        match = _ARG_LINE.match(line)
        if match and (indent is None or len(match.group(1)) == indent):
            indent, current = len(match.group(1)), match.group(2)
            args[current] = match.group(3).strip()
        elif current and line.strip():
            args[current] += " " + line.strip()
    return summary, args


def check_enums(bound: BoundTool, arguments: Mapping[str, Any]) -> str | None:
    """Why ``arguments`` break a ``Literal`` parameter of ``bound``, or ``None``."""
    for pname, allowed in bound.enums.items():
        if pname in arguments and arguments[pname] not in allowed:
            choices = ", ".join(repr(a) for a in allowed)
            return f"argument {pname!r} of tool {bound.spec.name!r} must be one of {choices}, got {arguments[pname]!r}"
    return None


def tool_prompt(tools: list[ToolSpec]) -> str:
    """The default system prompt: how to call a tool, each tool's signature and description, and an example turn
    per tool."""
    lines = [
        "You are an agent that solves the task by calling tools.",
        "Call exactly one tool per turn by writing a JSON object inside <tool_call></tool_call> tags:",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "Available tools:",
    ]
    for t in tools:
        props = t.parameters.get("properties", {})
        args = ", ".join(f"{k}: {'|'.join(json_type(v))}" for k, v in props.items())
        lines.append(f"- {t.name}({args}): {t.description}")
    if tools:
        lines.append("Examples of correct turns:")
        lines += [t.example_call() for t in tools]
    return "\n".join(lines)
