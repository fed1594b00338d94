"""OpenAI chat-completions requests and replies as the policy sees and writes them.

A request's messages become rubricgym ``Message``s rendered by the policy's own renderer (``LocalAgent.render``,
the function the trainer's sampler uses), with the request's ``tools`` described in the system prompt exactly as
an env describes its tools (``core.tools.tool_prompt``). An assistant turn the proxy wrote comes back in a later
request as the client's parsed ``tool_calls``; it is rendered with the exact text the policy generated (looked up
by the call id the proxy issued), so the conversation's tokens extend the recorded ones instead of drifting with
a client's re-serialisation. A completion is parsed like an env parses an action (``core.parsing.parse_action``):
a tool call becomes ``tool_calls`` with ``finish_reason: "tool_calls"``, anything else plain content.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from rubricgym.core.parsing import parse_action
from rubricgym.core.tools import tool_prompt
from rubricgym.core.types import Message, ToolCall, ToolSpec


class WireError(ValueError):
    """A request the proxy cannot serve or record; ``status`` is the HTTP status, ``code`` OpenAI's error code."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.code = status, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": "invalid_request_error", "code": self.code, "param": None}}


def _text(content: Any, where: str) -> str:
    """A message's content as text: a string, or OpenAI's list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                raise WireError(f"{where}: only text content parts can be recorded, not {kind!r}")
            parts.append(part["text"])
        return "".join(parts)
    raise WireError(f"{where}: content must be a string or a list of text parts")


def tool_specs(tools: Any) -> list[ToolSpec]:
    """The request's ``tools`` (``[{"type": "function", "function": {name, description, parameters}}]``)."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise WireError("'tools' must be a list of function tools")
    out = []
    for k, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, Mapping) and t.get("type", "function") == "function" else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise WireError(f"tools[{k}]: expected {{'type': 'function', 'function': {{'name': ...}}}}")
        params = fn.get("parameters") or {"type": "object", "properties": {}}
        out.append(ToolSpec(name=fn["name"], description=str(fn.get("description") or ""), parameters=params))
    return out


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = json.loads(raw or "{}")
    except (TypeError, json.JSONDecodeError):
        raise WireError(f"{where}: 'arguments' must be a JSON object string") from None
    if not isinstance(value, dict):
        raise WireError(f"{where}: 'arguments' must be a JSON object")
    return value


def to_messages(raw: Any, tools: list[ToolSpec], written: Mapping[str, str]) -> list[Message]:
    """The request's messages as the policy reads them: the system prompt (the client's, then the tool guide
    when it sent tools), user, assistant and tool turns. ``written`` maps a tool-call id the proxy issued to the
    text the policy generated for that turn."""
    if not isinstance(raw, list) or not raw:
        raise WireError("'messages' must be a non-empty list")
    system: list[str] = []
    out: list[Message] = []
    for k, m in enumerate(raw):
        where = f"messages[{k}]"
        if not isinstance(m, Mapping):
            raise WireError(f"{where}: expected an object with a 'role'")
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(_text(m.get("content"), where))
        elif role == "user":
            out.append(Message(role="user", content=_text(m.get("content"), where)))
        elif role == "assistant":
            calls = m.get("tool_calls") or []
            ids = [c.get("id") for c in calls if isinstance(c, Mapping)]
            if calls and len(ids) == 1 and isinstance(ids[0], str) and ids[0] in written:
                out.append(Message(role="assistant", content=written[ids[0]]))
                continue
            parsed = []
            for j, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, Mapping) else None
                if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                    raise WireError(f"{where}.tool_calls[{j}]: expected {{'function': {{'name', 'arguments'}}}}")
                args = _arguments(fn.get("arguments"), f"{where}.tool_calls[{j}]")
                parsed.append(ToolCall(id=c.get("id"), name=fn["name"], arguments=args))
            out.append(
                Message(role="assistant", content=_text(m.get("content"), where) or None, tool_calls=parsed or None)
            )
        elif role == "tool":
            out.append(Message(role="tool", content=_text(m.get("content"), where), tool_call_id=m.get("tool_call_id")))
        else:
            raise WireError(f"{where}: unknown role {role!r} (system, developer, user, assistant or tool)")
    if tools:
        system.append(tool_prompt(tools))
    if system:
        out.insert(0, Message(role="system", content="\n\n".join(s for s in system if s)))
    return out


def reply_message(text: str, tools: list[ToolSpec]) -> tuple[dict[str, Any], str]:
    """The assistant message for a completion and its finish reason: a parsed tool call when the request sent
    tools and the text holds one, else the text as content. The call id is new (the key ``to_messages`` finds
    the exact text by)."""
    if tools:
        action = parse_action(text, tools)
        if action.tool_call is not None and action.parse_error is None:
            call = action.tool_call
            call_id = "call_" + uuid.uuid4().hex[:24]
            function = {"name": call.name, "arguments": json.dumps(call.arguments, ensure_ascii=False)}
            return {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }, "tool_calls"
    return {"role": "assistant", "content": text}, "stop"


def completion(model: str, message: dict[str, Any], finish: str, usage: dict[str, int]) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` object."""
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }


def chunks(model: str, message: dict[str, Any], finish: str, usage: dict[str, int]) -> list[dict[str, Any]]:
    """The same reply as ``chat.completion.chunk`` objects for a streaming client: the role, the content or the
    tool call, the finish reason (and usage)."""
    base = {"id": "chatcmpl-" + uuid.uuid4().hex, "object": "chat.completion.chunk", "created": int(time.time())}
    base["model"] = model

    def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": reason, "logprobs": None}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if message.get("tool_calls"):
        out.append(chunk({"tool_calls": [{"index": 0, **message["tool_calls"][0]}]}))
    else:
        out.append(chunk({"content": message["content"]}))
    out.append(chunk({}, finish))
    out.append({**base, "choices": [], "usage": usage})
    return out
