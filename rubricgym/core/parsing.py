"""Parse tool calls out of model text, in the formats models actually emit.

Accepted, in order of precedence:

1. structured tool calls from an OpenAI-compatible API (a ``Message`` with ``tool_calls``);
2. ``<tool_call>{...}</tool_call>`` blocks (Hermes, Qwen, SmolLM);
3. fenced JSON (```` ```json {...} ``` ````);
4. a bare OpenAI-style JSON object anywhere in the text.

A JSON call is ``{"name": ..., "arguments": {...}}``; ``{"function": {"name", "arguments"}}`` and
``{"tool": ..., "args"/"parameters": ...}`` are accepted too, and ``arguments`` may itself be a JSON string (as
in OpenAI's wire format). Parsing never raises: failures come back as ``Action.parse_error`` with a message an
agent can act on. Lone UTF-16 surrogates (a model emitting the JSON escape ``"\ud83d"``) are replaced by U+FFFD
here, at the boundary, so no tool, store or serialiser downstream ever sees text that is not valid Unicode.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from rubricgym.core.types import Action, Message, ToolCall, ToolSpec, json_type

_FENCE = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(.*?)```", re.DOTALL)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")


_DECODER = json.JSONDecoder()
ParsedCall = tuple[str, dict[str, Any]]
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (it cannot be encoded, stored or sent)."""
    if text.isascii():  # surrogates are not ASCII: the common case costs no regex scan
        return text
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _decodes_clean(source: str) -> bool:
    """Whether every string JSON-decoded from ``source`` is free of lone surrogates without a scan: ``source``
    has none and no ``\\u`` escape (the only way JSON writes a character that is not in its text)."""
    return "\\u" not in source and (source.isascii() or _SURROGATE.search(source) is None)


def clean_value(value: Any) -> Any:
    """A decoded JSON value with ``clean_text`` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_value(v) for v in value]
    return value


def clean_call(call: ToolCall) -> ToolCall:
    """``call`` with lone surrogates replaced in its name and arguments (the same object when there are none)."""
    name, args = clean_text(call.name), clean_value(call.arguments)
    return (
        call
        if name == call.name and args == call.arguments
        else call.model_copy(update={"name": name, "arguments": args})
    )


def _json_objects(text: str, limit: int | None = None) -> list[tuple[int, Any]]:
    """The top-level JSON objects in ``text`` (at most ``limit``) with their offsets, by a raw decoder scan."""
    found: list[tuple[int, Any]] = []
    i = text.find("{")
    while i != -1 and (limit is None or len(found) < limit):
        try:
            obj, end = _DECODER.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        found.append((i, obj))
        i = text.find("{", end)
    return found


def _call_from_obj(obj: Any, clean: bool = True) -> ParsedCall | str:
    """``(name, arguments)`` from a decoded JSON value, or a reason it is not one. ``clean=False`` when the
    value's strings are known to hold no lone surrogate (``_decodes_clean`` of its source)."""
    if not isinstance(obj, dict):
        return f"expected a JSON object with 'name' and 'arguments', got {type(obj).__name__}"
    name, args = obj.get("name"), obj.get("arguments")
    if isinstance(name, str) and isinstance(args, dict):  # the common shape: nothing to normalise
        return (clean_text(name), clean_value(args)) if clean else (name, args)
    if isinstance(obj.get("function"), dict):  # OpenAI wire shape {"type": "function", "function": {...}}
        obj = obj["function"]
    name = next((obj[k] for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name is None:
        return "the JSON object has no 'name' field naming the tool"
    args = next((obj[k] for k in _ARG_KEYS if k in obj), {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as e:
            return f"'arguments' of {name!r} is a string that is not valid JSON ({e.msg})"
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return f"'arguments' of {name!r} must be a JSON object, got {type(args).__name__}"
    return clean_text(name), clean_value(args)


def _tool_call_body(text: str) -> str | None:
    """The stripped text of the first ``<tool_call>`` block (to the end of ``text`` when the model hit a stop
    before closing it), or ``None`` when there is no such tag."""
    start = text.find("<tool_call>")
    if start == -1:
        return None
    start += len("<tool_call>")
    end = text.find("</tool_call>", start)
    return text[start : end if end != -1 else len(text)].strip()


_CALL_FROM_JSON = ToolCall.__pydantic_validator__.validate_json
"""``ToolCall.model_validate_json`` less its Python wrapper, looked up once (pydantic's metaclass makes each
lookup of a class attribute cost about as much as a short function call)."""


def parse_tool_call(text: str) -> ToolCall | str:
    """``parse_call`` as a ``ToolCall`` (the step path's form). A ``<tool_call>`` block that is exactly
    ``{"name": ..., "arguments": {...}}`` is validated by pydantic straight from its JSON, one pass where decoding
    and then validating is two; any other text (other shapes, escapes that may decode to a lone surrogate, text
    around the object, an id) takes ``parse_call``, so both give the same call."""
    start = text.find("<tool_call>")
    if start != -1:  # _tool_call_body and _decodes_clean, written out: this runs on every step
        start += 11  # len("<tool_call>")
        end = text.find("</tool_call>", start)
        body = text[start : end if end != -1 else len(text)].strip()
        if body and "\\u" not in body and (body.isascii() or _SURROGATE.search(body) is None):
            try:
                call = _CALL_FROM_JSON(body)
            except ValueError:
                pass
            else:
                # an id in model text is ignored as parse_call ignores it; with no \u escape, a key "id" is in the text
                if '"id"' not in body or call.id is None:
                    return call
    parsed = parse_call(text)
    return parsed if isinstance(parsed, str) else ToolCall(name=parsed[0], arguments=parsed[1])


def parse_call(text: str) -> ParsedCall | str:
    """``(name, arguments)`` of the tool call in model text, or why there is none (see the module doc)."""
    body = _tool_call_body(text)
    if body is not None:
        if not body:
            return "the <tool_call> block is empty"
        objs = _json_objects(body, limit=1)
        if not objs:
            return "the <tool_call> block does not contain a valid JSON object (check quotes and braces)"
        return _call_from_obj(objs[0][1], clean=not _decodes_clean(body))
    candidates: list[Any] = []
    for block in _FENCE.findall(text):
        candidates.extend(obj for _, obj in _json_objects(block))
    candidates.extend(obj for _, obj in _json_objects(text))
    reasons: list[str] = []
    for obj in candidates:
        call = _call_from_obj(obj)
        if isinstance(call, tuple):
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
        text = clean_text(output.content or "")
        if output.tool_calls:
            call = clean_call(output.tool_calls[0])
            return validate_action(Action(text=text, tool_call=call, structured=True), tools)
        output = text
    if not isinstance(output, str):
        return Action(text=str(output), parse_error=f"agent output must be text, got {type(output).__name__}")
    output = clean_text(output)
    parsed = parse_tool_call(output)
    if isinstance(parsed, str):
        return Action(text=output, parse_error=parsed)
    return Action(text=output, tool_call=parsed, parse_error=call_error(parsed.name, parsed.arguments, tools))


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}
"""The Python types a decoded JSON value of each kind has. ``call_error`` passes a value whose exact type is listed
at once (``bool`` is not an ``integer`` however it subclasses ``int``); any other goes to ``_is_json_type``."""


def _is_json_type(value: Any, kind: str) -> bool:
    if kind not in _JSON_TYPES:
        return True  # an unknown keyword: leave it to the tool
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES[kind])


def validate_action(action: Action, tools: list[ToolSpec] | None) -> Action:
    """``action`` with ``parse_error`` set if its call names an unknown tool or breaks the tool's schema."""
    if action.tool_call is None:
        return action
    error = call_error(action.tool_call.name, action.tool_call.arguments, tools)
    return action if error is None else action.model_copy(update={"parse_error": error})


@dataclass(frozen=True)
class ArgumentRules:
    """A tool's argument schema reduced to what ``call_error`` checks."""

    properties: frozenset[str]
    required: tuple[str, ...]
    closed: bool
    required_declared: bool
    """Every required name is a property: then a call whose keys are exactly the properties (the usual call)
    has nothing missing and nothing extra, which one set comparison shows."""
    types: dict[str, tuple[str, ...]]
    exact: dict[str, frozenset[type]]
    """Per typed argument, the Python types that pass its ``types`` at once (``type(value) in exact``)."""


def argument_rules(tools: list[ToolSpec]) -> dict[str, ArgumentRules]:
    """Validation rules of each tool by name; compute once per tool list and pass to ``call_error``."""
    out = {}
    for t in tools:
        props = t.parameters.get("properties", {})
        types = {k: tuple(json_type(v)) for k, v in props.items() if isinstance(v, dict) and "type" in v}
        required = tuple(t.parameters.get("required", ()))
        exact = {k: frozenset(c for kind in kinds for c in _JSON_TYPES.get(kind, ())) for k, kinds in types.items()}
        declared = set(required) <= set(props)
        out[t.name] = ArgumentRules(
            properties=frozenset(props),
            required=required,
            closed=t.parameters.get("additionalProperties") is False,
            required_declared=declared,
            types=types,
            exact=exact,
        )
    return out


def call_error(
    name: str, arguments: dict[str, Any], tools: list[ToolSpec] | None, rules: dict[str, ArgumentRules] | None = None
) -> str | None:
    """Why a call of ``name`` with ``arguments`` breaks the tools' schemas, or ``None`` if it is valid."""
    if tools is None:
        return None
    rules_ = (rules if rules is not None else argument_rules(tools)).get(name)
    if rules_ is None:
        return f"unknown tool {name!r}; available tools: {', '.join(t.name for t in tools) or '(none)'}"
    if not (rules_.required_declared and arguments.keys() == rules_.properties):
        for required in rules_.required:
            if required not in arguments:
                missing = [k for k in rules_.required if k not in arguments]
                return f"tool {name!r} is missing required argument(s): {', '.join(missing)}"
        if rules_.closed and not rules_.properties.issuperset(arguments):
            extra = [k for k in arguments if k not in rules_.properties]
            return f"tool {name!r} got unknown argument(s): {', '.join(extra)}"
    exact = rules_.exact
    for key, value in arguments.items():
        allowed = exact.get(key)
        if allowed is None or type(value) in allowed:
            continue
        kinds = rules_.types[key]
        if not any(_is_json_type(value, k) for k in kinds):
            return (
                f"argument {key!r} of tool {name!r} must be {' or '.join(kinds)}, "
                f"got {type(value).__name__} ({json.dumps(value)[:40]})"
            )
    return None


def format_parse_error(error: str, tools: list[ToolSpec]) -> str:
    """The observation an agent gets after a malformed action: what was wrong and a correct call."""
    lines = [f"Invalid action: {error}.", "Call exactly one tool per turn, like this:"]
    lines += [f"  {t.example_call()}" for t in tools[:4]]
    return "\n".join(lines)
