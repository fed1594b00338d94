"""``WS /ws``: the session protocol, one connection = one env instance (created on connect, closed on disconnect).

The endpoint is a plain ASGI app that ``EnvApp`` (``app``) calls before FastAPI's routing: a step is one
message in and one out, and Starlette's ``WebSocket`` wrapper and the exception-handling ``send`` wrapper around
it took ~7% of the event loop's samples per step (py-spy on ``bench/server.py``'s load) without doing anything
this endpoint needs. What a client sees is unchanged: the bearer token is checked before the handshake
(refused: close code 1008, an HTTP 403), every bad message gets an ``error`` reply and the socket stays open, and
a session that cannot open gets an ``error`` reply and a close.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import pydantic_core

from rubricgym.server.protocol import ErrorCode, ProtocolError, dumps
from rubricgym.server.session import Session

if TYPE_CHECKING:
    from rubricgym.server.app import EnvServer

WS_POLICY_VIOLATION = 1008
WS_GOING_AWAY = 1001
WS_INTERNAL_ERROR = 1011

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
_CLIENT_GONE = (RuntimeError, OSError)  # uvicorn raises ClientDisconnected (an OSError) on a send to a gone client


class Connection:
    """The ASGI side of one accepted WebSocket: text frames out, and whether it is still open both ways."""

    def __init__(self, send: Send):
        self._send = send
        self.open = True  # until the client disconnects or this side sends a close

    async def send_text(self, text: str) -> None:
        await self._send({"type": "websocket.send", "text": text})

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.open:
            self.open = False
            await self._send({"type": "websocket.close", "code": code, "reason": reason})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class WebSocketEndpoint:
    """The ``WS /ws`` ASGI app of one ``EnvServer``."""

    def __init__(self, server: EnvServer):
        self.server = server

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        server = self.server
        if (await receive())["type"] != "websocket.connect":
            return  # the client left during the handshake
        if not server.authorized(_header(scope, b"authorization")):
            await send(
                {"type": "websocket.close", "code": WS_POLICY_VIOLATION, "reason": "missing or wrong bearer token"}
            )
            return
        await send({"type": "websocket.accept"})
        conn = Connection(send)
        try:
            session = await server.open("ws")
        except ProtocolError as e:
            with contextlib.suppress(*_CLIENT_GONE):
                await conn.send_text(dumps(e.reply()))
                await conn.close(WS_GOING_AWAY if e.code is ErrorCode.CAPACITY_REACHED else WS_INTERNAL_ERROR)
            return

        async def reap(code: ErrorCode = ErrorCode.IDLE_TIMEOUT) -> None:
            if conn.open:
                message = "session idle too long; reconnect" if code is ErrorCode.IDLE_TIMEOUT else "server stopping"
                await conn.send_text(dumps(ProtocolError(code, message).reply()))
                await conn.close(WS_GOING_AWAY, code.value)

        session.on_reap = reap
        try:
            await serve_session(receive, conn, session, server.config.max_message_bytes)
        except _CLIENT_GONE:
            pass  # the client left (possibly mid-step) or the reaper closed the socket
        finally:
            await server.close(session)
            with contextlib.suppress(*_CLIENT_GONE):
                await conn.close()


async def serve_session(receive: Receive, conn: Connection, session: Session, max_bytes: int) -> None:
    """The message loop of one WebSocket session; every bad message gets an ``error`` reply, never a drop."""
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            conn.open = False
            return
        raw = message.get("text")
        if raw is None:
            raw = message.get("bytes") or b""
        session.last_active = time.monotonic()
        session.busy = True
        try:
            reply = await handle(session, raw, max_bytes)
        except ProtocolError as e:
            reply = e.reply()
        except Exception as e:  # an env bug: report it on this session, keep serving
            reply = ProtocolError(ErrorCode.EXECUTION_ERROR, f"{type(e).__name__}: {e}").reply()
        finally:
            session.busy = False
        if reply is None:
            return
        if not conn.open:
            return  # the reaper closed it while the step ran
        await conn.send_text(dumps(reply))


async def handle(session: Session, raw: str | bytes, max_bytes: int) -> dict[str, Any] | None:
    """The reply to one raw message (``None`` for ``close``)."""
    if len(raw) > max_bytes:
        raise ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, f"message of {len(raw)} bytes is over the {max_bytes} limit")
    try:
        msg = pydantic_core.from_json(raw)  # a third of json.loads's time
    except ValueError:
        try:  # json.loads decides what is valid (NaN, lone surrogates) and says what is wrong
            msg = json.loads(raw)
        except ValueError as e:
            raise ProtocolError(ErrorCode.INVALID_JSON, f"Invalid JSON: {e}") from None
    if not isinstance(msg, dict):
        raise ProtocolError(ErrorCode.VALIDATION_ERROR, 'a message is a JSON object {"type": ..., "data": ...}')
    kind, data = msg.get("type"), msg.get("data")
    if kind == "step":
        return {"type": "observation", "data": await session.step(data)}
    if kind == "reset":
        return {"type": "observation", "data": await session.reset(data)}
    if kind == "state":
        return {"type": "state", "data": await session.state()}
    if kind == "close":
        return None
    if kind == "trajectory":
        return {"type": "trajectory", "data": await session.trajectory()}
    if kind == "tasks":
        return {"type": "tasks", "data": await session.tasks(data)}
    raise ProtocolError(
        ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {kind}; use reset, step, state, close, trajectory or tasks"
    )
