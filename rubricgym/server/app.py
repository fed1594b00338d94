"""The FastAPI app of ``rubricgym serve``: OpenEnv's routes over any registered env, many sessions at once.

``WS /ws`` is the session protocol (one connection = one env instance, created on connect and closed on
disconnect; ``ws``). ``POST /reset`` opens an HTTP session (its ``session_id`` comes back beside the observation) that
``POST /step``, ``GET /state`` and ``POST /close`` continue; OpenEnv's reference server builds a fresh env per
HTTP request instead, which cannot continue an episode. ``GET /health`` (unauthenticated, for providers that
poll it), ``GET /schema`` and ``GET /metadata`` describe the server. With ``--workers N`` this app runs in each
worker process and HTTP requests of another worker's session are forwarded to it (``peers``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.routing import Route

from rubricgym import __version__
from rubricgym.core.env import RubricEnv
from rubricgym.core.registry import make, spec
from rubricgym.server.inline import InlineSteps
from rubricgym.server.mcp import MCPEndpoint
from rubricgym.server.peers import PEER_KEY_HEADER, PEER_TASK_ROUTE, Peers, Router
from rubricgym.server.policy import IssuedTasks
from rubricgym.server.protocol import (
    MAX_IDLE_S,
    MAX_ISSUED,
    MAX_MESSAGE_BYTES,
    MAX_SEED,
    MAX_SESSIONS,
    MAX_WORKERS,
    MIN_IDLE_S,
    ErrorCode,
    HTTPReset,
    HTTPStep,
    ProtocolError,
    dumps_bytes,
    schema,
)
from rubricgym.server.session import Session, SessionPolicy
from rubricgym.server.tasks import TaskSource, add_task_routes
from rubricgym.server.threads import EnvThreads
from rubricgym.server.worker import ProcessRunner, ThreadRunner, start_forkserver, worker_context
from rubricgym.server.ws import WebSocketEndpoint


class ServerConfig(BaseModel):
    """What ``rubricgym serve`` was asked for."""

    model_config = ConfigDict(extra="forbid")

    env_id: str
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    max_sessions: int = Field(default=256, ge=1, le=MAX_SESSIONS)
    idle_timeout_s: float = Field(default=600.0, ge=MIN_IDLE_S, le=MAX_IDLE_S)
    """Seconds a session may idle before it is closed (the reaper wakes every quarter of it, at most every 5 s:
    a tiny value would spin a core)."""
    token: str | None = Field(default=None, min_length=1)
    """Bearer token every route but ``/health`` requires (``Authorization: Bearer TOKEN``); never empty."""
    max_message_bytes: int = Field(default=1 << 20, ge=1024, le=MAX_MESSAGE_BYTES)
    """Largest WS message or HTTP body a client may send (refused on ``Content-Length`` before it is read)."""
    max_tasks: int = Field(default=1000, ge=1, le=MAX_ISSUED)
    """Most tasks one ``tasks`` request may ask for."""
    issued_tasks: int = Field(default=10_000, ge=1, le=MAX_ISSUED)
    """How many handed-out tasks the server remembers for ``reset`` by ``task_id``: room is made from closed
    sessions' tasks, never from an open session's (``policy.IssuedTasks``)."""
    issued_per_client: int = Field(default=2000, ge=1, le=MAX_ISSUED)
    """How many handed-out tasks one session holds (asking for more forgets its own oldest)."""
    accept_client_tasks: bool = False
    """Play tasks a client sends (checked: no field may name a host path); off: only the server's own tasks."""
    trusted: bool = False
    """Send clients the hidden record (``Task.hidden``, private step info): for a trainer scoring on its side."""
    isolation: Literal["thread", "process"] = "thread"
    """Where each session's env runs: a server thread, or a process of its own (env code that computes in pure
    Python for long, which in a thread would hold the interpreter lock and slow every other session)."""
    inline_steps: bool = True
    """Run a thread-isolated session's sync steps and resets on the event loop once it has shown they are short
    (``inline``: the thread hop costs more than such a call); off: every env call on a thread."""
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS)
    """Server processes sharing the port (``cluster``): sessions spread over them, each served by its owner."""
    tasks_per_split: int = Field(default=100, ge=1, le=MAX_ISSUED)
    """How many numbered tasks each split has in OpenEnv's Task API (``reset(split, index)``; see ``tasks``)."""
    task_seed: int = Field(default=0, ge=0, le=MAX_SEED)
    """The seed of the Task API's task lists (``env.task_set(tasks_per_split, task_seed, split)``)."""

    @model_validator(mode="after")
    def _issued_fits(self) -> ServerConfig:
        if not self.max_tasks <= self.issued_per_client <= self.issued_tasks:
            raise ValueError(
                f"need max_tasks ({self.max_tasks}) <= issued_per_client ({self.issued_per_client}) <= issued_tasks "
                f"({self.issued_tasks}) (--max-tasks, --issued-per-client, --issued-tasks): one tasks reply must fit "
                "a session's share, and a share the server's store"
            )
        return self


class EnvServer:
    """Sessions of one env: capacity, idle reaping, and closing every env on shutdown."""

    def __init__(
        self, config: ServerConfig, factory: Callable[[], RubricEnv] | None = None, peers: Peers | None = None
    ):
        self.config = config
        self.peers = peers
        self.router = Router(peers) if peers is not None else None
        self.spec = spec(config.env_id)  # fail at start, with close matches, not on the first connection
        self.factory = factory or (lambda: make(config.env_id, **config.env_kwargs))
        self.sessions: dict[str, Session] = {}
        self.stopping = False
        self._opening = 0
        self._reaper: asyncio.Task[None] | None = None
        # a thread for every session (and a few for opening ones): no session's env call waits for another's
        self.executor = EnvThreads(config.max_sessions + 4, name="rubricgym-env")
        self.inline = InlineSteps(threads_busy=self.executor.busy) if config.inline_steps else None
        self.policy = SessionPolicy(
            executor=self.executor,
            trusted=config.trusted,
            accept_client_tasks=config.accept_client_tasks,
            max_tasks=config.max_tasks,
            issued=IssuedTasks(config.issued_tasks, config.issued_per_client),
            find_task=self.router.find_task if self.router is not None else None,
        )
        self._probe = self.factory()
        self._worker_factory = factory or functools.partial(make, config.env_id, **config.env_kwargs)  # picklable
        self._ctx = (
            worker_context(["rubricgym", type(self._probe).__module__]) if config.isolation == "process" else None
        )  # built now so bad env kwargs fail at start; answers /metadata, never stepped
        self.task_source = TaskSource(self._probe, self.executor, config.tasks_per_split, config.task_seed)
        self.policy.numbered_task = self.task_source.task

    # ---- lifecycle ----------------------------------------------------------------------------------------

    async def open(self, kind: str) -> Session:
        if self.stopping:
            raise ProtocolError(ErrorCode.SHUTTING_DOWN, "the server is shutting down", status=503)
        if self.active >= self.config.max_sessions:
            raise ProtocolError(
                ErrorCode.CAPACITY_REACHED,
                f"the server is at capacity ({self.config.max_sessions} sessions); retry later or raise --max-sessions",
                status=503,
                active_sessions=len(self.sessions),
                max_sessions=self.config.max_sessions,
            )
        self._opening += 1  # counted while its env is built, so capacity holds under a burst of connections
        loop = asyncio.get_running_loop()
        runner: ThreadRunner | ProcessRunner
        try:
            if self._ctx is not None:
                runner = await loop.run_in_executor(
                    self.executor, ProcessRunner, self._worker_factory, self._ctx, self.executor
                )
            else:
                env = await loop.run_in_executor(self.executor, self.factory)
                runner = ThreadRunner(env, self.executor, self.inline)
        except Exception as e:
            raise ProtocolError(ErrorCode.FACTORY_ERROR, f"cannot build env {self.config.env_id!r}: {e}") from e
        finally:
            self._opening -= 1
        session = Session(runner, kind, self.policy, id_prefix=self.peers.prefix if self.peers is not None else "")
        self.sessions[session.id] = session
        return session

    async def close(self, session: Session) -> None:
        self.sessions.pop(session.id, None)
        await session.close()

    async def reap(self) -> None:
        """Close sessions idle longer than ``idle_timeout_s`` (a step in progress is never reaped)."""
        timeout = self.config.idle_timeout_s
        while True:
            await asyncio.sleep(min(timeout / 4, 5.0))
            now = time.monotonic()
            for s in list(self.sessions.values()):
                if not s.busy and now - s.last_active > timeout:
                    if s.on_reap is not None:
                        with contextlib.suppress(Exception):  # the socket may already be half gone
                            await s.on_reap()
                    await self.close(s)

    async def start(self) -> None:
        self._reaper = asyncio.create_task(self.reap())
        if self._ctx is not None:  # start the forkserver now (it imports the env once), not on the first session
            await asyncio.get_running_loop().run_in_executor(self.executor, start_forkserver, self._ctx)

    async def shutdown(self) -> None:
        self.stopping = True
        if self._reaper is not None:
            self._reaper.cancel()
        for s in list(self.sessions.values()):
            if s.on_reap is not None:
                with contextlib.suppress(Exception):
                    await s.on_reap(ErrorCode.SHUTTING_DOWN)
            await self.close(s)
        await asyncio.get_running_loop().run_in_executor(self.executor, self._probe.close)
        self.executor.shutdown(wait=False, cancel_futures=True)
        if self.router is not None:
            await self.router.aclose()

    # ---- descriptions -------------------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        cls, probe = type(self._probe), self._probe
        return {
            "name": self.spec.id,
            "env_id": self.spec.id,
            "description": self.spec.description,
            "version": __version__,
            "stages": list(cls.stages),
            "max_steps": probe.max_steps,
            "tools": _tools(probe),
            "checks": sorted(cls.checks()),
            "agents": sorted(cls.agents()),
            "nondeterministic": self.spec.nondeterministic,
            "default_rubric": cls.default_rubric(),
            "active_sessions": self.active,
            "max_sessions": self.config.max_sessions,
        }

    @property
    def active(self) -> int:
        return len(self.sessions) + self._opening

    def authorized(self, header: str | None) -> bool:
        """Whether ``header`` is ``Bearer TOKEN`` (scheme case-insensitive, RFC 7235); no token: always."""
        token = self.config.token
        if token is None:
            return True
        scheme, _, given = (header or "").strip().partition(" ")
        ok = hmac.compare_digest(given.strip().encode(), token.encode())  # compared even on a bad scheme
        return ok and scheme.lower() == "bearer"


def _tools(env: RubricEnv) -> list[dict[str, Any]]:
    """The env's tools before any episode ([] for an env whose tools only exist once a task is drawn)."""
    try:
        return [t.model_dump() for t in env.tools()]
    except Exception:
        return []


class EnvApp(FastAPI):
    """The server's FastAPI app; ``WS /ws`` goes straight to its ASGI endpoint (``ws``), past the routing."""

    def __init__(self, ws_endpoint: WebSocketEndpoint, mcp_endpoint: MCPEndpoint, **kwargs: Any):
        super().__init__(**kwargs)
        self.ws_endpoint, self.mcp_endpoint = ws_endpoint, mcp_endpoint

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            await self.ws_endpoint(scope, receive, send)
        elif scope["type"] == "websocket" and scope["path"] == "/mcp":
            await self.mcp_endpoint.websocket(scope, receive, send)
        else:
            await super().__call__(scope, receive, send)


def create_app(  # noqa: C901 (declares the nested route handlers)
    config: ServerConfig, factory: Callable[[], RubricEnv] | None = None, peers: Peers | None = None
) -> FastAPI:
    """The app serving ``config.env_id`` (``factory`` overrides how each session's env is built; ``peers``: this
    app is one of the server's worker processes)."""
    server = EnvServer(config, factory, peers)
    router = server.router

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await server.start()
        try:
            async with mcp.run():
                yield
        finally:
            await server.shutdown()

    mcp = MCPEndpoint(server)
    app = EnvApp(
        WebSocketEndpoint(server), mcp, title=f"rubricgym: {config.env_id}", version=__version__, lifespan=lifespan
    )
    app.state.server = server
    app.router.routes.append(Route("/mcp", endpoint=mcp, methods=["POST", "GET", "DELETE"]))

    @app.middleware("http")
    async def auth(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        """Every HTTP route but ``/health`` needs the token: the API, ``/docs``, ``/redoc``, ``/openapi.json``."""
        if request.url.path != "/health" and not server.authorized(request.headers.get("authorization")):
            return JSONResponse(
                {"detail": "missing or wrong bearer token: send 'Authorization: Bearer TOKEN'", "code": "UNAUTHORIZED"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        return await call_next(request)

    async def body(request: Request, model: type[BaseModel]) -> tuple[bytes, Any]:
        """The raw body (forwarded as is to another worker) and the request it validates as."""
        raw = await read_body(request, config.max_message_bytes)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(
                ErrorCode.INVALID_JSON, f"the body is not valid UTF-8 (byte {e.start}): send UTF-8 JSON"
            ) from None
        try:
            return raw, model.model_validate_json(text or "{}")
        except ValidationError as e:
            raise HTTPException(422, json.loads(e.json(include_url=False, include_input=False))) from None

    def owner(session_id: str | None) -> int | None:
        """The other worker that owns ``session_id`` (``None``: this one, or a single server)."""
        return peers.owner(session_id) if peers is not None and session_id else None

    def http_session(session_id: str | None) -> Session:
        if session_id is None:
            raise HTTPException(
                400, "HTTP steps continue a session: pass the session_id that POST /reset returned (or use WS /ws)"
            )
        session = server.sessions.get(session_id)
        if session is None:
            raise HTTPException(404, f"no session {session_id!r} (closed, reaped after idling, or never opened)")
        session.last_active = time.monotonic()
        return session

    @app.exception_handler(ProtocolError)
    async def protocol_error(_: Request, e: ProtocolError) -> JSONResponse:
        return JSONResponse({"detail": e.message, "code": e.code.value, **e.extra}, status_code=e.status)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        out = {"status": "healthy", "env_id": config.env_id, "active_sessions": server.active}
        return out if peers is None else {**out, "worker": peers.index}  # counts are this worker's

    @app.get("/schema")
    async def get_schema() -> dict[str, Any]:
        return schema()

    @app.get("/metadata")
    async def metadata() -> dict[str, Any]:
        return server.metadata()

    @app.post("/reset")
    async def reset(request: Request) -> Response:
        raw, req = await body(request, HTTPReset)
        if router is not None and (other := owner(req.session_id)) is not None:
            return await router.forward(other, req.session_id, request, raw)
        session = http_session(req.session_id) if req.session_id else await server.open("http")
        async with session.lock:
            try:
                out = await session.reset(req.model_dump(exclude={"session_id"}))
            except ProtocolError:
                if req.session_id is None:
                    await server.close(session)
                raise
        return _json({**out, "session_id": session.id})

    @app.post("/step")
    async def step(request: Request) -> Response:
        raw, req = await body(request, HTTPStep)
        if router is not None and (other := owner(req.session_id)) is not None:
            return await router.forward(other, req.session_id, request, raw)
        session = http_session(req.session_id)
        async with session.lock:
            session.busy = True
            try:
                out = await session.step(req.action.model_dump())
            finally:
                session.busy = False
        return _json({**out, "session_id": session.id})

    @app.get("/state")
    async def state(request: Request, session_id: str | None = None) -> Response:
        if router is not None and session_id and (other := owner(session_id)) is not None:
            return await router.forward(other, session_id, request, b"")
        return _json(await http_session(session_id).state())

    @app.post("/close")
    async def close(request: Request) -> Response:
        raw, req = await body(request, _CloseRequest)
        if router is not None and (other := owner(req.session_id)) is not None:
            return await router.forward(other, req.session_id, request, raw)
        await server.close(http_session(req.session_id))
        return _json({"closed": req.session_id})

    if peers is not None:

        @app.get(PEER_TASK_ROUTE, include_in_schema=False)
        async def peer_task(request: Request, id: str) -> Response:
            """A task this worker handed out, hidden record included: for the other workers only (their key)."""
            task = server.policy.issued.get(id) if peers.is_peer(request.headers.get(PEER_KEY_HEADER)) else None
            if task is None:
                raise HTTPException(404, "no such task")
            return Response(task.model_dump_json(), media_type="application/json")

    add_task_routes(app, config.env_id, server.task_source, config.trusted)
    return app


def _json(obj: Any) -> Response:
    """A JSON response rendered once (FastAPI would walk a returned dict with ``jsonable_encoder`` first)."""
    return Response(dumps_bytes(obj), media_type="application/json")


async def read_body(request: Request, limit: int) -> bytes:
    """The body; 413 on ``Content-Length`` before reading, or (chunked) as soon as it passes ``limit``."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ProtocolError(ErrorCode.VALIDATION_ERROR, f"Content-Length {declared[:40]!r} is not a byte count")
        if int(declared) > limit:
            raise _too_large(int(declared), limit)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise _too_large(len(raw), limit)
    return bytes(raw)


def _too_large(size: int, limit: int) -> ProtocolError:
    return ProtocolError(
        ErrorCode.MESSAGE_TOO_LARGE,
        f"request body of {size}+ bytes is over the {limit}-byte limit (the server's --max-message-bytes)",
        status=413,
    )


class _CloseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session_id: str
