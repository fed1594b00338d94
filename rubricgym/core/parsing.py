"""Parse tool calls out of model text, in the formats models actually emit.

Accepted, in order of precedence:

1. structured tool calls from an OpenAI-compatible API (a ``Message`` with ``tool_calls``);
2. ``<tool_call>{...}</tool_call>`` blocks (Hermes, Qwen, SmolLM);
3. fenced JSON (```` ```json {...} ``` ````);
4. a bare OpenAI-style JSON object anywhere in the text.

A JSON call is ``{"name": ..., "arguments": {...}}``; ``{"function": {"name", "arguments"}}`` and
``{"tool": ..., "args"/"parameters": ...}`` are accepted too, and ``arguments`` may itself be a JSON string (as
in OpenAI's wire format). Parsing never raises: failures come back as ``Action.parse_error`` with a message an
agent can act on.
"""

from __future__ import annotations

import json
import re
from typing import Any

from rubricgym.core.types import Action, Message, ToolCall, ToolSpec, json_type

_TOOL_CALL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(.*?)```", re.DOTALL)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")


def _json_objects(text: str) -> list[tuple[int, Any]]:
    """Every top-level JSON object in ``text`` (with its start offset), found by a raw decoder scan."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        found.append((i, obj))
        i = text.find("{", end)
    return found


def _call_from_obj(obj: Any) -> ToolCall | str:
    """A ``ToolCall`` from a decoded JSON value, or a reason it is not one."""
    if not isinstance(obj, dict):
        return f"expected a JSON object with 'name' and 'arguments', got {type(obj).__name__}"
    if isinstance(obj.get("function"), dict):  # OpenAI wire shape {"type": "function", "function": {...}}
        obj = obj["function"]
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None:
        return "the JSON object has no 'name' field naming the tool"
    args: Any = next((obj[k] for k in _ARG_KEYS if k in obj), {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            return f"'arguments' of {name!r} is a string that is not valid JSON ({e.msg})"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return f"'arguments' of {name!r} must be a JSON object, got {type(args).__name__}"
    return ToolCall(name=name, arguments=args)


def _from_text(text: str) -> ToolCall | str:
    tagged = _TOOL_CALL_TAG.findall(text)
    if tagged:
        body = tagged[0].strip()
        if not body:
            return "the <tool_call> block is empty"
        objs = _json_objects(body)
        if not objs:
            return "the <tool_call> block does not contain a valid JSON object (check quotes and braces)"
        return _call_from_obj(objs[0][1])
    candidates: list[Any] = []
    for block in _FENCE.findall(text):
        candidates.extend(obj for _, obj in _json_objects(block))
    candidates.extend(obj for _, obj in _json_objects(text))
    reasons: list[str] = []
    for obj in candidates:
        call = _call_from_obj(obj)
        if isinstance(call, ToolCall):
            return call
        reasons.append(call)
    if reasons:
        return reasons[0]
    if "{" in text:
        return "found a '{' but no complete JSON object (check quotes, commas and closing braces)"
    return "no tool call found"


def parse_action(output: str | Message, tools: list[ToolSpec] | None = None) -> Action:
    """Parse one agent output into an ``Action``; validates the tool name and required arguments.

    Never raises: a malformed call yields an ``Action`` whose ``parse_error`` says what was wrong.
    """
    if isinstance(output, Message):
        text = output.content or ""
        if output.tool_calls:
            call = output.tool_calls[0]
            return validate_action(Action(text=text, tool_call=call, structured=True), tools)
        output = text
    if not isinstance(output, str):
        return Action(text=str(output), parse_error=f"agent output must be text, got {type(output).__name__}")
    result = _from_text(output)
    if isinstance(result, str):
        return Action(text=output, parse_error=result)
    return validate_action(Action(text=output, tool_call=result), tools)


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _is_json_type(value: Any, kind: str) -> bool:
    if kind not in _JSON_TYPES:
        return True  # "null" or an unknown keyword: leave it to the tool
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES[kind])


def validate_action(action: Action, tools: list[ToolSpec] | None) -> Action:
    """``action`` with ``parse_error`` set if its call names an unknown tool or breaks the tool's schema."""
    if tools is None or action.tool_call is None:
        return action
    call = action.tool_call
    spec = next((t for t in tools if t.name == call.name), None)
    if spec is None:
        names = ", ".join(t.name for t in tools) or "(none)"
        return action.model_copy(update={"parse_error": f"unknown tool {call.name!r}; available tools: {names}"})
    props: dict[str, Any] = spec.parameters.get("properties", {})
    missing = [k for k in spec.parameters.get("required", []) if k not in call.arguments]
    if missing:
        return action.model_copy(
            update={"parse_error": f"tool {call.name!r} is missing required argument(s): {', '.join(missing)}"}
        )
    if spec.parameters.get("additionalProperties") is False:
        extra = [k for k in call.arguments if k not in props]
        if extra:
            return action.model_copy(
                update={"parse_error": f"tool {call.name!r} got unknown argument(s): {', '.join(extra)}"}
            )
    for key, value in call.arguments.items():
        if key not in props or "type" not in props[key]:
            continue
        kinds = json_type(props[key])
        if not any(_is_json_type(value, k) for k in kinds):
            return action.model_copy(
                update={
                    "parse_error": f"argument {key!r} of tool {call.name!r} must be {' or '.join(kinds)}, "
                    f"got {type(value).__name__} ({json.dumps(value)[:40]})"
                }
            )
    return action


def format_parse_error(error: str, tools: list[ToolSpec]) -> str:
    """The observation an agent gets after a malformed action: what was wrong and a correct call."""
    lines = [f"Invalid action: {error}.", "Call exactly one tool per turn, like this:"]
    lines += [f"  {t.example_call()}" for t in tools[:4]]
    return "\n".join(lines)
