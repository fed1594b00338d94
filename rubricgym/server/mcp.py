"""``POST /mcp`` and ``WS /mcp``: the env's tools over MCP (JSON-RPC), served by the official ``mcp`` SDK.

The SDK's low-level ``Server`` answers ``tools/list`` and ``tools/call`` through its Streamable HTTP transport
(stateless, JSON replies: one POST, one JSON-RPC answer, no ``initialize`` needed, as OpenEnv clients expect).
Sessions follow OpenEnv's HTTP MCP extension and share ``POST /reset``'s sessions:

- ``openenv/session/create`` (params: what ``reset`` takes, ``seed``/``task_id``/``split``+``index``) opens a
  session, starts its episode and answers ``{"session_id", "observation"}``;
- ``tools/list`` lists that session's tools (``params.session_id``), or the env's tools before any episode;
- ``tools/call`` (``params.session_id``, ``name``, ``arguments``) is one step of that session with the call as
  a structured action: the same validation and errors as ``WS /ws`` (``NOT_RESET``, ``EPISODE_OVER``, a bad
  argument is an observation that says what was wrong), and the reply carries the observation text as content
  and ``{"observation", "reward", "done"}`` as structured content;
- ``openenv/session/close`` closes it (an idle one is reaped like any session).

A protocol error is a JSON-RPC error whose ``data.code`` is the ``/ws`` error code. A body that is no JSON-RPC
request at all gets a JSON-RPC error with status 200, as OpenEnv's reference server answers (``openenv validate``
probes ``/mcp`` with ``{}``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from pydantic import Field

from rubricgym import __version__
from rubricgym.core.types import ToolSpec
from rubricgym.server.protocol import ErrorCode, ProtocolError, ResetData
from rubricgym.server.session import Session

if TYPE_CHECKING:
    from rubricgym.server.app import EnvServer

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
PARSE_ERROR = -32700
SERVER_ERROR = -32000


class SessionParams(types.RequestParams):
    """Params naming the session a request acts on."""

    session_id: str | None = Field(default=None, max_length=256, alias="session_id")


class ListParams(types.PaginatedRequestParams):
    session_id: str | None = Field(default=None, max_length=256, alias="session_id")


class CallParams(types.CallToolRequestParams):
    session_id: str | None = Field(default=None, max_length=256, alias="session_id")


class CreateParams(types.RequestParams):
    """``openenv/session/create``: the episode to start (``reset``'s arguments)."""

    seed: int | None = None
    task_id: str | None = None
    split: str | None = None
    index: int | None = None
    options: dict[str, Any] | None = None
    task: dict[str, Any] | None = None


def mcp_tool(spec: ToolSpec) -> types.Tool:
    """A rubricgym tool as MCP lists it (name, description, JSON schema of its arguments)."""
    return types.Tool(name=spec.name, description=spec.description, input_schema=spec.parameters)


def _error(e: ProtocolError) -> MCPError:
    code = INVALID_PARAMS if e.code in (ErrorCode.VALIDATION_ERROR, ErrorCode.UNKNOWN_TASK) else SERVER_ERROR
    return MCPError(code, e.message, {"code": e.code.value, **e.extra})


class MCPEndpoint:
    """The ASGI app of ``POST /mcp`` for one ``EnvServer``; ``run()`` is entered in the app's lifespan."""

    def __init__(self, server: EnvServer):
        self.server = server
        self.mcp: Server[Any] = Server(f"rubricgym: {server.config.env_id}", version=__version__)
        self.mcp.add_request_handler("tools/list", ListParams, self._list_tools)
        self.mcp.add_request_handler("tools/call", CallParams, self._call_tool)
        self.mcp.add_request_handler("openenv/session/create", CreateParams, self._create)
        self.mcp.add_request_handler("openenv/session/close", SessionParams, self._close)
        self.manager = StreamableHTTPSessionManager(
            self.mcp,
            json_response=True,
            stateless=True,
            max_request_body_size=server.config.max_message_bytes,
        )

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    # ---- ASGI ---------------------------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Hand a JSON-RPC message to the SDK; answer anything else with a JSON-RPC error (status 200)."""
        if scope.get("method") != "POST":
            await self.manager.handle_request(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.server.config.max_message_bytes:
                await _reply(send, 413, _rpc_error(INVALID_REQUEST, "request body over the server's limit"))
                return
        problem = _not_jsonrpc(body)
        if problem is not None:
            await _reply(send, 200, problem)
            return
        headers = [(k, v) for k, v in scope.get("headers", []) if k not in (b"content-type", b"accept")]
        headers += [(b"content-type", b"application/json"), (b"accept", b"application/json, text/event-stream")]
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.manager.handle_request({**scope, "headers": headers}, replay, send)

    # ---- WS /mcp ------------------------------------------------------------------------------------------

    async def websocket(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """``WS /mcp``: the same JSON-RPC methods, one message in, one answer out, each handled by the SDK exactly
        as a ``POST /mcp`` body is. The connection remembers the sessions it opened: a request without
        ``params.session_id`` acts on the last of them, and they are closed when the socket closes (as OpenEnv's
        own ``/mcp`` WebSocket ties an episode to its connection)."""
        if (await receive())["type"] != "websocket.connect":
            return
        if not self.server.authorized(_ws_header(scope, b"authorization")):
            await send({"type": "websocket.close", "code": 1008, "reason": "missing or wrong bearer token"})
            return
        await send({"type": "websocket.accept"})
        opened: list[str] = []
        try:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    return
                raw = message.get("text")
                body = raw.encode() if raw is not None else (message.get("bytes") or b"")
                reply = await self._one(scope, body, opened[-1] if opened else None)
                created = reply.get("result") if isinstance(reply, dict) else None
                if isinstance(created, dict) and isinstance(created.get("session_id"), str):
                    if created.get("closed"):
                        opened[:] = [s for s in opened if s != created["session_id"]]
                    elif created["session_id"] not in opened:
                        opened.append(created["session_id"])
                await send({"type": "websocket.send", "text": json.dumps(reply)})
        except (OSError, RuntimeError):
            return  # the client left mid-answer
        finally:
            for session_id in opened:
                session = self.server.sessions.get(session_id)
                if session is not None:
                    await self.server.close(session)

    async def _one(self, scope: dict[str, Any], body: bytes, default_session: str | None) -> Any:
        """One JSON-RPC message through the HTTP handler (the SDK), ``default_session`` filled in where the
        request names none; the JSON answer."""
        if len(body) > self.server.config.max_message_bytes:
            return _rpc_error(INVALID_REQUEST, "message over the server's limit")
        problem = _not_jsonrpc(body)
        if problem is not None:
            return problem
        message = json.loads(body)
        if default_session and isinstance(message, dict) and message.get("method") in NEEDS_SESSION:
            params = message.setdefault("params", {})
            if isinstance(params, dict):
                params.setdefault("session_id", default_session)
            body = json.dumps(message).encode()
        http = {
            "type": "http",
            "asgi": scope.get("asgi", {"version": "3.0"}),
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "root_path": scope.get("root_path", ""),
            "query_string": b"",
            "headers": [(k, v) for k, v in scope.get("headers", []) if k == b"authorization"],
            "client": scope.get("client"),
            "server": scope.get("server"),
        }
        chunks: list[bytes] = []
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def capture(event: dict[str, Any]) -> None:
            if event["type"] == "http.response.body":
                chunks.append(event.get("body", b""))

        await self(http, receive, capture)
        text = b"".join(chunks)
        return json.loads(text) if text else {"jsonrpc": "2.0", "id": message.get("id"), "result": {}}

    # ---- handlers -----------------------------------------------------------------------------------------

    def _session(self, session_id: str | None, method: str) -> Session:
        if not session_id:
            raise MCPError(
                INVALID_PARAMS,
                f"{method} acts on an episode: call openenv/session/create first and pass its session_id",
                {"code": ErrorCode.NOT_RESET.value},
            )
        session = self.server.sessions.get(session_id)
        if session is None:
            raise MCPError(
                INVALID_PARAMS,
                f"no session {session_id[:80]!r} (closed, reaped after idling, or never opened)",
                {"code": ErrorCode.UNKNOWN_TASK.value},
            )
        return session

    async def _list_tools(self, ctx: Any, params: ListParams) -> types.ListToolsResult:
        if params.session_id:
            session = self._session(params.session_id, "tools/list")
            specs = session._tools if session._tools is not None else []
            if specs:
                return types.ListToolsResult(tools=[mcp_tool(t) for t in specs])
        return types.ListToolsResult(
            tools=[mcp_tool(ToolSpec.model_validate(t)) for t in self.server.metadata()["tools"]]
        )

    async def _call_tool(self, ctx: Any, params: CallParams) -> types.CallToolResult:
        session = self._session(params.session_id, "tools/call")
        call = {"name": params.name, "arguments": dict(params.arguments or {})}
        async with session.lock:
            session.busy = True
            try:
                out = await session.step({"text": "", "tool_call": call})
            except ProtocolError as e:
                raise _error(e) from None
            finally:
                session.busy = False
        obs = out["observation"]
        failed = bool(obs["info"].get("parse_error") or obs["info"].get("tool_error"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=obs["text"])],
            structured_content=out,
            is_error=failed,
        )

    async def _create(self, ctx: Any, params: CreateParams) -> dict[str, Any]:
        try:
            session = await self.server.open("mcp")
        except ProtocolError as e:
            raise _error(e) from None
        request = params.model_dump(exclude={"meta"}, exclude_none=True)
        try:
            async with session.lock:
                out = await session.reset(ResetData.model_validate(request).model_dump())
        except ProtocolError as e:
            await self.server.close(session)
            raise _error(e) from None
        return {"session_id": session.id, **out}

    async def _close(self, ctx: Any, params: SessionParams) -> dict[str, Any]:
        session = self._session(params.session_id, "openenv/session/close")
        await self.server.close(session)
        return {"session_id": session.id, "closed": True}


NEEDS_SESSION = ("tools/list", "tools/call", "openenv/session/close")
"""The methods a ``WS /mcp`` connection fills its session into."""


def _ws_header(scope: dict[str, Any], name: bytes) -> str | None:
    for k, v in scope.get("headers", []):
        if k == name:
            return bytes(v).decode("latin-1")
    return None


def _rpc_error(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def _not_jsonrpc(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC error for a body that is no JSON-RPC message (``None``: let the SDK handle it)."""
    try:
        message = json.loads(body or b"null")
    except ValueError as e:
        return _rpc_error(PARSE_ERROR, f"Parse error: {e}; send a JSON-RPC 2.0 request")
    items = message if isinstance(message, list) else [message]
    if not items or not all(
        isinstance(m, dict) and m.get("jsonrpc") == "2.0" and ("method" in m or "result" in m or "error" in m)
        for m in items
    ):
        return _rpc_error(
            INVALID_REQUEST,
            'Invalid Request: send {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}} '
            "(methods: tools/list, tools/call, openenv/session/create, openenv/session/close)",
        )
    return None


async def _reply(send: Any, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
