"""``rubricgym serve --workers N``: N server processes on one port, each session served only by the one that owns it.

The supervisor binds the listening socket once and spawns N workers that all accept on it: the kernel hands
each new connection to one of them. A WebSocket session is one connection, so it lives on the worker that
accepted it and its steps never cross a process. An HTTP session is named by id in requests that may arrive on
any connection, hence any worker: its id starts with its owner's index (``"1-3f2a..."``), and a worker that gets
a request for another's session forwards it (body and ``Authorization`` as received) to the owner's private
Unix socket and relays the answer. A task handed out by one worker (``tasks``) is looked up on its peers when a
session on another worker resets with it (the same sockets, plus a random key only the workers know: the reply
holds the task's hidden record).

Why not uvicorn's ``workers=N``: it shares the socket the same way, but its workers have no index and cannot
reach each other, so an HTTP session would be found only when its request happened to reach the worker that
opened it. Why not a router process in front of N workers: every message of every session would cross one more
process, and that process would be the one-core bottleneck this exists to remove. The price here is one hop for
an HTTP request that lands on a worker other than its session's owner (a keep-alive connection keeps landing on
the same worker); WebSocket steps pay nothing.

Each worker holds at most ``ceil(max_sessions / N)`` sessions, so ``--max-sessions`` still bounds the server.
A worker that dies is not replaced: its WebSocket sessions see their connection close, its HTTP sessions get a
``WORKER_GONE`` error (503) from whichever worker receives their next request, the other workers keep serving,
and the supervisor says so on stderr.
"""

from __future__ import annotations

import contextlib
import hmac
import math
import multiprocessing
import os
import queue
import shutil
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
from fastapi import Request, Response

from rubricgym.core.types import Task
from rubricgym.server.protocol import ErrorCode, ProtocolError

PEER_KEY_HEADER = "x-rubricgym-peer"
PEER_TASK_ROUTE = "/_peer/task"
STOP_TIMEOUT_S = 30.0
"""How long stopped workers may take to close their sessions' envs before they are killed."""


@dataclass(frozen=True)
class Peers:
    """Where one worker stands among the server's workers: its index, and how to reach the others."""

    index: int
    count: int
    run_dir: str
    """A 0700 directory holding each worker's private socket (``worker-<i>.sock``)."""
    key: str
    """Random, shared by the workers only: proves a ``/_peer`` request comes from one of them."""
    token: str | None = None

    @property
    def prefix(self) -> str:
        """What this worker's session ids start with."""
        return f"{self.index}-"

    def socket_path(self, index: int) -> str:
        return str(Path(self.run_dir) / f"worker-{index}.sock")

    def owner(self, session_id: str) -> int | None:
        """The worker a session id names, when it is another worker (``None``: this one, or no worker)."""
        head, sep, _ = session_id.partition("-")
        if not sep or not head.isdigit() or len(head) > 6:
            return None
        owner = int(head)
        return owner if owner != self.index and owner < self.count else None

    def is_peer(self, header: str | None) -> bool:
        return hmac.compare_digest((header or "").encode(), self.key.encode())


class Router:
    """A worker's client of its peers: forwards HTTP requests of their sessions, asks them for issued tasks."""

    def __init__(self, peers: Peers):
        self.peers = peers
        self._clients: dict[int, httpx.AsyncClient] = {}

    def _client(self, index: int) -> httpx.AsyncClient:
        client = self._clients.get(index)
        if client is None:
            client = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=self.peers.socket_path(index)),
                base_url="http://worker",
                timeout=httpx.Timeout(None, connect=5.0),  # a step takes as long as the env takes, as unforwarded
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
                trust_env=False,
            )
            self._clients[index] = client
        return client

    async def forward(self, owner: int, session_id: str, request: Request, body: bytes) -> Response:
        """The owner's answer to ``request`` (status and body as it gave them)."""
        headers = {k: v for k in ("authorization", "content-type") if (v := request.headers.get(k)) is not None}
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            r = await self._client(owner).request(request.method, path, content=body, headers=headers)
        except httpx.TransportError as e:
            raise ProtocolError(
                ErrorCode.WORKER_GONE,
                f"session {session_id[:80]!r} lived on server worker {owner}, which is gone "
                f"({type(e).__name__}); its episode is lost: POST /reset to open a new session",
                status=503,
            ) from None
        return Response(r.content, status_code=r.status_code, media_type=r.headers.get("content-type"))

    async def find_task(self, task_id: str) -> Task | None:
        """The task ``task_id`` that another worker handed out (``None``: none did, or it is gone)."""
        headers = {PEER_KEY_HEADER: self.peers.key}
        if self.peers.token:
            headers["authorization"] = f"Bearer {self.peers.token}"
        for index in range(self.peers.count):
            if index == self.peers.index:
                continue
            try:
                r = await self._client(index).get(PEER_TASK_ROUTE, params={"id": task_id}, headers=headers)
            except httpx.TransportError:
                continue  # a dead peer's tasks are forgotten, as a restarted server's would be
            if r.status_code == 200:
                return Task.model_validate_json(r.content)
        return None

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()


# ---- the supervisor and its workers -------------------------------------------------------------------------


def serve_workers(config: Any, *, log_level: str = "info", announce: bool = True) -> None:
    """Serve ``config`` (a ``ServerConfig``) with ``config.workers`` processes until SIGINT / SIGTERM.

    Raises what a single server would at start (``KeyError`` for an unknown env, ``ValueError``/``TypeError``
    for env kwargs it cannot build with, ``OSError`` for the port) once every worker is stopped again.
    """
    from rubricgym.core.registry import spec
    from rubricgym.server.run import bind, url_of

    spec(config.env_id)  # an unknown id fails before any process starts
    n = config.workers
    sock = bind(config.host, config.port)
    run_dir = tempfile.mkdtemp(prefix="rubricgym-serve-")  # mode 0700: only this user reaches the sockets
    base = Peers(index=0, count=n, run_dir=run_dir, key=os.urandom(32).hex(), token=config.token)
    worker_config = config.model_copy(update={"max_sessions": math.ceil(config.max_sessions / n), "workers": 1})
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads and locks
    ready: Any = ctx.Queue()
    procs = [
        ctx.Process(
            target=run_worker,
            args=(worker_config, Peers(i, n, run_dir, base.key, config.token), sock, log_level, ready),
            name=f"rubricgym-serve-{i}",
        )
        for i in range(n)
    ]
    stop = _Stop()
    try:
        for p in procs:
            p.start()
        _await_ready(procs, ready, stop)
        if announce and not stop.requested:
            pids = ", ".join(str(p.pid) for p in procs)
            print(
                f"serving {config.env_id} at {url_of(sock)} (WS /ws; HTTP {url_of(sock, 'http')}; "
                f"{n} workers, pids {pids})",
                flush=True,
            )
        _watch(procs, stop)
    finally:
        stop.restore()
        _stop_all(procs)
        ready.close()
        sock.close()
        shutil.rmtree(run_dir, ignore_errors=True)


class _Stop:
    """SIGINT / SIGTERM to the supervisor: stop serving (the workers get SIGTERM and close their sessions)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


_ERRORS: dict[str, type[Exception]] = {"KeyError": KeyError, "ValueError": ValueError, "TypeError": TypeError}


def _await_ready(procs: list[Any], ready: Any, stop: _Stop) -> None:
    """Wait until every worker serves; a worker that fails to start raises its error here."""
    waiting = set(range(len(procs)))
    while waiting and not stop.requested:
        try:
            index, error = ready.get(timeout=0.1)
        except queue.Empty:
            dead = [i for i in waiting if procs[i].exitcode is not None]
            if dead:
                code = procs[dead[0]].exitcode
                raise RuntimeError(f"server worker {dead[0]} exited at start (exit code {code})") from None
            continue
        if error is not None:
            kind, message = error
            raise _ERRORS.get(kind, RuntimeError)(message)
        waiting.discard(index)


def _watch(procs: list[Any], stop: _Stop) -> None:
    """Serve until asked to stop; say so once for each worker that dies; stop when none is left."""
    reported: set[int] = set()
    while not stop.requested:
        time.sleep(0.2)
        for i, p in enumerate(procs):
            if p.exitcode is not None and i not in reported:
                reported.add(i)
                left = len(procs) - len(reported)
                print(
                    f"rubricgym serve: worker {i} (pid {p.pid}) exited with code {p.exitcode}; its sessions are lost "
                    f"(HTTP ones get WORKER_GONE), {left} worker(s) keep serving",
                    file=sys.stderr,
                    flush=True,
                )
        if len(reported) == len(procs):
            raise RuntimeError("every server worker has exited")


def _stop_all(procs: list[Any]) -> None:
    for p in procs:
        if p.pid is not None and p.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for p in procs:
        if p.pid is not None:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.exitcode is None:
                p.kill()
                p.join(5.0)


def unix_socket(path: str) -> socket.socket:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(2048)
    return sock


def run_worker(config: Any, peers: Peers, sock: socket.socket, log_level: str, ready: Any) -> None:
    """One worker process: the app over the shared socket and its private one, until SIGINT / SIGTERM."""
    import asyncio

    from rubricgym.server.app import create_app
    from rubricgym.server.run import uvicorn_server

    try:
        app = create_app(config, peers=peers)
        private = unix_socket(peers.socket_path(peers.index))
    except Exception as e:  # reported to the supervisor, which raises it as a single server would
        ready.put((peers.index, (type(e).__name__, str(e.args[0]) if isinstance(e, KeyError) else str(e))))
        return
    server = uvicorn_server(config, app, log_level=log_level)

    async def main() -> None:
        serving = asyncio.ensure_future(server.serve(sockets=[sock, private]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        ready.put((peers.index, None if server.started else ("RuntimeError", "the worker did not start")))
        await serving

    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(main())
